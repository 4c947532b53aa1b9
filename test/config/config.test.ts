import { describe, expect, it } from 'vitest';

import { ConfigError, DECLARED_VARS, describeUpstreams, loadConfig } from '../../src/config/index.js';

/** Loads a config and returns the ConfigError it throws (undefined when it loads). */
function refusal(env: Record<string, string>): ConfigError | undefined {
  try {
    loadConfig(env);
    return undefined;
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
}

/** Every upstream real, with its credentials. */
const ALL_REAL: Record<string, string> = {
  GATEWAY_API_KEYS: 'k',
  CLOUD_API_URL: 'https://cloud.example',
  CLOUD_API_TOKEN: 'cloud-token',
  IDENTIFICATION_API_URL: 'https://ident.example',
  IDENTIFICATION_API_TOKEN: 'ident-token',
  VERIFICATION_API_URL: 'https://verify.example',
  VERIFICATION_API_TOKEN: 'verify-jwt',
  MOBILEID_NOTIFICATION_TOKENS: 'notify-token',
};

const without = (env: Record<string, string>, ...names: string[]) =>
  Object.fromEntries(Object.entries(env).filter(([k]) => !names.includes(k)));

describe('start-up configuration', () => {
  it('refuses to run open (no keys) when an upstream is real', () => {
    const cloudOnly = {
      CLOUD_API_URL: 'https://cloud.example',
      CLOUD_API_TOKEN: 't',
      SANDBOX_UPSTREAMS: 'identification,verification,rfm,mobile-id',
    };
    expect(() => loadConfig(cloudOnly)).toThrow(/GATEWAY_API_KEYS/);
    expect(() => loadConfig({ ...cloudOnly, GATEWAY_API_KEYS: 'k' })).not.toThrow();
  });

  it('names the variable of a bad value', () => {
    const cases: Record<string, string> = {
      PORT: 'eighty',
      CLOUD_API_URL: 'ftp://x',
      IDEMPOTENCY_RETENTION: 'forever',
      SANDBOX_FAULT_RATE: '2',
      DATABASE_URL: 'mysql://x',
      CLOUD_API_CREDENTIALS: '[1,2]',
      GRAPHQL_INTROSPECTION: 'maybe',
      LOG_LEVEL: 'loud',
    };
    for (const [name, value] of Object.entries(cases)) {
      let error: unknown;
      try {
        loadConfig({ [name]: value, GATEWAY_API_KEYS: 'k' });
      } catch (e) {
        error = e;
      }
      expect(error, name).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).variable).toBe(name);
      expect((error as Error).message).toContain(name);
    }
  });

  it('parses durations, lists and defaults into one frozen object', () => {
    const c = loadConfig({ IDEMPOTENCY_RETENTION: '90m', GATEWAY_API_KEYS: ' a , b ,', PORT: '8080' });
    expect(c.idempotencyRetentionMs).toBe(90 * 60_000);
    expect(c.apiKeys).toEqual([
      { name: null, key: 'a' },
      { name: null, key: 'b' },
    ]);
    expect(c.port).toBe(8080);
    expect(c.eventRetentionMs).toBe(7 * 86_400_000);
    expect(Object.isFrozen(c) && Object.isFrozen(c.upstream)).toBe(true);
  });
});

