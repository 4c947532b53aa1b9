// The cursors wait_for_events hands out are dated on the gateway's clock, the clock their age is read on
// (EVENT_RETENTION): a cursor handed out a moment ago is taken, whatever that clock says. Dated on the machine's
// clock instead, a gateway whose clock runs past the retention ahead of it refused its own fresh cursors as expired.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { mcpClient, type TestMcpClient } from '../../helpers/mcp.js';

/** Two days ahead of the machine's clock: past the one-day retention below. */
const AHEAD_MS = 2 * 24 * 3600 * 1000;

let gw: TestGateway;
let app: TestMcpClient;
beforeAll(async () => {
  gw = await startTestGateway(
    { GATEWAY_API_KEYS: 'alpha:key-a', EVENT_RETENTION: '1d' },
    { testing: { clock: () => Date.now() + AHEAD_MS } },
  );
  app = await mcpClient(gw, { key: 'key-a' });
});
afterAll(async () => {
  await app?.close();
  await gw?.close();
});

describe('a cursor wait_for_events handed out', () => {
  it('is taken back at once, its age read on the clock it was dated on', async () => {
    const first = await app.call('wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 0 });
    expect(first.isError, JSON.stringify(first.structuredContent)).toBeFalsy();
    const cursor = first.structuredContent!.cursor as string;
    expect(cursor).toEqual(expect.any(String));
    const again = await app.call('wait_for_events', { kinds: ['mobile-id'], cursor, timeoutSeconds: 0 });
    expect(again.isError, JSON.stringify(again.structuredContent)).toBeFalsy();
    expect(again.structuredContent!.events).toEqual([]);
  });
});
