import { afterEach, describe, expect, it } from 'vitest';

import { startVerificationSandbox, type VerificationSandbox } from '../../src/sandbox/verification.js';
import { gatewaysPerTest, logLines, tempDataDir } from '../helpers/gateway.js';
import { runMainUntilReady } from '../helpers/process.js';

const start = gatewaysPerTest();
const standalone: VerificationSandbox[] = [];
afterEach(async () => {
  await Promise.all(standalone.splice(0).map((s) => s.close()));
});

const runMain = (env: Record<string, string>) => runMainUntilReady({ DATA_DIR: tempDataDir(), ...env });

/** Every upstream real (at addresses nothing listens on: start-up calls none of them). */
const ALL_REAL = {
  GATEWAY_API_KEYS: 'k',
  CLOUD_API_URL: 'http://127.0.0.1:9/cloud',
  CLOUD_API_TOKEN: 'cloud-token-secret',
  IDENTIFICATION_API_URL: 'http://127.0.0.1:9/ident',
  IDENTIFICATION_API_TOKEN: 'ident-token-secret',
  VERIFICATION_API_URL: 'http://127.0.0.1:9/verify',
  VERIFICATION_API_TOKEN: 'verify-jwt-secret',
  MOBILEID_NOTIFICATION_TOKENS: 'notify-token-secret',
};

describe('real upstreams at start-up', () => {
  it('refuses to start with an upstream left unconfigured beside real ones, naming the variable and SANDBOX_UPSTREAMS', async () => {
    const { MOBILEID_NOTIFICATION_TOKENS: _unset, ...env } = ALL_REAL;
    const { code, output } = await runMain(env);
    expect(code).toBe(2);
    expect(output).toContain('invalid configuration: MOBILEID_NOTIFICATION_TOKENS: is required');
    expect(output).toContain('SANDBOX_UPSTREAMS');
    expect(output).not.toContain('gateway ready');
  });

  it('refuses to start with a real identification URL and no IDENTIFICATION_API_TOKEN', async () => {
    const { IDENTIFICATION_API_TOKEN: _unset, ...env } = ALL_REAL;
    const { code, output } = await runMain(env);
    expect(code).toBe(2);
    expect(output).toContain('invalid configuration: IDENTIFICATION_API_TOKEN:');
  });

  // A notification token arrives as Authorization: Bearer <token>, read as one run without a blank: a token configured
  // with its scheme or a blank inside could never authenticate a notification, and every result would be lost.
  it.each([
    ['Bearer notify-token-secret', 'entry 1 starts with "Bearer "'],
    ['notify-token-secret,k: notify token secret', 'entry 2 has a blank inside its value'],
  ])(
    'refuses to start with MOBILEID_NOTIFICATION_TOKENS=%j, naming the variable and the entry, never the token',
    async (tokens, message) => {
      const { code, output } = await runMain({
        ...ALL_REAL,
        GATEWAY_API_KEYS: 'k:key',
        MOBILEID_NOTIFICATION_TOKENS: tokens,
      });
      expect(code).toBe(2);
      expect(output).toContain(`invalid configuration: MOBILEID_NOTIFICATION_TOKENS: ${message}`);
      expect(output).not.toMatch(/notify.token.secret/);
      expect(output).not.toContain('gateway ready');
    },
  );

  it('prints every real address in the start-up line, the rfm default included, and no credential', async () => {
    const { code, output } = await runMain(ALL_REAL);
    expect(code).toBe(0);
    const line = output.split('\n').find((l) => l.includes('gateway ready'))!;
    expect(line).toContain(
      'cloud=http://127.0.0.1:9/cloud identification=http://127.0.0.1:9/ident verification=http://127.0.0.1:9/verify',
    );
    expect(line).toContain(
      'rfm=http://127.0.0.1:9/verify (default: VERIFICATION_API_URL, spec: rfm under the verification interface /api/v1)',
    );
    expect(line).toContain('mobile-id=real');
    expect(output).not.toMatch(/-secret/);
  });
});

describe('the rfm check beside a real verification interface', () => {
  it('goes to that interface under /api/v1 with its JWT, and no simulator is started for it', async () => {
    const real = await startVerificationSandbox({ acceptedTokens: ['operator-jwt'] });
    standalone.push(real);
    const gw = await start({
      GATEWAY_API_KEYS: 'app-key',
      VERIFICATION_API_URL: real.url,
      VERIFICATION_API_TOKEN: 'operator-jwt',
      SANDBOX_UPSTREAMS: 'cloud,identification,mobile-id',
    });
    const res = await gw.graphql(
      `mutation { checkRfm(input: { fullName: "Petr Petrov" }) { inCatalog } }`,
      {},
      { key: 'app-key' },
    );
    expect(res.errors).toBeUndefined();
    expect(res.data!.checkRfm.inCatalog).toBe(false);
    const calls = real.requests.filter((r) => r.path === '/api/v1/rfm/is-in-catalog');
    expect(calls.map((r) => r.headers.authorization)).toEqual(['Bearer operator-jwt']);
    expect(gw.gateway.sandbox.verification).toBeNull();
  });
});

// Spec, Events 1: the verification service POSTs its result to the callbackUrl the client gave. Without PUBLIC_URL the
// gateway hands out its own listening address (http://127.0.0.1:<port>/webhooks/verification/<token>), which an
// interface on another host can never reach: every registration with a callback is then accepted and never completed.
describe('PUBLIC_URL unset beside a real verification interface', () => {
  const REMOTE = {
    GATEWAY_API_KEYS: 'app-key',
    VERIFICATION_API_URL: 'http://verification.example:9/product/2.0',
    VERIFICATION_API_TOKEN: 'operator-jwt',
    SANDBOX_UPSTREAMS: 'cloud,identification,rfm,mobile-id',
  };
  const warnings = (gw: Awaited<ReturnType<typeof start>>) =>
    logLines<{ level: number; msg: string }>(gw, (l) => l.level === 40 && l.msg.includes('PUBLIC_URL'));

  it('is said at start-up, once, naming the variable and the interface', async () => {
    const gw = await start(REMOTE);
    const said = warnings(gw);
    expect(said).toHaveLength(1);
    expect(said[0]!.msg).toContain('verification.example');
    expect(said[0]!.msg).toContain('/webhooks/verification/');
  });

  it('is not said with PUBLIC_URL set, nor for an interface on this host', async () => {
    expect(warnings(await start({ ...REMOTE, PUBLIC_URL: 'https://gw.example' }))).toEqual([]);
    expect(warnings(await start({ ...REMOTE, VERIFICATION_API_URL: 'http://127.0.0.1:9/verify' }))).toEqual([]);
    expect(warnings(await start({ ...REMOTE, VERIFICATION_API_URL: 'http://localhost:9/verify' }))).toEqual([]);
  });
});
