// The event log's append and its newest-event reads run on every notification and every subscribe. On SQLite neither
// may make a temporary b-tree (docs/decisions/117: RETURNING made and dropped one per append, ~10 µs, and ORDER BY …
// LIMIT 1 one per read, ~1–2 µs), and the reads must answer as `ORDER BY seq DESC LIMIT 1`, the form they replaced,
// does: over keys with several events, in several owner scopes and none, for every kind of reader.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { CompiledQuery } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ownerCaller, scopeOfApp, type Caller } from '../../src/auth/caller.js';
import { EventLog, type EventRecord } from '../../src/events/index.js';
import { createLogger } from '../../src/logger.js';
import { openStore, type Store } from '../../src/store/index.js';

const KIND = 'mobile-id';
const A = scopeOfApp('a');
const B = scopeOfApp('b');

describe('the event log on SQLite: the append and the newest-event reads', () => {
  let dir: string;
  let store: Store;
  let log: EventLog;
  /** Every statement the log ran, as compiled. */
  const ran: CompiledQuery[] = [];
  let day = 0;

  const append = (key: string, dedupeKey: string, scope: string | null, payload: unknown = { key, dedupeKey }) =>
    log.append({ kind: KIND, key, dedupeKey, payload, scope }, Date.UTC(2026, 0, 1) + day++ * 1000);

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'log-statements-'));
    store = await openStore({ dataDir: dir, logger: createLogger({ level: 'silent' }) });
    log = new EventLog(store.db, 86_400_000, store.dialect, (query) => {
      ran.push(query);
      return store.execute(query);
    });
    // Keys with none, one and several events, in the shared scope (null) and two owners', the owners' interleaved.
    const scopes = [null, A, B, A, null, B, B];
    for (let k = 0; k < 6; k++)
      for (let i = 0; i < k; i++) await append(`key-${k}`, `key-${k}:${i}`, scopes[(i + k) % scopes.length]!);
    await append('lone-key', 'x', null);
    // The newest row of key-3 is another kind's: each read must pass over it.
    await log.append({ kind: 'identification', key: 'key-3', dedupeKey: 'other-kind', payload: {}, scope: null });
  });
  afterAll(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('makes no temporary b-tree for the append or either newest-event read', async () => {
    ran.length = 0;
    await append('fresh', 'fresh:1', A);
    await log.latest(KIND, 'key-3');
    await log.latest(KIND, 'key-3', ownerCaller(A));
    expect(ran).toHaveLength(3);
    for (const query of ran) {
      const { rows } = await store.db.executeQuery<{ opcode: string }>({ ...query, sql: `EXPLAIN ${query.sql}` });
      expect(rows.length, query.sql).toBeGreaterThan(0);
      expect(
        rows.filter((r) => /Ephemeral|Sorter/.test(r.opcode)).map((r) => r.opcode),
        query.sql,
      ).toEqual([]);
    }
  });

  it('answers the newest event as ORDER BY seq DESC LIMIT 1 does, for every key and reader', async () => {
    const readers: (Caller | undefined)[] = [undefined, ownerCaller(A), ownerCaller(B), ownerCaller(scopeOfApp('c'))];
    const keys = ['key-0', 'key-1', 'key-2', 'key-3', 'key-4', 'key-5', 'lone-key', 'nowhere'];
    let found = 0;
    for (const key of keys)
      for (const reader of readers) {
        let q = store.db.selectFrom('events').select('seq').where('kind', '=', KIND).where('key', '=', key);
        if (reader) q = q.where((eb) => eb.or([eb('scope', '=', reader.scope), eb('scope', 'is', null)]));
        const expected = await q.orderBy('seq', 'desc').limit(1).executeTakeFirst();
        const got = await log.latest(KIND, key, reader);
        expect(got?.seq ?? null, `${key} for ${reader?.scope ?? 'anyone'}`).toBe(
          expected ? Number(expected.seq) : null,
        );
        if (got) {
          found++;
          expect(got.key).toBe(key);
          expect(got.kind).toBe(KIND);
          expect(reader === undefined || got.scope === null || got.scope === reader.scope).toBe(true);
        }
      }
    // Not vacuous: most pairs found an event, and the readers' answers differ for the keys with several scopes.
    expect(found).toBeGreaterThan(20);
    expect((await log.latest(KIND, 'key-5', ownerCaller(A)))?.seq).not.toBe(
      (await log.latest(KIND, 'key-5', ownerCaller(B)))?.seq,
    );
  });

  it('gives a created event the seq of its stored row, and a repeat the first one', async () => {
    const first = await append('seq-key', 'seq-key:1', B, { n: 1 });
    expect(first.status).toBe('created');
    const stored = await store.db
      .selectFrom('events')
      .select(['seq', 'dedupe_key'])
      .where('dedupe_key', '=', 'seq-key:1')
      .executeTakeFirstOrThrow();
    expect(first.event.seq).toBe(Number(stored.seq));
    const highest = await store.db
      .selectFrom('events')
      .select((eb) => eb.fn.max('seq').as('seq'))
      .executeTakeFirstOrThrow();
    expect(first.event.seq).toBe(Number(highest.seq));

    const again: { status: string; event: EventRecord } = await append('seq-key', 'seq-key:1', B, { n: 1 });
    expect(again).toMatchObject({ status: 'duplicate', event: { seq: first.event.seq } });
    const other = await append('seq-key', 'seq-key:1', B, { n: 2 });
    expect(other).toMatchObject({ status: 'conflict', event: { seq: first.event.seq } });

    // The next insert after a repeat gets its own row's seq, not the one before the repeat.
    const second = await append('seq-key', 'seq-key:2', null, { n: 3 });
    expect(second.status).toBe('created');
    expect(second.event.seq).toBeGreaterThan(first.event.seq);
    expect((await log.latest(KIND, 'seq-key'))?.seq).toBe(second.event.seq);
  });
});
