// A cursor expires on the clock the event log's retention purges by (the gateway clock, which a test moves): once that
// clock is past EVENT_RETENTION from the cursor, events after it may have been purged, so a resume is refused as
// expired over graphql-ws, SSE (Last-Event-ID) and MCP wait_for_events, never accepted with a silent gap.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { testClock } from '../helpers/jwt.js';
import { mcpClient } from '../helpers/mcp.js';
import { cursorNow, resumeWs } from '../helpers/resumable.js';
import { waitFor } from '../helpers/wait.js';

const KEY = 'key-cursor-clock-0123456789';
const RETENTION_MS = 7 * 86_400_000;

describe('a cursor older than EVENT_RETENTION on the gateway clock', () => {
  const clock = testClock();
  let t: TestGateway;
  let cursor: string;

  beforeAll(async () => {
    t = await startTestGateway({ GATEWAY_API_KEYS: KEY }, { testing: { clock: clock.now } });
    cursor = cursorNow(t);
    // The retention purge deletes, on this clock, every event logged before now.
    clock.advance(RETENTION_MS + 60_000);
  });
  afterAll(() => t?.close());

  it('is refused as expired over graphql-ws', async () => {
    const sub = await resumeWs(t, KEY, cursor);
    await waitFor(() => sub.errors.length > 0 || sub.events.length > 0, 20_000, 'the refusal');
    await sub.close();
    expect(sub.errors[0]).toMatchObject({
      extensions: { code: 'BAD_USER_INPUT', field: 'after', reason: 'expired', retentionMs: RETENTION_MS },
    });
  });

  it('is refused as expired over SSE, as Last-Event-ID', async () => {
    const res = await request(`${t.url}/graphql/stream`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${KEY}`,
        'content-type': 'application/json',
        accept: 'text/event-stream',
        'last-event-id': cursor,
      },
      body: JSON.stringify({ query: 'subscription { verificationCompleted { externalId } }' }),
    });
    const first = await new Promise<string>((resolve) => {
      // A bound on a failure only: the refusal is the stream's first event.
      setTimeout(() => resolve('{"errors":[{"message":"no refusal in 20 s"}]}'), 20_000).unref();
      let text = '';
      res.body.on('data', (chunk: Buffer) => {
        text += chunk.toString();
        const data = /^data: (\{.*)$/m.exec(text)?.[1];
        if (data) resolve(data);
      });
    });
    res.body.destroy();
    expect(JSON.parse(first).errors[0].extensions).toMatchObject({
      code: 'BAD_USER_INPUT',
      field: 'Last-Event-ID',
      reason: 'expired',
    });
  });

  it('is refused as expired by MCP wait_for_events', async () => {
    const mcp = await mcpClient(t, { key: KEY });
    try {
      const result = await mcp.call('wait_for_events', { cursor, timeoutSeconds: 0 });
      expect(result.isError).toBe(true);
      expect(result.structuredContent).toMatchObject({
        errors: [{ code: 'BAD_USER_INPUT', argument: 'cursor', reason: 'expired' }],
      });
    } finally {
      await mcp.close();
    }
  });
});
