import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { upstreamKey } from '../../src/upstream/idempotency.js';
import { M } from '../helpers/cloud.js';
import { gatewaysPerTest, logLines, startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';

const gateway = gatewaysPerTest();

/** The Idempotency-Key the upstream gets for a caller key of the open (keyless) gateway. */
const sent = (key: string) => upstreamKey('open', key);

const projectCalls = (gw: TestGateway) =>
  gw.gateway.sandbox.cloud!.requests.filter((r) => r.path === '/apis/projects/public/v4/projects');

describe('idempotency of mutations', () => {
  it('replays the stored result for the same key and input, with replayed: true and no upstream call', async () => {
    const gw = await gateway();
    const key = randomUUID();
    const first = await gw.graphql(M.project, { input: { name: 'p' }, key });
    expect(first.data!.createProject).toMatchObject({ idempotencyKey: key, replayed: false });
    const second = await gw.graphql(M.project, { input: { name: 'p' }, key });
    expect(second.data!.createProject).toEqual({ ...first.data!.createProject, replayed: true });
    expect(projectCalls(gw)).toHaveLength(1);
    expect(projectCalls(gw)[0]!.headers['idempotency-key']).toBe(sent(key));
    expect(first.data!.createProject.upstreamIdempotencyKey).toBe(sent(key));
  });

  it('generates a UUIDv4 key when the caller gives none', async () => {
    const gw = await gateway();
    const res = await gw.graphql(M.project, { input: { name: 'p' } });
    expect(res.data!.createProject.idempotencyKey).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
    expect(projectCalls(gw)[0]!.headers['idempotency-key']).toBe(sent(res.data!.createProject.idempotencyKey));
    expect(res.data!.createProject.upstreamIdempotencyKey).toBe(sent(res.data!.createProject.idempotencyKey));
  });

  it('refuses the same key with another input with IDEMPOTENCY_KEY_REUSED and no upstream call', async () => {
    const gw = await gateway();
    const key = randomUUID();
    await gw.graphql(M.project, { input: { name: 'p' }, key });
    const res = await gw.graphql(M.project, { input: { name: 'other' }, key });
    expect(res.errors![0]!.extensions!.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(projectCalls(gw)).toHaveLength(1);
  });

  it('makes a single upstream call for concurrent requests with one key; the others wait and replay', async () => {
    const gw = await gateway();
    gw.gateway.sandbox.cloud!.faults.latencyMs = 300;
    const key = randomUUID();
    const results = await Promise.all(
      Array.from({ length: 5 }, () => gw.graphql(M.project, { input: { name: 'race' }, key })),
    );
    for (const r of results) expect(r.errors).toBeUndefined();
    const payloads = results.map((r) => r.data!.createProject);
    expect(new Set(payloads.map((p) => p.project.id)).size).toBe(1);
    expect(payloads.filter((p) => !p.replayed)).toHaveLength(1);
    expect(projectCalls(gw)).toHaveLength(1);
  });

  it('answers IDEMPOTENCY_KEY_IN_USE when the first request outlasts the bounded wait', async () => {
    const gw = await gateway({ IDEMPOTENCY_WAIT: '100ms' });
    // The upstream holds the first request until the second has been answered: no race with a duration.
    const held = gw.gateway.sandbox.cloud!.faults.hold();
    const key = randomUUID();
    const first = gw.graphql(M.project, { input: { name: 'slow' }, key });
    // The first request reached the upstream, so it holds the key.
    await expect.poll(() => held.arrived(), { timeout: 20_000 }).toBe(1);
    const second = await gw.graphql(M.project, { input: { name: 'slow' }, key });
    expect(second.errors![0]!.extensions!.code).toBe('IDEMPOTENCY_KEY_IN_USE');
    held.release();
    expect((await first).errors).toBeUndefined();
    expect(projectCalls(gw)).toHaveLength(1);
  });

  it('replays after a restart of the gateway on the same DATA_DIR without calling the upstream', async () => {
    const dataDir = tempDataDir();
    const key = randomUUID();
    const a = await startTestGateway({ DATA_DIR: dataDir });
    const first = await a.graphql(M.project, { input: { name: 'durable' }, key });
    await a.close();
    const b = await gateway({ DATA_DIR: dataDir });
    const again = await b.graphql(M.project, { input: { name: 'durable' }, key });
    expect(again.data!.createProject).toEqual({ ...first.data!.createProject, replayed: true });
    expect(projectCalls(b)).toHaveLength(0);
    const reused = await b.graphql(M.project, { input: { name: 'changed' }, key });
    expect(reused.errors![0]!.extensions!.code).toBe('IDEMPOTENCY_KEY_REUSED');
  });

  it('retries a 503 under the same key and succeeds', async () => {
    const gw = await gateway();
    gw.gateway.sandbox.cloud!.faults.enqueue('503', '503');
    const key = randomUUID();
    const res = await gw.graphql(M.project, { input: { name: 'retry' }, key });
    expect(res.errors).toBeUndefined();
    const calls = projectCalls(gw);
    expect(calls.map((c) => c.status)).toEqual([503, 503, 201]);
    expect(new Set(calls.map((c) => c.headers['idempotency-key']))).toEqual(new Set([sent(key)]));
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(metrics).toMatch(
      /gateway_upstream_retries_total\{upstream="cloud",route="POST \/apis\/projects\/public\/v4\/projects",reason="HTTP 503"\} 2/,
    );
  });

  it('retries a connection reset under the same key', async () => {
    const gw = await gateway();
    gw.gateway.sandbox.cloud!.faults.enqueue('reset');
    const key = randomUUID();
    const res = await gw.graphql(M.project, { input: { name: 'reset' }, key });
    expect(res.errors).toBeUndefined();
    const calls = projectCalls(gw);
    expect(calls).toHaveLength(2);
    expect(calls[0]!.status).toBeNull();
    expect(calls.every((c) => c.headers['idempotency-key'] === sent(key))).toBe(true);
  });

  it('retries a timeout under the same key', async () => {
    // The first attempt waits the whole timeout out; the second must be answered within it even if the machine stalls
    // for a few seconds meanwhile (a third attempt would be sent): long enough for that, short enough to wait once.
    const gw = await gateway({ UPSTREAM_TIMEOUT: '3s' });
    gw.gateway.sandbox.cloud!.faults.enqueue('timeout');
    const key = randomUUID();
    const res = await gw.graphql(M.project, { input: { name: 'timeout' }, key });
    expect(res.errors).toBeUndefined();
    const calls = projectCalls(gw);
    expect(calls).toHaveLength(2);
    expect(calls.every((c) => c.headers['idempotency-key'] === sent(key))).toBe(true);
  });

  it('waits for Retry-After on a 429 before retrying', async () => {
    const gw = await gateway();
    gw.gateway.sandbox.cloud!.faults.enqueue({ status: 429, retryAfterSeconds: 1 });
    const started = Date.now();
    const res = await gw.graphql(M.project, { input: { name: 'throttled' } });
    expect(res.errors).toBeUndefined();
    const calls = projectCalls(gw);
    expect(calls.map((c) => c.status)).toEqual([429, 201]);
    expect(calls[1]!.receivedAt.getTime() - calls[0]!.receivedAt.getTime()).toBeGreaterThanOrEqual(950);
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
  });

  it('gives UPSTREAM_UNAVAILABLE when transient failures outlast the retries, and a later call re-sends the same key', async () => {
    const gw = await gateway({ UPSTREAM_MAX_RETRIES: '2' });
    gw.gateway.sandbox.cloud!.faults.enqueue('503', '503', '503');
    const key = randomUUID();
    const failed = await gw.graphql(M.project, { input: { name: 'down' }, key });
    expect(failed.errors![0]!.extensions).toMatchObject({
      code: 'UPSTREAM_UNAVAILABLE',
      upstream: 'cloud',
      attempts: 3,
    });
    expect(projectCalls(gw)).toHaveLength(3);
    const later = await gw.graphql(M.project, { input: { name: 'down' }, key });
    expect(later.errors).toBeUndefined();
    expect(later.data!.createProject).toMatchObject({ idempotencyKey: key, replayed: false });
    expect(projectCalls(gw).map((c) => c.headers['idempotency-key'])).toEqual(Array(4).fill(sent(key)));
  });

  it('does not retry a 4xx and reports UPSTREAM_REJECTED with the status and the upstream error body', async () => {
    const gw = await gateway();
    const body = { code: 'INSUFFICIENT_BALANCE', domain: 'billing', details: 'the balance does not cover the service' };
    gw.gateway.sandbox.cloud!.faults.enqueue({ status: 402, body });
    const res = await gw.graphql(M.project, { input: { name: 'poor' } });
    expect(res.errors![0]!.extensions).toMatchObject({
      code: 'UPSTREAM_REJECTED',
      status: 402,
      upstream: 'cloud',
      upstreamError: body,
    });
    expect(res.errors![0]!.message).toContain('the balance does not cover the service');
    expect(projectCalls(gw)).toHaveLength(1);
  });

  it('takes a 303 See Other answering a creation as an unknown outcome, not a refusal: not followed, the key stays bound, and the retry sends the same key', async () => {
    const gw = await gateway();
    const cloud = gw.gateway.sandbox.cloud!;
    // The upstream creates the project and answers "303 See Other" (created, see there) instead of its 201.
    cloud.faults.enqueueFor('/apis/projects/public/v4/projects', 'see-other');
    const key = randomUUID();
    const first = await gw.graphql(M.project, { input: { name: 'seen-elsewhere' }, key });
    expect(first.errors).toHaveLength(1);
    expect(first.errors![0]!.extensions).toMatchObject({
      code: 'UPSTREAM_OUTCOME_UNKNOWN',
      upstream: 'cloud',
      status: 303,
      attempts: 1,
      idempotencyKey: key,
      upstreamIdempotencyKey: sent(key),
    });
    expect(first.errors![0]!.message).toContain('redirect');
    expect(JSON.stringify(first)).not.toContain('UPSTREAM_REJECTED');
    const created = cloud.projects();
    expect(created).toHaveLength(1);
    // Neither repeated nor followed: one request, none to the Location.
    expect(projectCalls(gw)).toHaveLength(1);
    expect(cloud.requests.filter((r) => r.path.endsWith('/see-other'))).toHaveLength(0);

    // The key stays bound to its request: another input is refused before the wire.
    const other = await gw.graphql(M.project, { input: { name: 'another' }, key });
    expect(other.errors![0]!.extensions!.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(projectCalls(gw)).toHaveLength(1);

    // The same input is sent again under the same upstream key, which the cloud answers with the one it created.
    const retry = await gw.graphql(M.project, { input: { name: 'seen-elsewhere' }, key });
    expect(retry.errors).toBeUndefined();
    expect(retry.data!.createProject).toMatchObject({
      project: { id: created[0]!.id, name: 'seen-elsewhere' },
      idempotencyKey: key,
      upstreamIdempotencyKey: sent(key),
      replayed: false,
    });
    expect(projectCalls(gw).map((c) => c.headers['idempotency-key'])).toEqual([sent(key), sent(key)]);
    expect(cloud.projects()).toHaveLength(1);

    // One warning, naming the status and the upstream, never the answer (which holds the created id).
    const warned = logLines<{ level: number; msg: string; upstream?: string; status?: number }>(gw, (l) =>
      /redirect/.test(l.msg),
    );
    expect(warned).toEqual([expect.objectContaining({ level: 40, upstream: 'cloud', status: 303 })]);
    expect(JSON.stringify(warned)).not.toContain(created[0]!.id);
    expect(gw.logs()).not.toContain('UPSTREAM_REJECTED');
  });

  it('forgets records after IDEMPOTENCY_RETENTION', async () => {
    let now = Date.now();
    // The shortest retention there is (1s): the clock is the test's, so nothing waits for it.
    const gw = await gateway({ IDEMPOTENCY_RETENTION: '1s' }, { testing: { clock: () => now } });
    const key = randomUUID();
    await gw.graphql(M.project, { input: { name: 'short' }, key });
    now += 800;
    expect((await gw.graphql(M.project, { input: { name: 'short' }, key })).data!.createProject.replayed).toBe(true);
    now += 400;
    const again = await gw.graphql(M.project, { input: { name: 'short' }, key });
    expect(again.data!.createProject.replayed).toBe(false);
    expect(projectCalls(gw)).toHaveLength(2);
  });

  it('scopes records per API key: another key cannot replay or block a key it did not use', async () => {
    const gw = await gateway({ GATEWAY_API_KEYS: 'key-a,key-b', CLOUD_API_URL: '', MOBILEID_NOTIFICATION_TOKENS: '' });
    const key = randomUUID();
    const a = await gw.graphql(M.project, { input: { name: 'scoped' }, key }, { key: 'key-a' });
    expect(a.data!.createProject.replayed).toBe(false);
    const b = await gw.graphql(M.project, { input: { name: 'scoped' }, key }, { key: 'key-b' });
    expect(b.errors).toBeUndefined();
    expect(b.data!.createProject.replayed).toBe(false);
    const a2 = await gw.graphql(M.project, { input: { name: 'scoped' }, key }, { key: 'key-a' });
    expect(a2.data!.createProject.replayed).toBe(true);
  });
});
