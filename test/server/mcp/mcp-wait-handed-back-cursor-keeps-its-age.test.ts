// A wait_for_events call that found events it may not hand out (a reload was checking its credential, then refused it)
// answers with the caller's own position, to resume from with nothing missed. That cursor keeps the age of the one
// passed in: dated when it was handed back, it passed the EVENT_RETENTION check after events past its position may
// have been purged, a silent gap where the caller is owed the `expired` refusal. On the gateway's testing clock.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, tempDataDir, type TestGateway } from '../../helpers/gateway.js';
import {
  AUDIENCE,
  ISSUER,
  sign,
  signingKey,
  startJwksServer,
  testClock,
  type JwksServer,
  type SigningKey,
} from '../../helpers/jwt.js';
import { rawMcpPost } from '../../helpers/mcp.js';
import { waitFor } from '../../helpers/wait.js';

const SRE_KEY = 'sre-key-0123456789abcdef';
const HOUR = 3600_000;
const REGISTER = `mutation { registerVerification(input: { workflowId: "wf-kyc", applicant: { lastName: "Petrova" } }) {
  verification { externalId }
} }`;

const digest = (key: string) => createHash('sha256').update(key).digest('hex');
/** The apps file: the operator sre. */
const APPS_YAML = [
  'apps:',
  '  - name: sre',
  '    scopes: [operator]',
  `    keys: [{ sha256: ${digest(SRE_KEY)} }]`,
  '',
].join('\n');
/**
 * The identity provider (AUTH_ISSUERS, which a reload reads again), accepting the apps `apps`: any (`"*"`), or another
 * than portal, which refuses portal's tokens from then on.
 */
const issuersYaml = (apps: string) =>
  [
    'issuers:',
    `  - issuer: ${ISSUER}`,
    `    jwksUrl: ${idp.url}`,
    `    audience: ${AUDIENCE}`,
    `    apps: [${apps}]`,
    '',
  ].join('\n');

const clock = testClock();
let first: SigningKey;
let rotated: SigningKey;
let idp: JwksServer;
let issuers: string;
let t: TestGateway;

/** A token of the JWT app portal, alive for a week on the gateway's clock. */
const token = (key: SigningKey) =>
  sign(key, { exp: Math.floor(clock.now() / 1000) + 7 * 24 * 3600, claims: { azp: 'portal' } });

async function reload(): Promise<void> {
  const res = await request(`${t.url}/admin/reload`, {
    method: 'POST',
    headers: { authorization: `Bearer ${SRE_KEY}` },
  });
  expect(res.statusCode, await res.body.text()).toBe(200);
}

let id = 0;
/** Calls wait_for_events over raw HTTP with `credential`: its tool result. */
async function waitForEvents(credential: string, args: Record<string, unknown>): Promise<Record<string, any>> {
  id += 1;
  const body = { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'wait_for_events', arguments: args } };
  const { status, text, messages } = await rawMcpPost(t, credential, body);
  expect(status, text).toBe(200);
  return messages[0]!.result as Record<string, any>;
}

beforeAll(async () => {
  first = await signingKey('idp-first');
  rotated = await signingKey('idp-rotated');
  idp = await startJwksServer([first]);
  const dir = tempDataDir('cursor-age-');
  const apps = path.join(dir, 'apps.yaml');
  fs.writeFileSync(apps, APPS_YAML);
  issuers = path.join(dir, 'issuers.yaml');
  fs.writeFileSync(issuers, issuersYaml('"*"'));
  t = await startTestGateway(
    { GATEWAY_APPS_FILE: apps, AUTH_ISSUERS: issuers, EVENT_RETENTION: '1d', SANDBOX_CALLBACK_DELAY_MS: '600000' },
    { testing: { clock: clock.now } },
  );
});
afterAll(async () => {
  idp?.release();
  await t?.close();
  await idp?.stop();
});

describe('the cursor a held wait_for_events hands back instead of its events', () => {
  it('is as old as the one passed in: past EVENT_RETENTION from that one, it is refused expired', async () => {
    const before = await token(first);
    const start = await waitForEvents(before, { kinds: ['verification'], timeoutSeconds: 0 });
    expect(start.isError, JSON.stringify(start)).toBeFalsy();
    const cursor = start.structuredContent.cursor as string;
    // An event of portal's after that cursor.
    const registered = await t.graphql(REGISTER, {}, { key: before });
    expect(registered.errors).toBeUndefined();
    const externalId = registered.data!.registerVerification.verification.externalId as string;
    await t.gateway.sandbox.verification!.complete(externalId);
    const read = await waitForEvents(before, { cursor, kinds: ['verification'], timeoutSeconds: 60 });
    expect(read.structuredContent.events.map((e: { key: string }) => e.key)).toEqual([externalId]);

    // Half a retention later, a token of a rotated key calls from the same cursor: its check awaits the provider's
    // keys, which are held, and a reload meanwhile makes the provider accept another app only. The call, checked
    // again under the reloaded configuration, holds the event it finds and is refused: it answers with the cursor.
    clock.advance(12 * HOUR);
    idp.keys.push(rotated);
    const after = await token(rotated);
    const asked = idp.requests;
    idp.hold();
    const waiting = waitForEvents(after, { cursor, kinds: ['verification'], timeoutSeconds: 300 });
    await waitFor(() => idp.requests > asked || undefined, 20_000, "the check to await the provider's keys");
    fs.writeFileSync(issuers, issuersYaml('other'));
    await reload();
    idp.release();
    const ended = await waiting;
    expect(ended.isError).toBe(true);
    expect(ended.structuredContent).toEqual({
      errors: [{ message: expect.stringMatching(/configuration was reloaded/), code: 'UNAUTHENTICATED' }],
      cursor: expect.any(String),
    });
    const handedBack = ended.structuredContent.cursor as string;

    // A day and a minute after the cursor passed in: the event after it may have been purged. Portal is accepted
    // again (`*`), and calls with the cursor handed back.
    clock.advance(12 * HOUR + 60_000);
    fs.writeFileSync(issuers, issuersYaml('"*"'));
    await reload();
    const again = await waitForEvents(await token(first), {
      cursor: handedBack,
      kinds: ['verification'],
      timeoutSeconds: 0,
    });
    expect(again.isError, JSON.stringify(again)).toBe(true);
    expect(again.structuredContent).toEqual({
      errors: [{ code: 'BAD_USER_INPUT', argument: 'cursor', reason: 'expired' }],
    });
    expect(again.content[0].text).toMatch(/^Invalid argument cursor: .*older than the event retention/);
  });
});
