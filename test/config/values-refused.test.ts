// Configuration values that would start the gateway with a wrong setting, or leak a secret, are refused at start-up
// with the variable named, and the error repeats no password a URL holds.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { ConfigError, describeUpstreams, loadConfig } from '../../src/config/index.js';

function refusal(env: Record<string, string>): ConfigError | undefined {
  try {
    loadConfig(env);
    return undefined;
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
}

const KEYS = { GATEWAY_API_KEYS: 'shop:key-of-shop-123,crm:key-of-crm-456' };
const SANDBOXED = { SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm' };

describe('configuration values refused at start-up', () => {
  it.each([
    ['bound to two apps', 'shop:tok-1,crm:tok-1'],
    ['both shared and bound to an app', 'tok-1,shop:tok-1'],
    ['listed twice, shared', 'tok-1,tok-1'],
  ])('a notification token %s: it would belong to whichever entry a lookup meets first', (_what, tokens) => {
    const err = refusal({ ...KEYS, ...SANDBOXED, MOBILEID_NOTIFICATION_TOKENS: tokens });
    expect(err?.variable).toBe('MOBILEID_NOTIFICATION_TOKENS');
    expect(err?.message).toContain('entries 1 and 2 list the same token');
    expect(err?.message).not.toContain('tok-1');
  });

  it('takes each token once, bound or shared', () => {
    expect(() =>
      loadConfig({ ...KEYS, ...SANDBOXED, MOBILEID_NOTIFICATION_TOKENS: 'tok-0,shop:tok-1,crm:tok-2' }),
    ).not.toThrow();
  });

  it.each([
    ['GATEWAY_API_KEYS', 'crm:key-of-crm-456,shop:', 'entry 2 has nothing after its ":"'],
    ['GATEWAY_API_KEYS', 'crm:key-of-crm-456, :key-of-shop-123', 'entry 2 has no app name before its ":"'],
    ['OPERATOR_API_KEYS', 'ops:', 'entry 1 has nothing after its ":"'],
    ['MOBILEID_NOTIFICATION_TOKENS', 'crm:tok-1,shop:', 'entry 2 has nothing after its ":"'],
  ])(
    '%s=%s: an entry with an empty side of its ":", never taken as a bare key or token, named by its place',
    (variable, value, message) => {
      const err = refusal({ ...KEYS, ...SANDBOXED, [variable]: value });
      expect(err?.variable).toBe(variable);
      expect(err?.message).toContain(message);
      for (const secret of ['key-of-crm-456', 'key-of-shop-123', 'tok-1']) expect(err?.message).not.toContain(secret);
    },
  );

  it('takes a key or token holding ":" after its app name', () => {
    const config = loadConfig({ ...SANDBOXED, GATEWAY_API_KEYS: 'shop:abc:', MOBILEID_NOTIFICATION_TOKENS: 'shop:t:' });
    expect(config.apiKeys).toEqual([{ name: 'shop', key: 'abc:' }]);
  });

  it('UPSTREAM_TIMEOUT=0, which would leave an attempt without a limit', () => {
    expect(refusal({ UPSTREAM_TIMEOUT: '0' })?.message).toMatch(/^UPSTREAM_TIMEOUT: must be more than 0/);
    expect(refusal({ UPSTREAM_TIMEOUT: '1ms' })).toBeUndefined();
  });

  it('IDEMPOTENCY_TAKEOVER past 7d, whose renewal timer Node could not hold', () => {
    expect(refusal({ IDEMPOTENCY_TAKEOVER: '90d' })?.variable).toBe('IDEMPOTENCY_TAKEOVER');
    expect(refusal({ IDEMPOTENCY_TAKEOVER: '7d' })).toBeUndefined();
  });

  it.each(['0x50', '1e3', '8080.0', '0b1'])('an integer written other than in decimal digits (PORT=%s)', (port) => {
    const err = refusal({ PORT: port });
    expect(err?.variable).toBe('PORT');
    expect(err?.message).toMatch(/^PORT: must be an integer from/);
  });

  it('takes an integer in decimal digits, blanks around it', () => {
    expect(loadConfig({ PORT: ' 8080 ' }).port).toBe(8080);
  });

  it.each(['0x1', '1e-1', '5e-1', '.5', '1.', '+0.5', '-0', '0.5.1', 'Infinity', '0b1', '0.2 5'])(
    'a ratio written other than as digits with an optional decimal point (OTEL_TRACES_SAMPLER_ARG=%s)',
    (arg) => {
      const err = refusal({ OTEL_TRACES_SAMPLER_ARG: arg });
      expect(err?.variable).toBe('OTEL_TRACES_SAMPLER_ARG');
      expect(err?.message).toMatch(/^OTEL_TRACES_SAMPLER_ARG: must be a decimal number from 0 to 1, such as 0.25/);
    },
  );

  it.each(['1.5', '2', '10'])('a ratio above 1 (OTEL_TRACES_SAMPLER_ARG=%s)', (arg) => {
    expect(refusal({ OTEL_TRACES_SAMPLER_ARG: arg })?.message).toMatch(
      /^OTEL_TRACES_SAMPLER_ARG: must be a decimal number from 0 to 1/,
    );
  });

  it.each([
    ['0', 0],
    ['1', 1],
    ['0.25', 0.25],
    ['1.0', 1],
    ['00.5', 0.5],
    [' 0.1 ', 0.1],
  ])('takes a ratio in decimal digits, blanks around it (OTEL_TRACES_SAMPLER_ARG=%s)', (arg, ratio) => {
    expect(loadConfig({ OTEL_TRACES_SAMPLER_ARG: arg }).tracing.samplerRatio).toBe(ratio);
  });

  it('a duration of so many digits that it is Infinity', () => {
    const err = refusal({ IDEMPOTENCY_RETENTION: '9'.repeat(400) });
    expect(err?.variable).toBe('IDEMPOTENCY_RETENTION');
    expect(err?.message).toContain('must be a duration');
  });

  it.each(['postgresql://gw:pw@db.example:99999/gw', 'postgresql://gw:pw@db example/gw'])(
    'a DATABASE_URL that is no URL (%s), named, its value not shown, and said to be no URL, not of another scheme',
    (url) => {
      const err = refusal({ DATABASE_URL: url });
      expect(err?.variable).toBe('DATABASE_URL');
      expect(err?.message).not.toContain('pw@');
      expect(err?.message).toContain('is not a URL');
      expect(err?.message).not.toContain('postgres:// or postgresql://');
    },
  );

  it('a DATABASE_URL of another scheme is said to need postgres:// or postgresql://', () => {
    const err = refusal({ DATABASE_URL: 'mysql://gw:pw@db.example/gw' });
    expect(err?.variable).toBe('DATABASE_URL');
    expect(err?.message).toContain('must start with postgres:// or postgresql://');
    expect(err?.message).not.toContain('pw@');
  });

  it.each([
    ['CLOUD_API_URL', 'ftp://svc:s3cret-pass@cloud.example'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'grpc://svc:s3cret-p@ss@otel.example'],
  ])('a bad %s does not repeat the password it holds', (variable, url) => {
    const err = refusal({ ...KEYS, CLOUD_API_TOKEN: 't', [variable]: url });
    expect(err?.variable).toBe(variable);
    expect(err?.message).not.toContain('s3cret');
    expect(err?.message).toContain('…@');
  });

  it.each([
    ['CLOUD_API_URL', 'no scheme', 'svc:s3cret-pass@cloud.example'],
    ['AUTH_JWKS_URL', 'no scheme', 'svc:s3cret-pass@idp.example/jwks.json'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'a password with a raw /', 'https://svc:s3cret/pass@otel.example'],
  ])('a bad %s (%s) does not repeat the password it holds', (variable, _what, url) => {
    const err = refusal({ ...KEYS, CLOUD_API_TOKEN: 't', [variable]: url });
    expect(err?.variable).toBe(variable);
    expect(err?.message).not.toContain('s3cret');
    expect(err?.message).toContain('…@');
  });

  it('the start-up line shows nothing of a password that holds @', () => {
    const config = loadConfig({
      ...KEYS,
      CLOUD_API_URL: 'https://svc:pa@ss-word-secret@cloud.example',
      CLOUD_API_TOKEN: 't',
      SANDBOX_UPSTREAMS: 'identification,verification,rfm,mobile-id',
    });
    const line = describeUpstreams(config.upstreams).cloud;
    expect(line).not.toContain('ss-word-secret');
    expect(line).toContain('cloud.example');
  });
});

describe('keys and tokens listed wrong: refused naming the variable and the entries, never the value', () => {
  const GATEWAY = 'GATEWAY_API_KEYS';
  const OPERATOR = 'OPERATOR_API_KEYS';
  it.each([
    [
      'the same named key twice',
      { [GATEWAY]: 'shop:key-of-shop-123,shop:key-of-shop-123' },
      GATEWAY,
      'entries 1 and 2',
    ],
    [
      'the same bare key twice',
      { [GATEWAY]: 'crm:key-of-crm-456,key-of-shop-123,key-of-shop-123' },
      GATEWAY,
      'entries 2 and 3',
    ],
    ['one key under two names', { [GATEWAY]: 'shop:key-of-shop-123,crm:key-of-shop-123' }, GATEWAY, 'entries 1 and 2'],
    [
      'one operator key under two names',
      { ...KEYS, [OPERATOR]: 'ops:key-of-ops-789,root:key-of-ops-789' },
      OPERATOR,
      'entries 1 and 2',
    ],
    [
      'an app key also an operator key',
      { ...KEYS, [OPERATOR]: 'ops:key-of-crm-456' },
      OPERATOR,
      'GATEWAY_API_KEYS entry 2',
    ],
    [
      'an app key also an operator key, one name',
      { ...KEYS, [OPERATOR]: 'crm:key-of-crm-456' },
      OPERATOR,
      'GATEWAY_API_KEYS entry 2',
    ],
    [
      'an app named in both variables',
      { ...KEYS, [OPERATOR]: 'crm:key-of-ops-789' },
      OPERATOR,
      'GATEWAY_API_KEYS entry 2',
    ],
  ])('%s', (_what, env, variable, where) => {
    const err = refusal({ ...SANDBOXED, ...env });
    expect(err?.variable).toBe(variable);
    expect(err?.message).toMatch(new RegExp(`^${variable}: `));
    expect(err?.message).toContain(where);
    for (const secret of ['key-of-shop-123', 'key-of-crm-456', 'key-of-ops-789'])
      expect(err?.message).not.toContain(secret);
  });

  it('takes several keys of one name (a rotation), and distinct operator keys', () => {
    const config = loadConfig({ ...SANDBOXED, [GATEWAY]: 'shop:key-1,shop:key-2', [OPERATOR]: 'ops:key-3,key-4' });
    expect(config.apiKeys).toHaveLength(2);
    expect(config.operatorKeys).toHaveLength(2);
  });

  it.each([
    [GATEWAY, 'crm:key-of-crm-456,shop/eu:key-of-shop-123', 'entry 2'],
    [GATEWAY, 'my shop:key-of-shop-123', 'entry 1'],
    [OPERATOR, 'ops team:key-of-ops-789', 'entry 1'],
    ['MOBILEID_NOTIFICATION_TOKENS', 'shop:tok-1,Shop EU:tok-2', 'entry 2'],
  ])(
    '%s=%s: a ":" after something that is no app name, which was taken as a bare key or a token every app reads',
    (variable, value, where) => {
      const err = refusal({ ...KEYS, ...SANDBOXED, [variable]: value });
      expect(err?.variable).toBe(variable);
      expect(err?.message).toContain(`${where} is refused: the part before its ":" is not an app name`);
      for (const secret of ['key-of-crm-456', 'key-of-shop-123', 'key-of-ops-789', 'tok-2', 'shop/eu', 'Shop EU'])
        expect(err?.message).not.toContain(secret);
    },
  );
});

describe('base URLs that paths are appended to', () => {
  it.each([
    ['PUBLIC_URL', 'https://gw.example/?tenant=a'],
    ['PUBLIC_URL', 'https://gw.example#top'],
    ['CLOUD_API_URL', 'https://cloud.example/api?version=2'],
    ['VERIFICATION_API_URL', 'https://verify.example/?'],
    ['IDENTIFICATION_API_URL', 'https://ident.example/#x'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'https://otel.example?x=1'],
  ])('%s=%s: a query or fragment, which a path would follow (or be dropped)', (variable, url) => {
    const err = refusal({ ...KEYS, CLOUD_API_TOKEN: 't', [variable]: url });
    expect(err?.variable).toBe(variable);
    expect(err?.message).toMatch(new RegExp(`^${variable}: must have no query \\(\\?\\) or fragment \\(#\\)`));
  });

  it.each([
    ['PUBLIC_URL', 'https://gw.example/call\tback'],
    ['PUBLIC_URL', 'https://gw\n.example'],
    ['PUBLIC_URL', 'https://gw.example/\u0001'],
    ['VERIFICATION_API_URL', 'https://verify.example/api\r/2.0'],
  ])('%s=%j: a control character, which the URL parser skips but the text as used would carry', (variable, url) => {
    const err = refusal({ ...KEYS, CLOUD_API_TOKEN: 't', [variable]: url });
    expect(err?.variable).toBe(variable);
    expect(err?.message).toMatch(new RegExp(`^${variable}: must not contain control characters`));
  });

  it('takes a base URL with a path', () => {
    expect(loadConfig({ PUBLIC_URL: 'https://gw.example/gateway/' }).publicUrl).toBe('https://gw.example/gateway');
  });
});

describe('SANDBOX_CLOUD_SHAPE_SEED', () => {
  it.each(['1e3', '0x10', '+5', '1.0', '-0', '0b1'])('an integer written other than in decimal digits (%s)', (seed) => {
    const err = refusal({ SANDBOX_CLOUD_SHAPE: 'random', SANDBOX_CLOUD_SHAPE_SEED: seed });
    expect(err?.variable).toBe('SANDBOX_CLOUD_SHAPE_SEED');
    expect(err?.message).toMatch(/^SANDBOX_CLOUD_SHAPE_SEED: must be an integer from 0 to 4294967295/);
  });

  it.each([
    ['0', 0],
    [' 42 ', 42],
    ['4294967295', 4294967295],
  ])('takes %s', (seed, value) => {
    expect(loadConfig({ SANDBOX_CLOUD_SHAPE: 'random', SANDBOX_CLOUD_SHAPE_SEED: seed }).sandbox.cloudShapeSeed).toBe(
      value,
    );
  });
});

describe('durations past their bound, whose value goes to a timer, a stored expiry or a comparison', () => {
  // Past 2^31-1 ms Node fires a timer after 1 ms: IDEMPOTENCY_WAIT's sleep beside a running call, and the sleep for
  // an upstream's Retry-After within UPSTREAM_RETRY_BUDGET, would come back at once. An expiry of now + 99999999999999d
  // is past any Date (toISOString throws) and past a PostgreSQL bigint.
  it.each([
    ['UPSTREAM_TIMEOUT', '2h', 'must be more than 0 and at most 1h'],
    ['UPSTREAM_RETRY_BUDGET', '30d', 'must be at most 1h'],
    ['IDEMPOTENCY_WAIT', '30d', 'must be at most 1h'],
    ['IDEMPOTENCY_RETENTION', '99999999999999d', 'must be from 1s to 365d'],
    ['EVENT_RETENTION', '99999999999999d', 'must be from 1s to 365d'],
    ['MCP_APPROVAL_TTL', '99999999999999d', 'must be from 1s to 24h'],
    ['AUTH_JWKS_REFRESH_INTERVAL', '99999999999999d', 'must be from 1s to 24h'],
    ['UPSTREAM_CIRCUIT_RESET_TIMEOUT', '2h', 'must be a duration of at least 1s and at most 1h'],
    [
      'UPSTREAM_CIRCUIT_RESET_TIMEOUT',
      '30s,cloud=' + '9'.repeat(400),
      'must be a duration of at least 1s and at most 1h',
    ],
  ])('%s=%s', (variable, value, message) => {
    const err = refusal({ [variable]: value });
    expect(err?.variable).toBe(variable);
    expect(err?.message).toMatch(new RegExp(`^${variable}: `));
    expect(err?.message).toContain(message);
  });

  it.each([
    ['UPSTREAM_TIMEOUT', '1h'],
    ['UPSTREAM_RETRY_BUDGET', '1h'],
    ['UPSTREAM_RETRY_BUDGET', '0'],
    ['IDEMPOTENCY_WAIT', '1h'],
    ['IDEMPOTENCY_WAIT', '0'],
    ['IDEMPOTENCY_RETENTION', '365d'],
    ['EVENT_RETENTION', '365d'],
    ['MCP_APPROVAL_TTL', '24h'],
    ['AUTH_JWKS_REFRESH_INTERVAL', '24h'],
    ['UPSTREAM_CIRCUIT_RESET_TIMEOUT', '1h'],
  ])('takes %s=%s, its bound', (variable, value) => {
    expect(refusal({ [variable]: value })).toBeUndefined();
  });

  it.each(['EVENT_RETENTION', 'IDEMPOTENCY_RETENTION'])(
    '%s=0, which would expire every event or record as it is written (cursors, resumes and retries broken)',
    (variable) => {
      const err = refusal({ [variable]: '0' });
      expect(err?.variable).toBe(variable);
      expect(err?.message).toMatch(new RegExp(`^${variable}: must be from 1s to 365d`));
    },
  );
});

describe('MCP_ALLOWED_HOSTS', () => {
  it.each([
    ['gw.example:443', 'entry 1'],
    ['gw.example,https://gw.example', 'entry 2'],
    ['gw example', 'entry 1'],
    ['gw.example/mcp', 'entry 1'],
    ['fd00::1', 'entry 1'],
    ['agent@gw.example', 'entry 1'],
    ['bücher.example', 'entry 1'],
  ])('%s: an entry no Host header can match (it is compared without its port)', (hosts, where) => {
    const err = refusal({ MCP_ALLOWED_HOSTS: hosts });
    expect(err?.variable).toBe('MCP_ALLOWED_HOSTS');
    expect(err?.message).toContain(`${where} can never match a Host header`);
    expect(err?.message).toContain('such as gw.example, 10.0.0.5 or [fd00::1]');
  });

  it('takes host names, addresses and bracketed IPv6 addresses, any case (as a Host header is compared)', () => {
    expect(
      loadConfig({ MCP_ALLOWED_HOSTS: 'gw.example, GW.Internal,10.0.0.5,[FD00::1],xn--bcher-kva.example' }).mcp
        .allowedHosts,
    ).toEqual(['gw.example', 'gw.internal', '10.0.0.5', '[fd00::1]', 'xn--bcher-kva.example']);
  });
});

describe('OTEL_EXPORTER_OTLP_HEADERS', () => {
  it.each([
    ['authorization=Bearer%20s3cret%0AX-Evil:1', 'pair 1', 'a control character'],
    ['x-tenant=a,api-key=s3cret%00', 'pair 2', 'a control character'],
    ['api-key=s3cret-1,API-Key=s3cret-2', 'pair 2', 'names the header of pair 1 again'],
  ])('%s: refused naming the pair, the value not shown', (headers, where, what) => {
    const err = refusal({ OTEL_EXPORTER_OTLP_HEADERS: headers });
    expect(err?.variable).toBe('OTEL_EXPORTER_OTLP_HEADERS');
    expect(err?.message).toContain(where);
    expect(err?.message).toContain(what);
    expect(err?.message).not.toContain('s3cret');
  });

  it('takes distinct headers, a tab and encoded commas in a value', () => {
    expect(loadConfig({ OTEL_EXPORTER_OTLP_HEADERS: 'api-key=a%09b,x-tenant=c%2Cd' }).tracing.headers).toEqual({
      'api-key': 'a\tb',
      'x-tenant': 'c,d',
    });
  });
});

describe('DATABASE_URL and PORT', () => {
  it.each(['postgres://', 'postgres:///gw?sslmode=require&password=pw-s3cret', 'postgres:///gw', 'postgres://?host='])(
    'DATABASE_URL=%s: no host, where pg would connect to its defaults (localhost) instead',
    (url) => {
      const err = refusal({ DATABASE_URL: url });
      expect(err?.variable).toBe('DATABASE_URL');
      expect(err?.message).toContain('must name a host');
      expect(err?.message).not.toContain('s3cret');
    },
  );

  it('takes a socket folder as ?host=', () => {
    expect(loadConfig({ DATABASE_URL: 'postgres:///gw?host=/var/run/postgresql' }).databaseUrl).toBe(
      'postgres:///gw?host=/var/run/postgresql',
    );
  });

  it.each(['-0', '-00', ' -0 '])('PORT=%s, minus zero', (port) => {
    const err = refusal({ PORT: port });
    expect(err?.variable).toBe('PORT');
    expect(err?.message).toMatch(/^PORT: must be an integer from 0 to 65535/);
  });
});

describe('words of a choice, in any case as TRUSTED_DOCUMENTS, MCP_* and OTEL_* take them', () => {
  it('takes LOG_LEVEL, LOG_FORMAT and UPSTREAM_CIRCUIT_BREAKER in any case', () => {
    const config = loadConfig({ LOG_LEVEL: 'Debug', LOG_FORMAT: 'JSON', UPSTREAM_CIRCUIT_BREAKER: 'ON,rfm=Off' });
    expect(config.logLevel).toBe('debug');
    expect(config.logFormat).toBe('json');
    expect(config.upstream.breakers.rfm.enabled).toBe(false);
    expect(config.upstream.breakers.cloud.enabled).toBe(true);
  });
});

describe('APOLLO_SCHEMA_REPORTING', () => {
  // Apollo Server reads it itself and acts on `true` alone: `yes` would turn schema reporting off without a word.
  it.each(['yes', '1', 'on', 'TRUE', 'treu'])('refuses %s, naming the variable', (value) => {
    const err = refusal({ ...SANDBOXED, APOLLO_SCHEMA_REPORTING: value });
    expect(err?.variable).toBe('APOLLO_SCHEMA_REPORTING');
    expect(err?.message).toContain('must be true or false');
  });

  it.each(['true', 'false'])('takes %s', (value) => {
    expect(loadConfig({ ...SANDBOXED, APOLLO_SCHEMA_REPORTING: value }).apolloReporting).toContain(
      'APOLLO_SCHEMA_REPORTING',
    );
  });
});

describe('DATABASE_URL naming a certificate or key file', () => {
  it.each(['sslrootcert', 'sslcert', 'sslkey'])(
    'refuses a missing ?%s= file, naming the variable and no password',
    (p) => {
      const err = refusal({
        ...SANDBOXED,
        DATABASE_URL: `postgres://gw:s3cret-pw@db.example/gw?${p}=/nonexistent/${p}.pem`,
      });
      expect(err?.variable).toBe('DATABASE_URL');
      expect(err?.message).toContain(`${p} file /nonexistent/${p}.pem cannot be read`);
      expect(err?.message).not.toContain('s3cret-pw');
    },
  );

  // access() finds a folder, a named pipe and a device readable; pg's read of a folder then ended the start with a
  // stack trace ("PostgreSQL refused: EISDIR"), and its read of a pipe held the start until a writer ended it.
  it.each(['sslrootcert', 'sslcert', 'sslkey'])(
    'refuses a ?%s= naming a folder, a named pipe or a device, naming the variable and no password',
    (p) => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pg-tls-'));
      const fifo = path.join(dir, `${p}.pem`);
      execFileSync('mkfifo', [fifo]);
      for (const file of [dir, fifo, '/dev/null']) {
        const err = refusal({ ...SANDBOXED, DATABASE_URL: `postgres://gw:s3cret-pw@db.example/gw?${p}=${file}` });
        expect(err?.variable).toBe('DATABASE_URL');
        expect(err?.message).toContain(`${p} file ${file} is not a file`);
        expect(err?.message).not.toContain('s3cret-pw');
      }
    },
  );
});

// Specs: the gateway sends `Authorization: Bearer <ACCESS_TOKEN>` to each upstream, the token a JWT for the cloud and
// the verification interface. A token configured with its scheme ("Bearer eyJ…", as a curl line shows it) or with a
// blank inside went on the wire as `Bearer Bearer eyJ…`, which no upstream takes: every call failed with
// UPSTREAM_UNAUTHENTICATED, the start-up saying nothing. An RFC 6750 bearer token holds no blank.
describe('an upstream bearer token written with its scheme or a blank inside', () => {
  const REAL = {
    ...KEYS,
    CLOUD_API_URL: 'https://cloud.example',
    VERIFICATION_API_URL: 'https://verification.example/product/2.0',
    IDENTIFICATION_API_URL: 'https://identification.example/2.0',
    IDENTIFICATION_PRODLIKE_API_URL: 'https://identification-prodlike.example/2.0',
    SANDBOX_UPSTREAMS: 'mobile-id',
    CLOUD_API_TOKEN: 'eyJ.cloud.token',
    VERIFICATION_API_TOKEN: 'eyJ.verification.token',
    IDENTIFICATION_API_TOKEN: 'identification-token',
  };

  it.each([
    'CLOUD_API_TOKEN',
    'VERIFICATION_API_TOKEN',
    'IDENTIFICATION_API_TOKEN',
    'IDENTIFICATION_PRODLIKE_API_TOKEN',
  ])('%s="Bearer …" stops start-up, naming the variable and saying to give the token alone', (variable) => {
    const err = refusal({ ...REAL, [variable]: 'Bearer eyJ.the.token' });
    expect(err?.variable).toBe(variable);
    expect(err?.message).toContain('the token alone');
    expect(err?.message).not.toContain('eyJ.the.token');
  });

  it.each(['eyJ.the token', 'eyJ.the\ttoken'])('%j (a blank inside) stops start-up, naming the variable', (token) => {
    const err = refusal({ ...REAL, CLOUD_API_TOKEN: token });
    expect(err?.variable).toBe('CLOUD_API_TOKEN');
    expect(err?.message).toContain('no blank');
    expect(err?.message).not.toContain('eyJ.the');
  });

  it('takes a token with blanks around it, without them, and a token that only starts with the word', () => {
    const config = loadConfig({
      ...REAL,
      CLOUD_API_TOKEN: '  eyJ.cloud.token  ',
      IDENTIFICATION_API_TOKEN: 'Bearerish',
    });
    expect(config.cloud.token).toBe('eyJ.cloud.token');
    expect(config.identification.token).toBe('Bearerish');
  });
});

// Every API key and notification token arrives as `Authorization: Bearer <value>`, which src/auth/keys.ts reads as one
// run of characters without a blank: one configured with its scheme ("Bearer abc", as a curl line shows it) or with a
// blank inside was taken at start-up and could never authenticate, with nothing said.
describe('an API key or notification token with a blank inside', () => {
  it.each([
    ['MOBILEID_NOTIFICATION_TOKENS', 'Bearer tok-1', 'entry 1 starts with "Bearer ": give the value alone'],
    ['MOBILEID_NOTIFICATION_TOKENS', 'tok-0,shop:tok 1', 'entry 2 has a blank inside its value'],
    ['MOBILEID_NOTIFICATION_TOKENS', 'tok-0,crm:tok-2,shop: tok-1', 'entry 3 has a blank inside its value'],
    ['GATEWAY_API_KEYS', 'shop:key-of-shop-123,crm:Bearer key-of-crm-456', 'entry 2 starts with "Bearer "'],
    ['GATEWAY_API_KEYS', 'key-of-shop\t123', 'entry 1 has a blank inside its value'],
    ['OPERATOR_API_KEYS', 'ops:key of ops', 'entry 1 has a blank inside its value'],
    // Node reads a header's bytes as latin1 and refuses control characters in it: neither reaches the comparison.
    ['GATEWAY_API_KEYS', 'shop:key-of-shop-123,crm:key-of-crm-ключ', 'entry 2 holds a character no request can send'],
    ['MOBILEID_NOTIFICATION_TOKENS', 'shop:tok-1\u0001', 'entry 1 holds a character no request can send'],
  ])('%s=%j stops start-up, naming the variable and the entry, never the value', (variable, value, message) => {
    const err = refusal({ ...KEYS, ...SANDBOXED, [variable]: value });
    expect(err?.variable).toBe(variable);
    expect(err?.message).toContain(message);
    for (const secret of ['tok', 'key-of', 'key of']) expect(err?.message).not.toContain(secret);
  });

  it('takes a key with a latin1 letter, which a request can send as one byte', () => {
    expect(loadConfig({ ...SANDBOXED, GATEWAY_API_KEYS: 'shop:clé-123' }).apiKeys).toEqual([
      { name: 'shop', key: 'clé-123' },
    ]);
  });

  it('takes a value with blanks around its entry, without them', () => {
    const config = loadConfig({
      ...SANDBOXED,
      GATEWAY_API_KEYS: ' shop:abc , def ',
      MOBILEID_NOTIFICATION_TOKENS: ' t ',
    });
    expect(config.apiKeys).toEqual([
      { name: 'shop', key: 'abc' },
      { name: null, key: 'def' },
    ]);
  });
});

// HOST is handed to listen: a value with a port, a scheme, a path or brackets names no interface, and listen failed
// with getaddrinfo ENOTFOUND, HOST unnamed (test/gateway/listen-host.test.ts runs it).
describe('HOST', () => {
  it.each(['localhost:4000', 'http://0.0.0.0', '[::]', '0.0.0.0/0', 'gw example'])('%j stops start-up', (host) => {
    const err = refusal({ HOST: host });
    expect(err?.variable).toBe('HOST');
    expect(err?.message).toContain('must be an address or a host name alone');
  });

  it.each(['0.0.0.0', '::', '::1', 'fe80::1%eth0', '10.0.0.5', 'localhost', 'gw.internal', 'my_host'])(
    '%j is taken',
    (host) => {
      expect(loadConfig({ HOST: ` ${host} ` }).host).toBe(host);
    },
  );
});
