// A stream whose events may be kept under another spelling of the key its subscriber names (StreamOptions.keyOf:
// a verification an earlier release recorded under a UUID in capitals) finds the key in its first read, moves its live
// listener there before it reads the log under it, and delivers each of that key's events once: stored, replayed or
// live. Nothing of the key as named is delivered once another key is found.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';

import type { EventRecord } from '../../src/events/log.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { cursorNow } from '../helpers/resumable.js';
import { subscribers, waitFor } from '../helpers/wait.js';

const KIND = 'key-found-test';

describe('a stream that finds the key its events are kept under', () => {
  let t: TestGateway;
  let n = 0;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });
  afterAll(() => t?.close());

  const events = () => t.gateway.services.events;
  /** Appends an event of `key`, and publishes it unless told not to: what its seq is, to compare with. */
  async function add(key: string, publish = true): Promise<EventRecord> {
    const r = await events().ingest({ kind: KIND, key, dedupeKey: `kf-${++n}`, payload: { n }, scope: 'kf-app' });
    if (publish) await r.publish();
    return r.event;
  }
  /** A promise the test settles. */
  function gate<T>() {
    let open!: (value: T) => void;
    const promise = new Promise<T>((resolve) => (open = resolve));
    return { promise, open };
  }

  it('reads the stored event under the key found, then follows that key live, and not the key as named', async () => {
    await add('Stored-1');
    const named = await add('stored-1');
    const asked = gate<string | null>();
    const stream = events().streams.subscribe({ kind: KIND, key: 'stored-1', keyOf: () => asked.promise });
    const first = stream.next();
    await waitFor(() => subscribers(t, KIND, 'stored-1') === 1, 20_000, 'the listener on the key as named');
    // Kept while the key is looked for: no listener holds that key yet, the log does.
    const newest = await add('Stored-1');
    asked.open('Stored-1');
    expect((await first).value).toMatchObject({ seq: newest.seq, key: 'Stored-1' });
    expect(subscribers(t, KIND, 'stored-1')).toBe(0);
    expect(subscribers(t, KIND, 'Stored-1')).toBe(1);

    const second = stream.next();
    await add('stored-1');
    const live = await add('Stored-1');
    expect((await second).value).toMatchObject({ seq: live.seq, key: 'Stored-1' });
    expect(named.seq).toBeLessThan(live.seq);
    await stream.return(undefined);
    expect(subscribers(t, KIND, 'Stored-1')).toBe(0);
  });

  it('listens under the key found before it reads the log there: an event during that read comes once, none is lost', async () => {
    const log = events().log;
    const latest = log.latest.bind(log);
    let during: EventRecord | null = null;
    let after: EventRecord | null = null;
    vi.spyOn(log, 'latest').mockImplementation(async (kind, key, reader) => {
      if (key !== 'During-1') return latest(kind, key, reader);
      // One event is kept and published as the read starts (it is both in the log and live), one as it ends.
      during = await add('During-1');
      const stored = await latest(kind, key, reader);
      after = await add('During-1');
      return stored;
    });
    const stream = events().streams.subscribe({ kind: KIND, key: 'during-1', keyOf: async () => 'During-1' });
    const got: number[] = [];
    for (let i = 0; i < 2; i++) got.push((await stream.next()).value.seq);
    expect(got).toEqual([during!.seq, after!.seq]);
    vi.restoreAllMocks();
    const third = stream.next();
    const next = await add('During-1');
    expect((await third).value.seq).toBe(next.seq);
    await stream.return(undefined);
  });

  it('keeps the key as named when it finds none, or that one', async () => {
    for (const found of [null, 'same-1']) {
      const stored = await add('same-1');
      const stream = events().streams.subscribe({ kind: KIND, key: 'same-1', keyOf: async () => found });
      expect((await stream.next()).value.seq).toBe(stored.seq);
      expect(subscribers(t, KIND, 'same-1')).toBe(1);
      const live = stream.next();
      const next = await add('same-1');
      expect((await live).value.seq).toBe(next.seq);
      await stream.return(undefined);
    }
  });

  it('resumed, replays what is outside the cursor under the key found, then follows it live', async () => {
    await add('Resumed-1');
    // What a subscriber that got that event holds.
    const cursor = cursorNow(t);
    const outside = await add('Resumed-1');
    await add('resumed-1');
    const asked = gate<string | null>();
    const stream = events().streams.subscribe({
      kind: KIND,
      key: 'resumed-1',
      keyOf: () => asked.promise,
      ...events().resume(cursor),
    });
    const first = stream.next();
    await waitFor(() => subscribers(t, KIND, 'resumed-1') === 1, 20_000, 'the listener on the key as named');
    // Published while the key is looked for, when only the key as named is listened to: it is not live for this
    // stream, so the replay, which reads up to the bus's position taken once the listener has moved, reads it.
    const meanwhile = await add('Resumed-1');
    asked.open('Resumed-1');
    expect((await first).value.seq).toBe(outside.seq);
    expect((await stream.next()).value.seq).toBe(meanwhile.seq);
    expect(subscribers(t, KIND, 'resumed-1')).toBe(0);
    const third = stream.next();
    await add('resumed-1');
    const live = await add('Resumed-1');
    expect((await third).value.seq).toBe(live.seq);
    await stream.return(undefined);
  });

  it('waits out a database that is away while it looks for the key, and ends with any other failure of the look-up', async () => {
    const stored = await add('Away-1');
    let tries = 0;
    const away = events().streams.subscribe({
      kind: KIND,
      key: 'away-1',
      keyOf: async () => {
        if (++tries === 1) throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
        return 'Away-1';
      },
    });
    expect((await away.next()).value.seq).toBe(stored.seq);
    expect(tries).toBe(2);
    await away.return(undefined);

    const failing = events().streams.subscribe({
      kind: KIND,
      key: 'broken-1',
      keyOf: async () => {
        throw new Error('not a database outage');
      },
    });
    await expect(failing.next()).rejects.toThrow('not a database outage');
    expect(subscribers(t, KIND, 'broken-1')).toBe(0);
    expect(await failing.next()).toEqual({ done: true, value: undefined });
  });
});
