// What a failed id_token verification says reaches apps: the webhook's answer to the sender, the quarantine that
// mobileIdRejections returns once a pending notification gives up, and the logs. The token's faults are named in
// the gateway's words; the gateway's own trouble (the JWKS down) names the URL and the failure's code only; and an
// unexpected error (a bug's, a library's) keeps none of its words there: it is logged in full, as an error, once
// per check (docs/contract.md, Error codes).
import { exportJWK, generateKeyPair } from 'jose';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { RemoteJwks } from '../../src/mobile-id/jwks.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startJwksServer } from '../helpers/jwt.js';
import {
  OPERATOR_CLIENT_ID,
  OPERATOR_ISSUER,
  operatorJwks,
  postNotification,
  signedNotification,
} from '../helpers/mobile-id.js';

const OPS = 'ops-key';
const NOTIFY = 'operator-notification-token';
const SECRET = 'secret-internal-detail /var/lib/x SELECT * FROM t';
/** Far past any EVENT_RETENTION (default 7 days): a pending notification gives up and is quarantined. */
const GIVE_UP = 400 * 86_400_000;
const REJECTIONS = `{ mobileIdRejections(first: 50) { authReqId httpStatus reason description } }`;

const started: Array<{ close(): Promise<unknown> }> = [];
afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(
    started
      .splice(0)
      .reverse()
      .map((s) => s.close()),
  );
});

async function gateway(jwksUrl: string): Promise<TestGateway> {
  const gw = await startTestGateway({
    GATEWAY_API_KEYS: 'app-key-1',
    OPERATOR_API_KEYS: OPS,
    SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
    MOBILEID_NOTIFICATION_TOKENS: NOTIFY,
    MOBILEID_JWKS_URL: jwksUrl,
    MOBILEID_ISSUER: OPERATOR_ISSUER,
    MOBILEID_CLIENT_ID: OPERATOR_CLIENT_ID,
  });
  started.push(gw);
  return gw;
}

async function rejections(gw: TestGateway) {
  return (await gw.graphql(REJECTIONS, {}, { key: OPS })).data!.mobileIdRejections as Array<Record<string, unknown>>;
}

