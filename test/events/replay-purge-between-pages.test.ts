// A resume replays the log after the client's cursor in pages, and the retention purge may run between two of them
// (a replica with a shorter EVENT_RETENTION, a retention changed): it raises its watermark, then deletes events the
// next page would have read. The replay read the watermark with its first page only, so such a resume went on past
// the gap in silence. Every page of a resumed replay now reads it (one row per page, never per event) and refuses
// the cursor `expired` when what it had still to read may be gone: the events of the pages read before are sent,
// none after the gap, and their cursors resume into the same refusal. The purge is run by the log's `range` before
// its second read (no timing). SQLite on disk; the replay reader itself, then a stream resumed over graphql-ws.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Position } from '../../src/events/cursor.js';
import type { EventLog } from '../../src/events/log.js';
import { replayPage, type ReplayWindow } from '../../src/events/replay.js';
import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { testClock } from '../helpers/jwt.js';
import { cursorNow, postCompletion, registerVerifications, resumeWs, type Resumed } from '../helpers/resumable.js';
import { waitFor } from '../helpers/wait.js';

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;

/**
 * `log` as the replay sees it: its `range` runs `between` once, before its second read (after the first page, before
 * the next), and its watermark's reads are counted.
 */
function purgedBetweenPages(log: EventLog, between: () => Promise<unknown>) {
  const counts = { ranges: 0, watermarks: 0 };
  // Bound now: a test may put the wrapped methods on `log` itself.
  const range = log.range.bind(log);
  const purgedThrough = log.purgedThrough.bind(log);
  const wrapped = {
    retentionMs: log.retentionMs,
    range: async (...args: Parameters<EventLog['range']>) => {
      counts.ranges += 1;
      if (counts.ranges === 2) await between();
      return range(...args);
    },
    purgedThrough: () => {
      counts.watermarks += 1;
      return purgedThrough();
    },
  } as unknown as EventLog;
  return { log: wrapped, counts };
}

describe('the replay reader checks the purge watermark on every page of a resume', () => {
  let t: TestGateway;
  let log: EventLog;
  const at = Date.now();
  const retention = 7 * 24 * HOUR_MS;
  // The numbers of three groups of events, in log order: `early` and `late` expire a minute apart, `kept` much later.
  // The tests run in order: each purge deletes a group for good.
  const early: number[] = [];
  const late: number[] = [];
  const kept: number[] = [];

  beforeAll(async () => {
    t = await startTestGateway({ EVENT_RETENTION: '7d' });
    log = t.gateway.services.events.log;
    const append = async (group: number[], name: string, count: number, now: number) => {
      for (let i = 0; i < count; i++) {
        const { event } = await log.append(
          { kind: 'verification', key: `k-${name}`, dedupeKey: `${name}-${i}`, payload: { n: i }, scope: 'app' },
          now,
        );
        group.push(event.seq);
      }
    };
    await append(early, 'early', 300, at);
    await append(late, 'late', 700, at + MINUTE_MS);
    await append(kept, 'kept', 5, at + retention / 2);
  }, 60_000);

  afterAll(() => t?.close());

  const replay = async (wrapped: EventLog, window: ReplayWindow, most: number) => {
    const cursors = t.gateway.services.events.cursors;
    return replayPage(wrapped, cursors, window, ['verification'], { scope: 'app' }, most);
  };
  const everything = () => new Position(kept[kept.length - 1]!);

  it('reads no watermark for a replay that did not start from a client’s cursor', async () => {
    const { log: wrapped, counts } = purgedBetweenPages(log, async () => undefined);
    const events = await replay(wrapped, { after: new Position(0), until: everything(), from: 0 }, 2_000);
    expect(events.map((e) => e.seq)).toEqual([...early, ...late, ...kept]);
    expect(counts).toEqual({ ranges: 3, watermarks: 0 });
  });

  it('is not refused when the purge between two pages deleted only what the replay had read', async () => {
    // Pages of 500 rows: the first reads all 300 `early` events, which the purge then deletes.
    const { log: wrapped, counts } = purgedBetweenPages(log, () => log.purgeExpired(at + retention));
    const window: ReplayWindow = { after: new Position(0), until: everything(), from: 0, cursorAt: at };
    const events = await replay(wrapped, window, 2_000);
    expect(await log.purgedThrough()).toBe(early[early.length - 1]);
    expect(events.map((e) => e.seq)).toEqual([...early, ...late, ...kept]);
    // One read of the watermark per page, none per event.
    expect(counts).toEqual({ ranges: 3, watermarks: 3 });
  });

  it('is refused expired, with none of its events, when the purge between two pages deleted what it had to read', async () => {
    // From the highest number purged so far: the first page (500 of the 700 `late` events) passes its check; the purge
    // then deletes all of `late`, and the second page would go on with `kept`, past the 200 it lost.
    const after = new Position(early[early.length - 1]!);
    const { log: wrapped, counts } = purgedBetweenPages(log, () => log.purgeExpired(at + MINUTE_MS + retention));
    const window: ReplayWindow = { after, until: everything(), from: after.floor, cursorAt: at };
    await expect(replay(wrapped, window, 1_000)).rejects.toMatchObject({
      reason: 'expired',
      message: expect.stringContaining(
        `the cursor is from ${new Date(at).toISOString()}, before events the retention purge has deleted`,
      ),
    });
    expect(await log.purgedThrough()).toBe(late[late.length - 1]);
    expect(counts).toEqual({ ranges: 2, watermarks: 2 });
  });
});

