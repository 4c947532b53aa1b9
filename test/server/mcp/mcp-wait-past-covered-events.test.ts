// wait_for_events goes on waiting when it is woken by an event its cursor already covers. A cursor handed out by a
// replica that was ahead covers events this replica has not delivered yet; delivered during the wait, such an event
// wakes it, but it is not one to return. The wait ended there with `timedOut: true` and no event, before its timeout
// had passed and though the app's next event was yet to come.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

import type { EventRecord } from '../../../src/events/log.js';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { mcpClient, type TestMcpClient } from '../../helpers/mcp.js';
import { postNotification } from '../../helpers/mobile-id.js';
import { wildcardListeners } from '../../helpers/resumable.js';
import { waitFor } from '../../helpers/wait.js';

const ISSUE = `mutation($id: String) { issueMobileIdNotificationToken(authReqId: $id) { token } }`;

let gw: TestGateway;
let app: TestMcpClient;
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: 'alpha:key-a' });
  app = await mcpClient(gw, { key: 'key-a' });
});
afterAll(async () => {
  vi.restoreAllMocks();
  await app?.close();
  await gw?.close();
});

/** The mobile identity service reports the end of `authReqId` on a token of the app's: an event of the app's. */
async function mobileIdResult(authReqId: string): Promise<void> {
  const issued = await gw.graphql(ISSUE, { id: authReqId }, { key: 'key-a' });
  expect(issued.errors).toBeUndefined();
  const token = (issued.data!.issueMobileIdNotificationToken as { token: string }).token;
  const { body } = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId, outcome: 'CLIENT_TIMEOUT' });
  expect((await postNotification(gw, body, { token })).status).toBe(204);
}

describe('wait_for_events with a cursor ahead of this replica', () => {
  it('is not ended by an event its cursor covers: it returns the next event outside it', async () => {
    const { bus, cursors } = gw.gateway.services.events;
    // The first event is logged and acknowledged, and its delivery held: as on a replica that has not delivered it yet.
    let held: EventRecord | undefined;
    const publish = vi.spyOn(bus, 'publish').mockImplementationOnce(async (event) => {
      held = event;
    });
    await mobileIdResult('covered');
    publish.mockRestore();
    expect(held).toBeDefined();
    // The cursor of a replica that had delivered it: this replica's position and the held event.
    const ahead = bus.position();
    ahead.add(held!.seq);
    const cursor = cursors.encode(ahead, Date.now());

    const waiting = app.call('wait_for_events', { cursor, kinds: ['mobile-id'], timeoutSeconds: 120 });
    await waitFor(() => wildcardListeners(gw, 'mobile-id') === 1, 20_000, 'the wait to listen');
    // Delivered now, the covered event wakes the wait. Its read after the wake finds nothing outside the cursor and
    // queries nothing (the log holds nothing past the covered event): a wait that ends there has its answer before
    // the next event below is even logged.
    await bus.publish(held!);
    await mobileIdResult('next');
    const got = await waiting;
    expect(got.isError, JSON.stringify(got.structuredContent)).toBeFalsy();
    expect(got.structuredContent!.events.map((e: { key: string }) => e.key)).toEqual(['next']);
    expect(got.structuredContent!.timedOut).toBe(false);
  });
});
