import { createHash } from 'node:crypto';
import { createClient } from 'graphql-ws';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';

import { ConfigError, loadConfig } from '../../src/config/index.js';
import { gatewaysPerTest } from '../helpers/gateway.js';
import { APP_A, APP_B, CREATE_PROJECT, post, projectCreationsUpstream, READ_PROJECTS } from '../helpers/ratelimit.js';

const start = gatewaysPerTest();
const KEYS = `${APP_A},${APP_B}`;

describe('per-app rate limits (SQLite, one process)', () => {
  it('an app past its creation budget gets 429 with Retry-After and RATE_LIMITED, and nothing reaches the upstream', async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEYS, RATE_LIMIT_CREATIONS: '2/1h' });
    for (const name of ['p1', 'p2']) expect((await post(gw, APP_A, CREATE_PROJECT, { name })).status).toBe(200);
    const upstreamBefore = projectCreationsUpstream(gw);
    expect(upstreamBefore).toBe(2);

    const refused = await post(gw, APP_A, CREATE_PROJECT, { name: 'p3' });
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.retryAfter);
    expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 3600).toBe(true);
    expect(refused.body.data ?? null).toBeNull();
    expect(refused.body.errors).toHaveLength(1);
    expect(refused.body.errors![0]!.extensions).toEqual({
      code: 'RATE_LIMITED',
      bucket: 'creations',
      retryAfter,
      limit: 2,
      windowSeconds: 3600,
    });
    expect(projectCreationsUpstream(gw)).toBe(upstreamBefore);
    expect((await gw.graphql(READ_PROJECTS, {}, { key: APP_A })).data!.projects).toHaveLength(2);
  });

  it('one app exhausting its creation budget does not affect another app', async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEYS, RATE_LIMIT_CREATIONS: '1/1h' });
    expect((await post(gw, APP_A, CREATE_PROJECT, { name: 'a1' })).status).toBe(200);
    expect((await post(gw, APP_A, CREATE_PROJECT, { name: 'a2' })).status).toBe(429);
    const other = await post(gw, APP_B, CREATE_PROJECT, { name: 'b1' });
    expect(other.status).toBe(200);
    expect(other.body.errors).toBeUndefined();
    expect(other.body.data!.createProject.project.id).toBeTruthy();
    expect(projectCreationsUpstream(gw)).toBe(2);
  });

  it('reads and creations are separate budgets', async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEYS, RATE_LIMIT_CREATIONS: '1/1h', RATE_LIMIT_READS: '2/1h' });
    // Spending every read leaves the creation intact...
    expect((await post(gw, APP_A, READ_PROJECTS)).status).toBe(200);
    expect((await post(gw, APP_A, READ_PROJECTS)).status).toBe(200);
    const readRefused = await post(gw, APP_A, READ_PROJECTS);
    expect(readRefused.status).toBe(429);
    expect(readRefused.body.errors![0]!.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'reads' });
    expect((await post(gw, APP_A, CREATE_PROJECT, { name: 'after-reads' })).status).toBe(200);
    // ...and spending the creation leaves the other app's reads intact.
    expect((await post(gw, APP_A, CREATE_PROJECT, { name: 'second' })).body.errors![0]!.extensions!.bucket).toBe(
      'creations',
    );
    expect((await post(gw, APP_B, READ_PROJECTS)).status).toBe(200);
  });

  it('a mutation with several creations spends one point per creation and is refused whole when they do not all fit', async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEYS, RATE_LIMIT_CREATIONS: '2/1h' });
    const three = `mutation {
      a: createProject(input: { name: "a", description: "" }) { project { id } }
      b: createProject(input: { name: "b", description: "" }) { project { id } }
      ... on Mutation { c: createProject(input: { name: "c", description: "" }) { project { id } } }
    }`;
    const refused = await post(gw, APP_A, three);
    expect(refused.status).toBe(429);
    expect(projectCreationsUpstream(gw)).toBe(0);
    // `ping` calls no upstream: it is a read, and it does not spend creations.
    expect((await post(gw, APP_A, 'mutation { ping }')).status).toBe(200);
    // The refused attempt spent the window (rate-limiter-flexible counts refused points), so even one more is refused.
    expect((await post(gw, APP_A, CREATE_PROJECT, { name: 'one' })).status).toBe(429);
    expect(projectCreationsUpstream(gw)).toBe(0);
  });

  it('a creation skipped by a variable left out at its default spends nothing, as it runs nothing', async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEYS, RATE_LIMIT_CREATIONS: '1/1h' });
    const oneOfTwo = `mutation($skip: Boolean = true, $keep: Boolean = false) {
      a: createProject(input: { name: "runs", description: "" }) { project { id } }
      b: createProject(input: { name: "skipped", description: "" }) @skip(if: $skip) { project { id } }
      c: createProject(input: { name: "left out", description: "" }) @include(if: $keep) { project { id } }
    }`;
    const ran = await post(gw, APP_A, oneOfTwo);
    expect(ran.status).toBe(200);
    expect(ran.body.errors).toBeUndefined();
    expect(Object.keys(ran.body.data!)).toEqual(['a']);
    expect(projectCreationsUpstream(gw)).toBe(1);
    // Given, the variables decide as before: two creations do not fit in what is left.
    expect((await post(gw, APP_B, oneOfTwo, { skip: false })).status).toBe(429);
    expect(projectCreationsUpstream(gw)).toBe(1);
  });

  it('a creation selected twice under one response key runs once and spends one point', async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEYS, RATE_LIMIT_CREATIONS: '1/1h' });
    // GraphQL merges fields of one response key (they must ask the same field with the same arguments): one creation.
    const merged = `mutation {
      createProject(input: { name: "once", description: "" }) { project { id } }
      ... on Mutation { createProject(input: { name: "once", description: "" }) { replayed } }
      ...Again
    }
    fragment Again on Mutation { p: createProject(input: { name: "other", description: "" }) @skip(if: true) { replayed } }`;
    const ran = await post(gw, APP_A, merged);
    expect(ran.status, JSON.stringify(ran.body)).toBe(200);
    expect(ran.body.errors).toBeUndefined();
    expect(ran.body.data!.createProject).toMatchObject({ project: { id: expect.any(String) }, replayed: false });
    expect(projectCreationsUpstream(gw)).toBe(1);
    // The one point was spent: the next creation is refused.
    expect((await post(gw, APP_A, CREATE_PROJECT, { name: 'next' })).status).toBe(429);
    expect(projectCreationsUpstream(gw)).toBe(1);
  });

  it('metrics count decisions per app, labelled for a bare key by a keyed digest: neither the key nor its plain hash', async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEYS, RATE_LIMIT_CREATIONS: '1/1h' });
    await post(gw, APP_A, CREATE_PROJECT, { name: 'm1' });
    await post(gw, APP_A, CREATE_PROJECT, { name: 'm2' });
    const text = await (await request(`${gw.url}/metrics`)).body.text();
    const app =
      /gateway_rate_limit_points_total\{app="(key-[0-9a-f]{12})",bucket="creations",outcome="allowed"\} 1/.exec(
        text,
      )![1]!;
    // An unsalted sha256 of the key would let anyone who reads /metrics test candidate keys offline.
    expect(text).not.toContain(createHash('sha256').update(APP_A).digest('hex').slice(0, 12));
    expect(text).toContain(`gateway_rate_limit_points_total{app="${app}",bucket="creations",outcome="refused"} 1`);
    expect(text).toContain(`gateway_rate_limit_remaining_points{app="${app}",bucket="creations"} 0`);
    expect(text).not.toContain(APP_A);
    expect(gw.logs()).not.toContain(APP_A);
  });

  it('a subscription over WebSocket past the read budget is refused with RATE_LIMITED and a retry-after', async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEYS, RATE_LIMIT_READS: '1/1h' });
    const client = createClient({
      url: gw.url.replace('http', 'ws') + '/graphql',
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      connectionParams: { authorization: `Bearer ${APP_A}` },
    });
    try {
      const first = await client.iterate({ query: 'subscription { heartbeat(intervalMs: 10, count: 1) }' }).next();
      expect(first.value.errors).toBeUndefined();
      const second = client.iterate({ query: 'subscription { heartbeat(intervalMs: 10, count: 1) }' }).next();
      const error = await second.then(
        () => null,
        (errors: Array<{ message: string; extensions?: Record<string, unknown> }>) => errors,
      );
      expect(error).not.toBeNull();
      expect(error![0]!.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'reads' });
      expect(error![0]!.extensions!.retryAfter).toBeGreaterThanOrEqual(1);
    } finally {
      await client.dispose();
    }
  });

  it('a malformed limit stops start-up with a message naming the variable', () => {
    for (const bad of ['20', '0/1m', 'ten/1m', '5/0s', '5/2d', '5/1 fortnight']) {
      let error: unknown;
      try {
        loadConfig({ RATE_LIMIT_CREATIONS: bad });
      } catch (err) {
        error = err;
      }
      expect(error, bad).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).variable).toBe('RATE_LIMIT_CREATIONS');
      expect((error as Error).message).toContain('<points>/<window>');
    }
    expect(loadConfig({ RATE_LIMIT_READS: '600/1m' }).rateLimits).toEqual({
      creations: null,
      reads: { points: 600, windowMs: 60_000 },
    });
  });
});
