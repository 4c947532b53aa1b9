// Events as MCP resources across two replicas sharing one embedded PostgreSQL (docs/decisions/060): the log and the
// bus are shared, so an agent waiting or listening on one replica gets what the other took in, and a cursor from one
// resumes on the other.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { TestGateway } from '../../helpers/gateway.js';
import { mcpClient, type TestMcpClient } from '../../helpers/mcp.js';
import { postNotification } from '../../helpers/mobile-id.js';
import { startReplicas, type Replicas } from '../../helpers/postgres.js';
import { wildcardListeners } from '../../helpers/resumable.js';
import { waitFor } from '../../helpers/wait.js';

let replicas: Replicas;
const clients: TestMcpClient[] = [];
beforeAll(async () => {
  replicas = await startReplicas('mcp_events', { GATEWAY_API_KEYS: 'alpha:key-a,beta:key-b' });
}, 180_000);
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  await replicas?.close();
});
async function connect(gw: TestGateway, key: string): Promise<TestMcpClient> {
  const c = await mcpClient(gw, { key });
  clients.push(c);
  return c;
}

/** The end of `authReqId`, notified to replica `gw` on a token `key` issued there. */
async function mobileIdResult(gw: TestGateway, key: string, authReqId: string): Promise<void> {
  const issued = await gw.graphql(
    `mutation($id: String) { issueMobileIdNotificationToken(authReqId: $id) { token } }`,
    { id: authReqId },
    { key },
  );
  expect(issued.errors).toBeUndefined();
  const token = (issued.data!.issueMobileIdNotificationToken as { token: string }).token;
  const { body } = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId, outcome: 'CLIENT_TIMEOUT' });
  expect((await postNotification(gw, body, { token })).status).toBe(204);
}

const keysOf = (result: { structuredContent?: Record<string, any> }) =>
  (result.structuredContent!.events as { key: string }[]).map((e) => e.key);

describe('MCP events across replicas (PostgreSQL)', () => {
  it('wait_for_events on one replica returns the event taken in on the other, another app never sees it, and the cursor resumes on the first', async () => {
    const onB = await connect(replicas.b, 'key-a');
    const otherOnB = await connect(replicas.b, 'key-b');
    const onA = await connect(replicas.a, 'key-a');
    const start = await onB.call('wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 0 });
    const otherStart = await otherOnB.call('wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 0 });

    const waiting = onB.call('wait_for_events', {
      cursor: start.structuredContent!.cursor,
      kinds: ['mobile-id'],
      timeoutSeconds: 120,
    });
    // The wait is in flight once it listens for every key of its kinds (wait_for_events is the only such listener here).
    await waitFor(() => wildcardListeners(replicas.b, 'mobile-id') === 1, 20_000);
    await mobileIdResult(replicas.a, 'key-a', 'across-1');
    const got = await waiting;
    expect(keysOf(got)).toEqual(['across-1']);
    expect(got.structuredContent!.events[0]).toMatchObject({
      kind: 'mobile-id',
      uri: 'mobileid://authentications/across-1',
    });

    // The other app, from before the event, reads nothing of it; its own next event is what it gets.
    expect(
      keysOf(
        await otherOnB.call('wait_for_events', { cursor: otherStart.structuredContent!.cursor, timeoutSeconds: 0 }),
      ),
    ).toEqual([]);
    await mobileIdResult(replicas.a, 'key-b', 'across-other');
    expect(
      keysOf(
        await otherOnB.call('wait_for_events', { cursor: otherStart.structuredContent!.cursor, timeoutSeconds: 60 }),
      ),
    ).toEqual(['across-other']);

    // B's cursor on A: nothing repeated, then the next event, taken in on B.
    const cursor = got.structuredContent!.cursor as string;
    expect(keysOf(await onA.call('wait_for_events', { cursor, kinds: ['mobile-id'], timeoutSeconds: 0 }))).toEqual([]);
    await mobileIdResult(replicas.b, 'key-a', 'across-2');
    expect(keysOf(await onA.call('wait_for_events', { cursor, kinds: ['mobile-id'], timeoutSeconds: 60 }))).toEqual([
      'across-2',
    ]);
  });

  it('a subscriptions/listen stream on one replica gets notifications/resources/updated for a result taken in on the other', async () => {
    const onB = await connect(replicas.b, 'key-a');
    const seen: string[] = [];
    onB.client.setNotificationHandler('notifications/resources/updated', (n) => void seen.push(n.params.uri));
    const sub = await onB.client.listen({ resourceSubscriptions: ['mobileid://authentications/listened-across'] });
    await mobileIdResult(replicas.a, 'key-a', 'listened-across');
    await waitFor(() => seen.length === 1, 20_000);
    expect(seen).toEqual(['mobileid://authentications/listened-across']);
    await sub.close();
  });
});
