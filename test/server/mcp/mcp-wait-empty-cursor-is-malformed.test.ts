// wait_for_events refuses an empty cursor as every other text the gateway did not hand out: BAD_USER_INPUT on
// `cursor` with reason "malformed", the answer graphql-ws gives an empty `after`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { mcpClient, textOf, type TestMcpClient } from '../../helpers/mcp.js';
import { collect, wsClient } from '../../helpers/mobile-id.js';

const MALFORMED = {
  content: [{ type: 'text', text: 'Invalid argument cursor: not a cursor this gateway handed out; nothing was read' }],
  isError: true,
  structuredContent: { errors: [{ code: 'BAD_USER_INPUT', argument: 'cursor', reason: 'malformed' }] },
};

/** A tool result as the tool answered it (without the SDK's `_meta`). */
const answer = ({ content, isError, structuredContent }: Awaited<ReturnType<TestMcpClient['call']>>) => ({
  content,
  isError,
  structuredContent,
});

let gw: TestGateway;
let app: TestMcpClient;
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: 'alpha:key-a' });
  app = await mcpClient(gw, { key: 'key-a' });
});
afterAll(async () => {
  await app?.close();
  await gw?.close();
});

describe('wait_for_events with an empty cursor', () => {
  it('is refused as a malformed cursor, exactly as a cursor the gateway never handed out', async () => {
    const forged = await app.call('wait_for_events', { cursor: 'not-a-cursor', timeoutSeconds: 0 });
    expect(answer(forged)).toEqual(MALFORMED);
    for (const cursor of ['', 42]) {
      const result = await app.call('wait_for_events', { cursor, timeoutSeconds: 0 });
      expect(answer(result), JSON.stringify(cursor)).toEqual(MALFORMED);
    }
  });

  it('carries the reason graphql-ws gives an empty after', async () => {
    const client = wsClient(gw, { key: 'key-a' });
    try {
      const sub = collect(
        client,
        'subscription($after: String) { verificationCompleted(after: $after) { externalId } }',
        { after: '' },
      );
      await sub.done;
      expect(sub.results.flatMap((r: { errors?: unknown[] }) => r.errors ?? [])).toEqual([
        expect.objectContaining({ extensions: { code: 'BAD_USER_INPUT', field: 'after', reason: 'malformed' } }),
      ]);
      const result = await app.call('wait_for_events', { cursor: '', timeoutSeconds: 0 });
      expect(textOf(result)).toBe('Invalid argument cursor: not a cursor this gateway handed out; nothing was read');
      expect(result.structuredContent!.errors[0].reason).toBe('malformed');
    } finally {
      await client.dispose();
    }
  });
});
