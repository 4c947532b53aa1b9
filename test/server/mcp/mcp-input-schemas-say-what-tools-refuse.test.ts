// A tool's input schema says what the tool refuses: a client that checks its arguments against the schema (as
// tools/list hands it out) never sends a call the tool then refuses as an invalid argument. With the SDK's client.
import { describe, expect, it } from 'vitest';

import { gatewaysPerTest } from '../../helpers/gateway.js';
import { mcpClientsPerTest } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

describe('tool input schemas', () => {
  it("wait_for_events' kinds is a non-empty list, as the tool refuses an empty one", async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'agent:k1' });
    const c = await connect(gw, { key: 'k1' });
    const { tools } = await c.client.listTools();
    const kinds = tools.find((t) => t.name === 'wait_for_events')!.inputSchema.properties!.kinds as Record<string, any>;
    const refused = await c.call('wait_for_events', { kinds: [], timeoutSeconds: 0 });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent!.errors[0]).toMatchObject({ argument: 'kinds' });
    expect(kinds.minItems).toBe(1);
  });

  it('an Int argument is bounded to the 32-bit integers GraphQL takes', async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'agent:k1' });
    const c = await connect(gw, { key: 'k1' });
    const { tools } = await c.client.listTools();
    const first = tools.find((t) => t.name === 'projects')!.inputSchema.properties!.first as Record<string, any>;
    const refused = await c.call('projects', { first: 2 ** 31 });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent!.errors[0]).toMatchObject({ argument: 'first' });
    expect(first).toMatchObject({ type: 'integer', minimum: -(2 ** 31), maximum: 2 ** 31 - 1 });
    expect(refused.structuredContent!.errors[0].message).toMatch(/32-bit/);
  });
});
