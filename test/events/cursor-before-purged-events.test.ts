// An event is purged by the expiry stamped on it when it was stored, under the EVENT_RETENTION of that time; a cursor
// is dated. Once the operator raises EVENT_RETENTION, a cursor young enough for the new retention may still lie
// before events purged under the old one: it is refused `expired`, as an old cursor is, over graphql-ws and MCP
// wait_for_events, never accepted with a silent gap. A cursor at or past what the purge deleted still resumes with
// nothing missed. SQLite on disk, the gateway restarted on the same DATA_DIR, the testing clock, the purge run by hand.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { VERIFICATION_EVENT_KIND } from '../../src/identity/service.js';
import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { testClock } from '../helpers/jwt.js';
import { mcpClient } from '../helpers/mcp.js';
import { cursorNow, postCompletion, registerVerifications, resumeWs } from '../helpers/resumable.js';
import { waitFor, waitForSubscribers } from '../helpers/wait.js';

const KEY = 'key-purge-watermark-0123456789';
const HOUR_MS = 3_600_000;

describe('a cursor before events the retention purge deleted, after EVENT_RETENTION was raised', () => {
  const clock = testClock();
  const dataDir = tempDataDir('purge-watermark-');
  const runs = new Map<string, () => void>();
  let t: TestGateway | undefined;
  /** Taken before the two purged events. */
  let before: string;
  /** The cursor of the second purged event: every number up to the highest one purged. */
  let atPurged: string;
  let upgraded: { id: string; url: string };

  const start = (retention: string) =>
    startTestGateway(
      { DATA_DIR: dataDir, GATEWAY_API_KEYS: KEY, EVENT_RETENTION: retention, SANDBOX_CALLBACK_DELAY_MS: '600000' },
      {
        testing: {
          clock: clock.now,
          scheduleJob: (name, run) => {
            runs.set(name, run);
            return () => undefined;
          },
        },
      },
    );

  const stored = async (gw: TestGateway) =>
    Number(
      (
        await gw.gateway.services.store.db
          .selectFrom('events')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('kind', '=', VERIFICATION_EVENT_KIND)
          .executeTakeFirstOrThrow()
      ).n,
    );

  beforeAll(async () => {
    t = await start('1h');
    const [id, url] = [...(await registerVerifications(t, t.gateway.sandbox.verification!, KEY, 1))][0]!;
    before = cursorNow(t);
    const live = await resumeWs(t, KEY, null);
    await waitForSubscribers(t, VERIFICATION_EVENT_KIND);
    await postCompletion(url, id, 'p1');
    await postCompletion(url, id, 'p2');
    await waitFor(() => live.events.length === 2, 20_000, 'the two events, live');
    atPurged = live.events[1]!.cursor;
    await live.close();

    // An hour and a minute later, the purge (run by hand) deletes both under the retention they were stored with.
    clock.advance(HOUR_MS + 60_000);
    runs.get('purge expired events')!();
    const first = t;
    await waitFor(async () => (await stored(first)) === 0, 20_000, 'both events purged');
    await t.close();

    // The operator raises the retention: both cursors are young enough for it.
    t = await start('7d');
    // The callback address names the first gateway's port; the path is what identifies it.
    upgraded = { id, url: `${t.url}${new URL(url).pathname}` };
    await postCompletion(upgraded.url, id, 'p3');
  }, 60_000);

  afterAll(() => t?.close());

  it('is refused as expired over graphql-ws', async () => {
    const sub = await resumeWs(t!, KEY, before);
    await waitFor(() => sub.errors.length > 0 || sub.events.length > 0, 20_000, 'the refusal or a replay');
    await sub.close();
    expect(sub.events.map((e) => e.n)).toEqual([]);
    expect(sub.errors[0]).toMatchObject({
      extensions: { code: 'BAD_USER_INPUT', field: 'after', reason: 'expired', retentionMs: 7 * 24 * HOUR_MS },
    });
    expect(sub.errors[0].message).toContain('retention purge has deleted');
  });

  it('is refused as expired by MCP wait_for_events', async () => {
    const mcp = await mcpClient(t!, { key: KEY });
    try {
      const result = await mcp.call('wait_for_events', { cursor: before, timeoutSeconds: 0 });
      expect(result.structuredContent).toMatchObject({
        errors: [{ code: 'BAD_USER_INPUT', argument: 'cursor', reason: 'expired' }],
      });
      expect(result.isError).toBe(true);
    } finally {
      await mcp.close();
    }
  });

  it('resumes from the cursor of the last purged event with nothing missed, replayed then live', async () => {
    const sub = await resumeWs(t!, KEY, atPurged);
    await waitFor(() => sub.events.length === 1 || sub.errors.length > 0, 20_000, 'the replay after the cursor');
    await postCompletion(upgraded.url, upgraded.id, 'p4');
    await waitFor(() => sub.events.length === 2 || sub.errors.length > 0, 20_000, 'the live event');
    await sub.close();
    expect(sub.errors).toEqual([]);
    expect(sub.events.map((e) => e.n)).toEqual(['p3', 'p4']);
  });

  it('reads after the cursor of the last purged event over MCP wait_for_events', async () => {
    const mcp = await mcpClient(t!, { key: KEY });
    try {
      const result = await mcp.call('wait_for_events', { cursor: atPurged, timeoutSeconds: 0 });
      expect(result.isError).toBeFalsy();
      expect((result.structuredContent as { events: unknown[] }).events).toHaveLength(2);
    } finally {
      await mcp.close();
    }
  });
});