describe('real upstreams: no silent sandbox', () => {
  it('serves every upstream from the simulator when no upstream is configured', () => {
    expect(describeUpstreams(loadConfig({}).upstreams)).toEqual({
      cloud: 'sandbox',
      identification: 'sandbox',
      verification: 'sandbox',
      rfm: 'sandbox',
      'mobile-id': 'sandbox',
    });
  });

  it.each([
    ['cloud', ['CLOUD_API_URL', 'CLOUD_API_TOKEN'], 'CLOUD_API_URL'],
    ['identification', ['IDENTIFICATION_API_URL', 'IDENTIFICATION_API_TOKEN'], 'IDENTIFICATION_API_URL'],
    ['verification', ['VERIFICATION_API_URL', 'VERIFICATION_API_TOKEN'], 'VERIFICATION_API_URL'],
    ['mobile-id', ['MOBILEID_NOTIFICATION_TOKENS'], 'MOBILEID_NOTIFICATION_TOKENS'],
  ])('refuses to start when %s is left unconfigured beside real upstreams, naming %s', (name, unset, variable) => {
    const error = refusal(without(ALL_REAL, ...unset));
    expect(error?.variable).toBe(variable);
    expect(error?.message).toContain(variable);
    expect(error?.message).toContain(`name ${name} in SANDBOX_UPSTREAMS`);
  });

  it('lets the simulator serve an upstream beside real ones when SANDBOX_UPSTREAMS names it', () => {
    const config = loadConfig({
      ...without(ALL_REAL, 'CLOUD_API_URL', 'CLOUD_API_TOKEN', 'MOBILEID_NOTIFICATION_TOKENS'),
      SANDBOX_UPSTREAMS: 'cloud, mobile-id',
    });
    expect(describeUpstreams(config.upstreams)).toMatchObject({
      cloud: 'sandbox',
      'mobile-id': 'sandbox',
      identification: 'https://ident.example',
    });
    expect(config.upstreams.verification).toEqual({
      sandbox: false,
      url: 'https://verify.example',
      token: 'verify-jwt',
    });
  });

  it('refuses SANDBOX_UPSTREAMS naming an unknown upstream, or one that is configured as real', () => {
    expect(refusal({ ...ALL_REAL, SANDBOX_UPSTREAMS: 'cloud,kafka' })?.variable).toBe('SANDBOX_UPSTREAMS');
    const both = refusal({ ...ALL_REAL, SANDBOX_UPSTREAMS: 'cloud' });
    expect(both?.variable).toBe('SANDBOX_UPSTREAMS');
    expect(both?.message).toContain('CLOUD_API_URL');
  });

  it('sends the rfm check to the verification interface (its /api/v1) with its JWT when RFM_API_URL is unset, and prints that default', () => {
    const config = loadConfig(ALL_REAL);
    expect(config.upstreams.rfm).toEqual({
      sandbox: false,
      url: 'https://verify.example',
      token: 'verify-jwt',
      from: 'VERIFICATION_API_URL',
    });
    expect(describeUpstreams(config.upstreams).rfm).toBe(
      'https://verify.example (default: VERIFICATION_API_URL, spec: rfm under the verification interface /api/v1)',
    );
    const own = loadConfig({ ...ALL_REAL, RFM_API_URL: 'https://rfm.example' });
    expect(describeUpstreams(own.upstreams).rfm).toBe('https://rfm.example');
  });

  it('keeps the rfm check with a simulated verification interface unless it is configured', () => {
    const config = loadConfig({
      ...without(ALL_REAL, 'VERIFICATION_API_URL', 'VERIFICATION_API_TOKEN'),
      SANDBOX_UPSTREAMS: 'verification',
    });
    expect(config.upstreams.rfm).toEqual({ sandbox: true });
  });

  it('refuses a real identification URL without IDENTIFICATION_API_TOKEN', () => {
    const error = refusal(without(ALL_REAL, 'IDENTIFICATION_API_TOKEN'));
    expect(error?.variable).toBe('IDENTIFICATION_API_TOKEN');
  });

  it('refuses a real verification URL without VERIFICATION_API_TOKEN', () => {
    expect(refusal(without(ALL_REAL, 'VERIFICATION_API_TOKEN'))?.variable).toBe('VERIFICATION_API_TOKEN');
  });

  it('refuses a real RFM_API_URL without VERIFICATION_API_TOKEN, the JWT it is called with', () => {
    const env = {
      ...without(ALL_REAL, 'VERIFICATION_API_URL', 'VERIFICATION_API_TOKEN'),
      SANDBOX_UPSTREAMS: 'verification',
      RFM_API_URL: 'https://rfm.example',
    };
    expect(refusal(env)?.variable).toBe('VERIFICATION_API_TOKEN');
  });

  it('prints addresses without credentials in the start-up description', () => {
    const config = loadConfig({ ...ALL_REAL, CLOUD_API_URL: 'https://user:secret@cloud.example' });
    expect(describeUpstreams(config.upstreams).cloud).toBe('https://cloud.example');
    expect(JSON.stringify(describeUpstreams(config.upstreams))).not.toMatch(
      /secret|cloud-token|verify-jwt|ident-token|notify-token/,
    );
  });

  it('declares each default once: docs/configuration.md shows exactly the value an unset variable gets, and a variable without a default parses to nothing', () => {
    for (const [name, v] of Object.entries(DECLARED_VARS)) {
      const unset: unknown = v.schema.parse(undefined);
      if (v.derived) {
        expect(v.schema.parse(v.shown), name).toEqual(unset);
      } else {
        const empty =
          unset === undefined ||
          unset === null ||
          (Array.isArray(unset) && unset.length === 0) ||
          (typeof unset === 'object' && Object.keys(unset as object).length === 0);
        expect(empty, `${name} has a default its table row does not show`).toBe(true);
      }
    }
  });
});
