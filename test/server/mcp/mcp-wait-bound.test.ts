// wait_for_events holds a request and bus listeners open like a subscriptions/listen stream, so one app may hold at
// most as many on one replica as it may hold listen streams (MAX_LISTENS_PER_APP): past it a call is refused clearly,
// and other apps are not affected.
import { afterEach, describe, expect, it } from 'vitest';

import { MAX_WAITS_PER_APP } from '../../../src/server/mcp/wait.js';
import { gatewaysPerTest, type TestGateway } from '../../helpers/gateway.js';
import { mcpClient, textOf, type TestMcpClient } from '../../helpers/mcp.js';
import { postNotification } from '../../helpers/mobile-id.js';
import { wildcardListeners } from '../../helpers/resumable.js';
import { waitFor } from '../../helpers/wait.js';

const start = gatewaysPerTest();
const clients: TestMcpClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close().catch(() => undefined)));
});

const ISSUE = `mutation($id: String) { issueMobileIdNotificationToken(authReqId: $id) { token } }`;

async function mobileIdResult(gw: TestGateway, key: string, authReqId: string): Promise<void> {
  const issued = await gw.graphql(ISSUE, { id: authReqId }, { key });
  const token = (issued.data!.issueMobileIdNotificationToken as { token: string }).token;
  const { body } = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId, outcome: 'CLIENT_TIMEOUT' });
  expect((await postNotification(gw, body, { token })).status).toBe(204);
}

describe('wait_for_events is bounded per app per replica', () => {
  it(`an app holding ${16} waits is refused another, clearly; another app still waits; a wait that returns at once is not counted`, async () => {
    expect(MAX_WAITS_PER_APP).toBe(16);
    const gw = await start({ GATEWAY_API_KEYS: 'alpha:key-a,beta:key-b', RATE_LIMIT_READS: 'off' });
    const alpha = await mcpClient(gw, { key: 'key-a' });
    const beta = await mcpClient(gw, { key: 'key-b' });
    clients.push(alpha, beta);
    const { cursor } = (await alpha.call('wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 0 }))
      .structuredContent as { cursor: string };
    const held = Array.from({ length: MAX_WAITS_PER_APP }, () =>
      alpha.call('wait_for_events', { cursor, kinds: ['mobile-id'], timeoutSeconds: 300 }),
    );
    await waitFor(() => wildcardListeners(gw, 'mobile-id') === MAX_WAITS_PER_APP, 20_000, 'the waits held');

    const refused = await alpha.call('wait_for_events', { cursor, kinds: ['mobile-id'], timeoutSeconds: 300 });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/Wait limit reached: this app already has 16 wait_for_events calls waiting/);
    expect(refused.structuredContent!.errors[0]).toEqual({ code: 'RATE_LIMITED', bound: 'mcp-waits:count', limit: 16 });
    const atOnce = await alpha.call('wait_for_events', { cursor, kinds: ['mobile-id'], timeoutSeconds: 0 });
    expect(atOnce.isError).toBeFalsy();

    const other = beta.call('wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 300 });
    await waitFor(() => wildcardListeners(gw, 'mobile-id') === MAX_WAITS_PER_APP + 1, 20_000, "beta's wait held");

    // An event of alpha's ends its waits; then it may wait again.
    await mobileIdResult(gw, 'key-a', 'ends-the-waits');
    for (const r of await Promise.all(held)) expect(r.structuredContent!.events).toHaveLength(1);
    await waitFor(() => wildcardListeners(gw, 'mobile-id') === 1, 20_000, "alpha's waits ended");
    const again = alpha.call('wait_for_events', { cursor, kinds: ['mobile-id'], timeoutSeconds: 300 });
    expect((await again).structuredContent!.events).toHaveLength(1);
    await mobileIdResult(gw, 'key-b', 'ends-beta');
    expect((await other).structuredContent!.events.map((e: { key: string }) => e.key)).toEqual(['ends-beta']);
  });
});
