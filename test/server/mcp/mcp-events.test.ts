// Events as MCP resources, and waiting for them (docs/decisions/060, "Events as resources"), with the SDK's own client
// over real HTTP: resources read by their owner only, notifications/resources/updated on a subscriptions/listen stream
// when the durable log records a mobile-ID result, and wait_for_events before and after the event.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { CursorCodec, Position } from '../../../src/events/cursor.js';
import { appsFile, startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { mcpClient, textOf, type McpClientOptions, type TestMcpClient } from '../../helpers/mcp.js';
import { postNotification } from '../../helpers/mobile-id.js';
import { wildcardListeners } from '../../helpers/resumable.js';
import { waitFor } from '../../helpers/wait.js';

const ISSUE = `mutation($id: String) { issueMobileIdNotificationToken(authReqId: $id) { token } }`;

let gw: TestGateway;
const clients: TestMcpClient[] = [];
async function connect(o: McpClientOptions): Promise<TestMcpClient> {
  const c = await mcpClient(gw, o);
  clients.push(c);
  return c;
}

beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: 'alpha:key-a,beta:key-b' });
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  await gw?.close();
});

/** The mobile identity service reports the end of `authReqId` on a token `key` issued: an event owned by that app. */
async function mobileIdResult(key: string, authReqId: string): Promise<void> {
  const issued = await gw.graphql(ISSUE, { id: authReqId }, { key });
  expect(issued.errors).toBeUndefined();
  const token = (issued.data!.issueMobileIdNotificationToken as { token: string }).token;
  const { body } = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId, outcome: 'CLIENT_TIMEOUT' });
  expect((await postNotification(gw, body, { token })).status).toBe(204);
}

const uriOf = (authReqId: string) => `mobileid://authentications/${authReqId}`;

describe('MCP resources', () => {
  it('the SDL, the catalog and one template per kind of event are offered as resources', async () => {
    const c = await connect({ key: 'key-a' });
    const { resources } = await c.client.listResources();
    expect(resources.map((r) => r.uri).sort()).toEqual(['cloud://catalog', 'graphql://schema']);
    const { resourceTemplates } = await c.client.listResourceTemplates();
    expect(resourceTemplates.map((t) => t.uriTemplate).sort()).toEqual([
      'cloud://provisionings/{id}',
      'identity://identifications/{id}',
      'identity://verifications/{externalId}',
      'mobileid://authentications/{authReqId}',
    ]);
    const sdl = await c.client.readResource({ uri: 'graphql://schema' });
    expect((sdl.contents[0] as { text: string }).text).toContain('mobileIdAuthentication(');
    const catalog = await c.client.readResource({ uri: 'cloud://catalog' });
    expect(JSON.parse((catalog.contents[0] as { text: string }).text)).toHaveProperty('instanceTypes');
  });

  it('a mobile-ID authentication is read as a resource by its owner; another app gets the same not-found as for an unknown one', async () => {
    await mobileIdResult('key-a', 'res-owned');
    const owner = await connect({ key: 'key-a' });
    const read = await owner.client.readResource({ uri: uriOf('res-owned') });
    expect(JSON.parse((read.contents[0] as { text: string }).text)).toMatchObject({
      __typename: 'MobileIdAuthenticationFailed',
      authReqId: 'res-owned',
      reason: 'CLIENT_TIMEOUT',
    });

    const other = await connect({ key: 'key-b' });
    const refused = await other.client.readResource({ uri: uriOf('res-owned') }).then(
      () => null,
      (e: Error & { code?: number }) => e,
    );
    const unknown = await other.client.readResource({ uri: uriOf('res-never-was') }).then(
      () => null,
      (e: Error & { code?: number }) => e,
    );
    expect(refused).toBeInstanceOf(Error);
    expect(refused!.code).toBe(unknown!.code);
    expect(refused!.message.replace('res-owned', 'X')).toBe(unknown!.message.replace('res-never-was', 'X'));
  });

  it('a subscriptions/listen stream gets notifications/resources/updated when the mobile-ID result is posted; another app listening on the same URI never gets it', async () => {
    const owner = await connect({ key: 'key-a' });
    const other = await connect({ key: 'key-b' });
    const seen: { owner: string[]; other: string[] } = { owner: [], other: [] };
    owner.client.setNotificationHandler('notifications/resources/updated', (n) => void seen.owner.push(n.params.uri));
    other.client.setNotificationHandler('notifications/resources/updated', (n) => void seen.other.push(n.params.uri));
    const ownerSub = await owner.client.listen({ resourceSubscriptions: [uriOf('listen-a')] });
    // The other app listens on the owner's URI and on one of its own: its own event, posted after, is the proof that
    // the owner's was handled first and never came (one stream, in order).
    const otherSub = await other.client.listen({ resourceSubscriptions: [uriOf('listen-a'), uriOf('listen-b')] });
    expect(otherSub.honoredFilter.resourceSubscriptions).toEqual([uriOf('listen-a'), uriOf('listen-b')]);

    await mobileIdResult('key-a', 'listen-a');
    await waitFor(() => seen.owner.length === 1, 20_000);
    expect(seen.owner).toEqual([uriOf('listen-a')]);
    await mobileIdResult('key-b', 'listen-b');
    await waitFor(() => seen.other.length === 1, 20_000);
    expect(seen.other).toEqual([uriOf('listen-b')]);
    await ownerSub.close();
    await otherSub.close();
  });

  it('an app holds at most 16 subscriptions/listen streams on a replica: the next is refused, and another app still listens', async () => {
    const greedy = await connect({ key: 'key-b' });
    const subs = await Promise.all(
      Array.from({ length: 16 }, (_, i) => greedy.client.listen({ resourceSubscriptions: [uriOf(`greedy-${i}`)] })),
    );
    const refused = await greedy.client.listen({ resourceSubscriptions: [uriOf('greedy-16')] }).then(
      () => null,
      (e: Error) => e,
    );
    expect(refused?.message).toMatch(/Subscription limit reached: this app already has 16/);
    // The refusal names its bound and limit, as every per-app bound's does.
    expect((refused as { data?: unknown } | null)?.data).toEqual({
      code: 'RATE_LIMITED',
      bound: 'mcp-listens:count',
      limit: 16,
    });
    const other = await connect({ key: 'key-a' });
    const fine = await other.client.listen({ resourceSubscriptions: [uriOf('not-greedy')] });
    await fine.close();
    await Promise.all(subs.map((s) => s.close()));
  });

  it('resources/subscribe of a 2025 client fails clearly, naming subscriptions/listen and wait_for_events', async () => {
    const c = await connect({ key: 'key-a', era: 'legacy' });
    expect(c.client.getServerCapabilities()?.resources?.subscribe).toBe(false);
    const failed = await c.client.subscribeResource({ uri: uriOf('legacy') }).then(
      () => null,
      (e: Error) => e,
    );
    expect(failed?.message).toMatch(/stateless/);
    expect(failed?.message).toMatch(/subscriptions\/listen/);
    expect(failed?.message).toMatch(/wait_for_events/);
  });
});

