// A wait_for_events whose cursor the gateway cannot take (one it did not hand out) is bad input: refused with
// BAD_USER_INPUT as without a limit, and it spends no point of the app's reads budget, as a GraphQL operation's
// variables it cannot take spend nothing (docs/apps-and-security.md, Per-app rate limits). Over real HTTP.
import { describe, expect, it } from 'vitest';

import { gatewaysPerTest } from '../../helpers/gateway.js';
import { mcpClientsPerTest } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

describe('wait_for_events with a cursor it cannot take', () => {
  it('is refused as malformed and spends nothing, however often: the budget is whole for a good call', async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'alpha:key-a', RATE_LIMIT_READS: '2/1h' });
    const c = await connect(gw, { key: 'key-a' });
    for (let i = 0; i < 3; i++) {
      const refused = await c.call('wait_for_events', { cursor: 'not-a-cursor', timeoutSeconds: 0 });
      expect(refused.isError).toBe(true);
      expect(refused.structuredContent!.errors[0]).toMatchObject({
        code: 'BAD_USER_INPUT',
        argument: 'cursor',
        reason: 'malformed',
      });
    }
    for (let i = 0; i < 2; i++) {
      const read = await c.call('wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 0 });
      expect(read.isError).toBeFalsy();
      expect(read.structuredContent).toMatchObject({ events: [], timedOut: true });
    }
    // The budget of 2 is spent by the good calls alone.
    const spent = await c.call('wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 0 });
    expect(spent.structuredContent!.errors[0]).toMatchObject({ code: 'RATE_LIMITED' });
  });
});