/** The log lines (parsed) whose text holds `needle`. */
function linesWith(gw: TestGateway, needle: string): Array<Record<string, unknown>> {
  return gw
    .logs()
    .split('\n')
    .filter((l) => l.includes(needle))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('an unexpected error while an id_token is verified', () => {
  it('keeps the notification pending, and quarantines it at EVENT_RETENTION with none of its words; it is logged in full as an error', async () => {
    const jwks = await operatorJwks();
    started.push(jwks);
    jwks.setUp(true);
    const gw = await gateway(jwks.url);
    // Only an internal throw reaches this branch: the key lookup (one method of the running gateway) throws a bug's
    // TypeError, as a defect in the lookup or a driver under it would.
    vi.spyOn(RemoteJwks.prototype, 'getKey').mockRejectedValue(new TypeError(SECRET));

    const res = await postNotification(gw, await signedNotification(jwks.privateKey, 'bug-1'), { token: NOTIFY });
    // Our side's trouble, never the sender's: acknowledged and kept pending, as for a JWKS that is down.
    expect(res.status).toBe(204);
    expect(res.text).not.toContain('secret-internal-detail');

    expect(await gw.gateway.services.mobileId.verifyPending(Date.now() + GIVE_UP)).toMatchObject({ refused: 1 });
    const rows = await rejections(gw);
    expect(rows).toMatchObject([{ authReqId: 'bug-1', httpStatus: 204, reason: 'JWKS_UNAVAILABLE' }]);
    const description = rows[0]!.description as string;
    expect(description).not.toMatch(/secret-internal-detail|\/var\/lib\/x|SELECT|TypeError/);
    expect(description).toContain('the id_token could not be verified: Internal server error');

    // Once per check (the webhook's, the pending pass's), in full, as an error; no other line repeats its words.
    const logged = linesWith(gw, 'secret-internal-detail');
    expect(logged).toHaveLength(2);
    for (const line of logged)
      expect(line).toMatchObject({ level: 50, authReqId: 'bug-1', err: { type: 'TypeError', message: SECRET } });
  });

  it('is told from a JWKS that publishes a private key: ours, named as the JWKS failure, not logged as unexpected', async () => {
    // A JWKS that publishes a private key: jose refuses to verify with it (JWKSInvalid), the operator's JWKS is at
    // fault, not the token.
    const { privateKey } = await generateKeyPair('ES256', { extractable: true });
    const privateJwk = { ...(await exportJWK(privateKey)), kid: 'op-1', alg: 'ES256', use: 'sig' };
    const jwks = await startJwksServer([{ kid: 'op-1', alg: 'ES256', privateKey, publicJwk: privateJwk }]);
    started.push({ close: () => jwks.stop() });
    const gw = await gateway(jwks.url);

    const res = await postNotification(gw, await signedNotification(privateKey, 'private-1'), { token: NOTIFY });
    expect(res.status).toBe(204);
    expect(await gw.gateway.services.mobileId.verifyPending(Date.now() + GIVE_UP)).toMatchObject({ refused: 1 });
    const rows = await rejections(gw);
    expect(rows).toMatchObject([{ authReqId: 'private-1', reason: 'JWKS_UNAVAILABLE' }]);
    expect(rows[0]!.description).toContain('the JWKS could not be loaded: ');
    expect(rows[0]!.description).not.toContain('Internal server error');
    expect(gw.logs()).not.toContain('unexpected error');
  });
});

describe('a JWKS that cannot be reached', () => {
  it("is named in the quarantine by its URL and the failure's code, never by the driver's sentence or the address", async () => {
    // A host name, as a deployment names the operator's JWKS: the address it resolves to is in no configuration.
    const jwks = await operatorJwks();
    const url = jwks.url.replace('127.0.0.1', 'localhost');
    const { privateKey } = jwks;
    await jwks.close();
    const gw = await gateway(url);

    const res = await postNotification(gw, await signedNotification(privateKey, 'down-1'), { token: NOTIFY });
    expect(res.status).toBe(204);
    expect(await gw.gateway.services.mobileId.verifyPending(Date.now() + GIVE_UP)).toMatchObject({ refused: 1 });
    const rows = await rejections(gw);
    expect(rows).toMatchObject([{ authReqId: 'down-1', reason: 'JWKS_UNAVAILABLE' }]);
    const description = rows[0]!.description as string;
    expect(description).toContain(`GET ${url} failed: ECONNREFUSED`);
    expect(description).not.toContain('connect ECONNREFUSED');
    expect(description.replaceAll(url, '')).not.toMatch(/127\.0\.0\.1|::1/);
  });
});

describe('an unexpected error while the JWKS is fetched', () => {
  it('is not the failure the quarantine names: the fetch failure keeps none of its words, and it is logged in full', async () => {
    const jwks = await operatorJwks();
    started.push(jwks);
    jwks.setUp(true);
    const gw = await gateway(jwks.url);
    // Only an internal throw reaches this: the fetch's metric (one method of the running gateway) throws a bug's
    // error after each good fetch, so that the keys are held and their last fetch counts as failed.
    const counter = gw.gateway.services.metrics.mobileIdJwksFetches;
    const inc = counter.inc.bind(counter);
    vi.spyOn(counter, 'inc').mockImplementation((labels) => {
      if ((labels as { outcome?: string } | undefined)?.outcome === 'ok') throw new TypeError(SECRET);
      inc(labels as never);
    });
    // Signed with a key of a kid the JWKS lacks: the lookup asks for a fetch again, and names the last one's failure.
    const { privateKey: rotated } = await generateKeyPair('ES256', { extractable: true });
    const n = await signedNotification(rotated, 'fetch-bug-1', { kid: 'op-2' });
    expect((await postNotification(gw, n, { token: NOTIFY })).status).toBe(204);

    expect(await gw.gateway.services.mobileId.verifyPending(Date.now() + GIVE_UP)).toMatchObject({ refused: 1 });
    const rows = await rejections(gw);
    expect(rows).toMatchObject([{ authReqId: 'fetch-bug-1', reason: 'JWKS_UNAVAILABLE' }]);
    const description = rows[0]!.description as string;
    expect(description).not.toMatch(/secret-internal-detail|\/var\/lib\/x|SELECT|TypeError/);
    expect(description).toContain('could not be fetched again (Internal server error)');
    const logged = linesWith(gw, 'secret-internal-detail');
    expect(logged.length).toBeGreaterThan(0);
    for (const line of logged) expect(line).toMatchObject({ level: 50, err: { type: 'TypeError', message: SECRET } });
  });
});