describe('wait_for_events', () => {
  it('after the event: returns at once what was logged after the cursor, and the next cursor, from which nothing is repeated', async () => {
    const c = await connect({ key: 'key-a' });
    const start = await c.call('wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 0 });
    expect(start.structuredContent).toMatchObject({ events: [], timedOut: true });
    await mobileIdResult('key-a', 'after-1');
    const got = await c.call('wait_for_events', {
      cursor: start.structuredContent!.cursor,
      kinds: ['mobile-id'],
      timeoutSeconds: 60,
    });
    expect(got.structuredContent!.events).toEqual([
      expect.objectContaining({ kind: 'mobile-id', key: 'after-1', uri: uriOf('after-1'), cursor: expect.any(String) }),
    ]);
    expect(got.structuredContent!.timedOut).toBe(false);
    const next = await c.call('wait_for_events', { cursor: got.structuredContent!.cursor, timeoutSeconds: 0 });
    expect(next.structuredContent!.events).toEqual([]);
  });

  it('before the event: waits for it and returns it as soon as it is logged', async () => {
    const c = await connect({ key: 'key-a' });
    const start = await c.call('wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 0 });
    const waiting = c.call('wait_for_events', {
      cursor: start.structuredContent!.cursor,
      kinds: ['mobile-id'],
      timeoutSeconds: 120,
    });
    // The wait is in flight once it listens for every key of its kinds (wait_for_events is the only such listener here).
    await waitFor(() => wildcardListeners(gw, 'mobile-id') === 1, 20_000);
    await mobileIdResult('key-a', 'before-1');
    const got = await waiting;
    expect(got.structuredContent!.events.map((e: { key: string }) => e.key)).toEqual(['before-1']);
    expect(got.structuredContent!.timedOut).toBe(false);
  });

  it("another app never sees the event: its wait returns its own next event and not the other app's", async () => {
    const other = await connect({ key: 'key-b' });
    const start = await other.call('wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 0 });
    await mobileIdResult('key-a', 'not-yours');
    const nothing = await other.call('wait_for_events', { cursor: start.structuredContent!.cursor, timeoutSeconds: 0 });
    expect(nothing.structuredContent!.events).toEqual([]);
    await mobileIdResult('key-b', 'yours');
    const got = await other.call('wait_for_events', { cursor: start.structuredContent!.cursor, timeoutSeconds: 60 });
    expect(got.structuredContent!.events.map((e: { key: string }) => e.key)).toEqual(['yours']);
  });

  it('a forged cursor (altered in one character, or sealed under another secret) gets a tool error naming the cursor as malformed, and nothing is read', async () => {
    const c = await connect({ key: 'key-a' });
    const real = gw.gateway.services.events.cursors.encode(new Position(1), Date.now());
    const altered = real.slice(0, 3) + (real[3] === 'A' ? 'B' : 'A') + real.slice(4);
    for (const forged of [altered, CursorCodec.random().encode(new Position(1), Date.now())]) {
      const result = await c.call('wait_for_events', { cursor: forged, timeoutSeconds: 0 });
      expect(result.isError).toBe(true);
      expect(result.structuredContent!.errors[0]).toMatchObject({
        code: 'BAD_USER_INPUT',
        argument: 'cursor',
        reason: 'malformed',
      });
    }
  });

  it('an expired cursor gets a tool error naming EVENT_RETENTION, and nothing is read', async () => {
    const c = await connect({ key: 'key-a' });
    const old = gw.gateway.services.events.cursors.encode(new Position(1), Date.now() - 7 * 86_400_000 - 60_000);
    const result = await c.call('wait_for_events', { cursor: old, timeoutSeconds: 0 });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/Invalid argument cursor: .*EVENT_RETENTION, 7 days/);
    expect(result.structuredContent!.errors[0]).toMatchObject({
      code: 'BAD_USER_INPUT',
      argument: 'cursor',
      reason: 'expired',
    });
    const malformed = await c.call('wait_for_events', { cursor: 'not-a-cursor', timeoutSeconds: 0 });
    expect(malformed.structuredContent!.errors[0]).toMatchObject({ argument: 'cursor', reason: 'malformed' });
  });

  it('bad arguments name the argument: a timeout out of range, an unknown kind', async () => {
    const c = await connect({ key: 'key-a' });
    expect((await c.call('wait_for_events', { timeoutSeconds: 301 })).structuredContent!.errors[0]).toMatchObject({
      argument: 'timeoutSeconds',
    });
    expect(
      (await c.call('wait_for_events', { kinds: ['mobile-id', 'payments'], timeoutSeconds: 0 })).structuredContent!
        .errors[0],
    ).toMatchObject({ argument: 'kinds.1' });
  });
});

describe('event resources per scope, and long provisioning', () => {
  let scoped: TestGateway;
  beforeAll(async () => {
    const file = appsFile('mcp-events-apps-', [
      { name: 'watcher', scopes: ['mobile-id:read'], key: 'watcher-key-0123456789' },
      { name: 'builder', scopes: ['cloud:read', 'cloud:write'], key: 'builder-key-0123456789' },
    ]);
    scoped = await startTestGateway({ GATEWAY_APPS_FILE: file, MCP_MUTATIONS: 'all' });
  });
  afterAll(async () => {
    await scoped?.close();
  });

  it('an app sees the templates of the kinds its scopes allow; waiting on another kind, or reading a resource outside its scopes, is refused naming the scope', async () => {
    const c = await mcpClient(scoped, { key: 'watcher-key-0123456789' });
    clients.push(c);
    expect((await c.client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate)).toEqual([
      'mobileid://authentications/{authReqId}',
    ]);
    expect((await c.client.listResources()).resources.map((r) => r.uri)).toEqual(['graphql://schema']);
    const refused = await c.call('wait_for_events', { kinds: ['verification'], timeoutSeconds: 0 });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toMatchObject({ code: 'FORBIDDEN', scope: 'identity:read' });
    const catalog = await c.client.readResource({ uri: 'cloud://catalog' }).then(
      () => null,
      (e: Error) => e,
    );
    expect(catalog?.message).toMatch(/cloud:read/);
  });

  it('a provisioning tool links the provisioning as a resource, which its app reads and follows with wait_for_events', async () => {
    const c = await mcpClient(scoped, { key: 'builder-key-0123456789' });
    clients.push(c);
    const start = await c.call('wait_for_events', { kinds: ['provisioning'], timeoutSeconds: 0 });
    const started = await c.call('provision_kafka_cluster', {
      input: {
        project: { name: 'followed' },
        network: { title: 'n' },
        subnet: { title: 's', cidr: '10.1.0.0/24' },
        cluster: { title: 'k', instanceCount: 1, instanceType: 'C1_MEDIUM' },
      },
    });
    expect(started.isError, textOf(started)).toBeFalsy();
    const id = started.structuredContent!.provisionKafkaCluster.provisioning.id as string;
    const link = started.content.find((c) => c.type === 'resource_link') as { uri: string } | undefined;
    expect(link?.uri).toBe(`cloud://provisionings/${id}`);
    const read = JSON.parse(((await c.client.readResource({ uri: link!.uri })).contents[0] as { text: string }).text);
    expect(read).toMatchObject({ id });
    const events = await c.call('wait_for_events', {
      cursor: start.structuredContent!.cursor,
      kinds: ['provisioning'],
      timeoutSeconds: 60,
    });
    expect(events.structuredContent!.events[0]).toMatchObject({ kind: 'provisioning', key: id, uri: link!.uri });
  });
});
