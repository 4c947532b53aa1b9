// Secrets never reach a log line, however deep the gateway nests them: every key that names a secret (src/logger.ts
// SECRET_KEY) is redacted at any depth, in objects, lists and errors alike, and a line below the level costs nothing.
import { describe, expect, it } from 'vitest';

import { UpstreamRejectedError } from '../src/errors.js';
import { createLogger } from '../src/logger.js';

/** A logger at `level` whose lines are collected, each parsed. */
function collecting(level = 'trace') {
  const lines: Array<Record<string, any>> = [];
  const logger = createLogger({ level, destination: { write: (l: string) => void lines.push(JSON.parse(l)) } });
  return { logger, lines };
}

const SECRET = 'SECRET-deep-7f3a11b0c9';

describe('log redaction', () => {
  it('redacts a password nested deeper than a fixed path, in objects and lists', () => {
    const { logger, lines } = collecting();
    const request = { upstream: { body: { spec: { users: [{ name: 'ops', password: SECRET }] } } } };
    logger.info({ request }, 'creation refused');
    expect(lines[0]!.request).toEqual({
      upstream: { body: { spec: { users: [{ name: 'ops', password: '[redacted]' }] } } },
    });
    expect(JSON.stringify(lines)).not.toContain(SECRET);
    // The caller's object is left as it was.
    expect(request.upstream.body.spec.users[0]!.password).toBe(SECRET);
  });

  it.each([
    'password',
    'secret',
    'token',
    'access_token',
    'accessToken',
    'id_token',
    'idToken',
    'refresh_token',
    'client_secret',
    'clientSecret',
    'client_notification_token',
    'authorization',
    'Authorization',
    'cookie',
    'credentials',
    'apiKey',
    'api_key',
    'x-api-key',
    'idempotency-key',
  ])('redacts %s at any depth', (name) => {
    const { logger, lines } = collecting();
    logger.warn({ a: { b: { c: { d: [{ e: { [name]: SECRET } }] } } }, [name]: SECRET }, 'nested');
    expect(lines[0]!.a.b.c.d[0].e[name]).toBe('[redacted]');
    expect(lines[0]![name]).toBe('[redacted]');
    expect(JSON.stringify(lines)).not.toContain(SECRET);
  });

  it('keeps what only looks like a secret name, and objects as they are', () => {
    const { logger, lines } = collecting();
    logger.info({ idempotencyKey: 'caller-key', keyId: 'kid-1', tokens: 3, nested: { passwordSet: true } }, 'kept');
    expect(lines[0]).toMatchObject({
      idempotencyKey: 'caller-key',
      keyId: 'kid-1',
      tokens: 3,
      nested: { passwordSet: true },
    });
  });

  it("redacts inside an error's fields and keeps its type, message and stack", () => {
    const { logger, lines } = collecting();
    const err = new UpstreamRejectedError('cloud', 400, { request: { users: [{ password: SECRET }] } });
    logger.error({ err, detail: { cause: { err } } }, 'refused');
    const line = lines[0]!;
    expect(line.err).toMatchObject({
      type: 'UpstreamRejectedError',
      message: 'cloud rejected the request with status 400',
      body: { request: { users: [{ password: '[redacted]' }] } },
    });
    expect(line.err.stack).toContain('UpstreamRejectedError');
    expect(JSON.stringify(lines)).not.toContain(SECRET);
    expect((err.body as any).request.users[0].password).toBe(SECRET);
  });

  it("redacts inside an AggregateError's errors, which are not enumerable", () => {
    const { logger, lines } = collecting();
    const inner = Object.assign(new Error('inner'), { options: { headers: { authorization: `Bearer ${SECRET}` } } });
    const aggregate = new AggregateError([inner], 'every attempt failed');
    logger.error({ err: aggregate }, 'aggregate');
    expect(lines[0]!.err.aggregateErrors[0]).toMatchObject({
      message: 'inner',
      options: { headers: { authorization: '[redacted]' } },
    });
    expect(JSON.stringify(lines)).not.toContain(SECRET);
    expect(inner.options.headers.authorization).toBe(`Bearer ${SECRET}`);
  });

  it('shows the address of a URL that did not parse without its user info', () => {
    const { logger, lines } = collecting();
    let err: unknown;
    try {
      new URL(`postgres://gateway:${SECRET}@@db host/gateway`);
    } catch (e) {
      err = e;
    }
    logger.error({ err }, 'bad address');
    expect(lines[0]!.err).toMatchObject({ code: 'ERR_INVALID_URL', input: 'postgres://db host/gateway' });
    expect(JSON.stringify(lines)).not.toContain(SECRET);
  });

  it('ends on a cycle', () => {
    const { logger, lines } = collecting();
    const a: Record<string, unknown> = { token: SECRET };
    a.self = { a };
    logger.info({ a }, 'cycle');
    expect(lines[0]!.a.token).toBe('[redacted]');
    expect(JSON.stringify(lines)).not.toContain(SECRET);
  });

  it('does not walk a line below the level', () => {
    const { logger, lines } = collecting('info');
    let read = 0;
    const watched = {
      get deep() {
        read++;
        return { password: SECRET };
      },
    };
    logger.debug({ watched }, 'not written');
    expect(read).toBe(0);
    expect(lines).toEqual([]);
    logger.info({ watched }, 'written');
    expect(read).toBeGreaterThan(0);
    expect(lines[0]!.watched.deep.password).toBe('[redacted]');
  });
});