describe('a stream resumed over graphql-ws while the purge deletes events it has still to replay', () => {
  const KEY = 'key-replay-pages-0123456789abc';
  const clock = testClock();
  const dataDir = tempDataDir('replay-pages-');
  let t: TestGateway | undefined;
  /** Taken before every event: the stream replays 210 events that expire after an hour, then 3 that expire later. */
  let before: string;

  const start = (retention: string) =>
    startTestGateway(
      {
        DATA_DIR: dataDir,
        GATEWAY_API_KEYS: `pages:${KEY}`,
        EVENT_RETENTION: retention,
        SANDBOX_CALLBACK_DELAY_MS: '600000',
        RATE_LIMIT_READS: '1000/1h',
      },
      // The jobs are not scheduled: the purge runs where the test runs it.
      { testing: { clock: clock.now, scheduleJob: () => () => undefined } },
    );

  beforeAll(async () => {
    t = await start('1h');
    const [id, url] = [...(await registerVerifications(t, t.gateway.sandbox.verification!, KEY, 1))][0]!;
    before = cursorNow(t);
    // More than a replay page (200 events) under a retention of an hour, then three 30 minutes later.
    for (let i = 0; i < 210; i++) await postCompletion(url, id, `a${i}`);
    clock.advance(30 * MINUTE_MS);
    for (let i = 0; i < 3; i++) await postCompletion(url, id, `b${i}`);
    await t.close();
    // Past the first events' hour, the operator raises the retention: `before` is young enough for it.
    clock.advance(31 * MINUTE_MS);
    t = await start('7d');
  }, 120_000);

  afterAll(() => t?.close());

  it('sends the first page, then the refusal, and nothing past the gap; the last cursor sent is refused too', async () => {
    const log = t!.gateway.services.events.log;
    const { range, purgedThrough } = log;
    const { log: wrapped, counts } = purgedBetweenPages(log, () => log.purgeExpired(clock.now()));
    log.range = wrapped.range;
    log.purgedThrough = wrapped.purgedThrough;
    let sub: Resumed;
    try {
      const resumed = await resumeWs(t!, KEY, before);
      await waitFor(
        () => resumed.errors.length > 0 || resumed.events.some((e) => e.n === 'b2'),
        20_000,
        'the refusal, or the events past the gap',
      );
      await resumed.close();
      sub = resumed;
    } finally {
      log.range = range;
      log.purgedThrough = purgedThrough;
    }
    expect(sub.events.map((e) => e.n)).toEqual(Array.from({ length: 200 }, (_, i) => `a${i}`));
    expect(sub.errors).toHaveLength(1);
    expect(sub.errors[0]).toMatchObject({
      message: expect.stringMatching(/^after: .*retention purge has deleted/),
      extensions: { code: 'BAD_USER_INPUT', field: 'after', reason: 'expired' },
    });
    // One read of the watermark per page of the replay.
    expect(counts).toEqual({ ranges: 2, watermarks: 2 });

    // The client's last cursor lies before the purged events it never got: refused the same way, nothing sent.
    const again = await resumeWs(t!, KEY, sub.events[sub.events.length - 1]!.cursor);
    await waitFor(() => again.errors.length > 0 || again.events.length > 0, 20_000, 'the refusal');
    await again.close();
    expect(again.events).toEqual([]);
    expect(again.errors[0]).toMatchObject({
      extensions: { code: 'BAD_USER_INPUT', field: 'after', reason: 'expired' },
    });
  });
});
