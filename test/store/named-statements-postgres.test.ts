import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { CursorCodec } from '../../src/events/cursor.js';
import { EventLog, type EventRecord } from '../../src/events/index.js';
import { PostgresBus } from '../../src/events/postgres-bus.js';
import { createLogger } from '../../src/logger.js';
import { openStore, type Store } from '../../src/store/index.js';
import { StatementNames } from '../../src/store/statement-names.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';

const KIND = 'named-statements';
const EVENTS = 30;

/** Every statement `pg` sends in this file, with its name when it has one (kept with the client that sent it). */
const sent: { text: string; name: string | undefined }[] = [];
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  const config = args[0] as { text?: string; name?: string } | string;
  sent.push(
    typeof config === 'string' ? { text: config, name: undefined } : { text: String(config?.text), name: config?.name },
  );
  return (query as (...a: unknown[]) => unknown).apply(this, args);
} as typeof query;
// `pg` is loaded once per worker (the suite's files share it, vitest.config.ts): the next file gets it back unwrapped.
afterAll(() => {
  pg.Client.prototype.query = query;
});

describe('which statements are named', () => {
  it('a text from its third use, with parameters, reading or writing rows; none once refused', () => {
    const names = new StatementNames();
    const insert = 'insert into events (a) values ($1)';
    expect(names.nameOf(insert, 1)).toBeUndefined();
    expect(names.nameOf(insert, 1)).toBeUndefined();
    const name = names.nameOf(insert, 1);
    expect(name).toBeDefined();
    expect(names.nameOf(insert, 1)).toBe(name);
    for (let i = 0; i < 5; i++) {
      expect(names.nameOf('select 1', 0)).toBeUndefined();
      expect(names.nameOf('begin', 0)).toBeUndefined();
      expect(names.nameOf('create table t (a int default $1)', 1)).toBeUndefined();
    }
    const other = 'select * from events where a = $1';
    for (let i = 0; i < 3; i++) names.nameOf(other, 1);
    expect(names.nameOf(other, 1)).not.toBe(name);
    expect(names.refused(Object.assign(new Error('duplicate key'), { code: '23505' }))).toBe(false);
    expect(names.nameOf(insert, 1)).toBe(name);
    expect(names.refused(Object.assign(new Error('cached plan must not change result type'), { code: '0A000' }))).toBe(
      true,
    );
    expect(names.nameOf(insert, 1)).toBeUndefined();
  });

  it('at most 128 texts are named; the others go unnamed', () => {
    const names = new StatementNames();
    const named = new Set<string>();
    for (let t = 0; t < 200; t++)
      for (let i = 0; i < 3; i++) {
        const name = names.nameOf(`select * from events where a = $1 and b = ${t}`, 1);
        if (name !== undefined) named.add(name);
      }
    expect(named.size).toBe(128);
  });
});

/**
 * STORE_PG_NAMED_STATEMENTS (docs/decisions/104): three replicas on one PostgreSQL, A appending and publishing, B and C
 * delivering, once with every replica's statements named and once with none. Both ways: the statements are the same
 * texts, each append is in the log (read by another connection) once it resolves, every event reaches B and C once and
 * in sequence order, and B and C hand out the same cursors.
 */
describe('named statements across replicas on PostgreSQL, on and off', () => {
  let server: TestPostgres;
  let dir: string;
  let url: string;
  const stores: Store[] = [];
  const buses: PostgresBus[] = [];
  const logger = createLogger({ level: 'silent' });
  const cursors = CursorCodec.random();
  let reader: pg.Pool;
  let n = 0;

  beforeAll(async () => {
    server = await startPostgres();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'named-statements-'));
    url = await server.createDatabase('named_statements');
    reader = new pg.Pool({ connectionString: url, max: 4 });
  }, 120_000);

  afterAll(async () => {
    await reader?.end();
    for (const bus of buses) await bus.close();
    for (const store of stores) await store.close();
    await server?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  const replica = async (name: string, named: boolean) => {
    const store = await openStore({
      dataDir: path.join(dir, name),
      databaseUrl: url,
      logger,
      pgNamedStatements: named,
    });
    stores.push(store);
    const log = new EventLog(store.db, 86_400_000, store.dialect, store.execute);
    const bus = await PostgresBus.start({ databaseUrl: url, db: store.db, log, logger, cursors });
    buses.push(bus);
    return { store, log, bus };
  };

  const run = async (named: boolean) => {
    const [a, b, c] = [
      await replica(`a-${String(named)}`, named),
      await replica(`b-${String(named)}`, named),
      await replica(`c-${String(named)}`, named),
    ];
    const got = { b: [] as EventRecord[], c: [] as EventRecord[] };
    b.bus.subscribe(KIND, null, (e) => got.b.push(e));
    c.bus.subscribe(KIND, null, (e) => got.c.push(e));
    const from = sent.length;
    // The appends one after another, so that their commits come in sequence order: with appends in flight together, a
    // lower number may commit after a higher one was read on B or C, and decision 061 then delivers it later there (it
    // was not acknowledged before the higher one was received), which no fixed order can expect. The publishes go
    // together, each with its own notice.
    const events: EventRecord[] = [];
    for (let k = 0; k < EVENTS; k++) {
      const i = ++n;
      const { status, event } = await a.log.append({
        kind: KIND,
        key: `k-${i}`,
        dedupeKey: `named-${i}`,
        payload: { i },
      });
      expect(status).toBe('created');
      // Durable and visible before the append resolves: another connection reads it.
      const { rows } = await reader.query('select seq from events where dedupe_key = $1', [`named-${i}`]);
      expect(rows.map((r: { seq: string }) => Number(r.seq))).toEqual([event.seq]);
      events.push(event);
    }
    await Promise.all(events.map((event) => a.bus.publish(event)));
    const seqs = events.map((e) => e.seq).sort((x, y) => x - y);
    await waitFor(() => got.b.length >= EVENTS && got.c.length >= EVENTS, 20_000, 'B and C to deliver every event');
    const statements = sent.slice(from).filter((s) => s.text.startsWith('insert into "events"'));
    return {
      seqs,
      b: got.b.map((e) => e.seq),
      c: got.c.map((e) => e.seq),
      cursors: [got.b.map((e) => e.cursor), got.c.map((e) => e.cursor)],
      inserts: statements.length,
      namedInserts: statements.filter((s) => s.name !== undefined).length,
    };
  };

  it('the same events, once each and in order on B and C, the same cursors, both ways', async () => {
    for (const named of [false, true]) {
      const r = await run(named);
      expect(r.b).toEqual(r.seqs);
      expect(r.c).toEqual(r.seqs);
      expect(r.cursors[0]).toEqual(r.cursors[1]);
      expect(r.cursors[0]!.every((cursor) => typeof cursor === 'string')).toBe(true);
      expect(r.inserts).toBe(EVENTS);
      // On: every insert but the first two of the pool goes named; off: none.
      if (named) expect(r.namedInserts).toBe(EVENTS - 2);
      else expect(r.namedInserts).toBe(0);
    }
  });

  it('a named statement whose columns a migration changed fails once; then every statement goes unnamed', async () => {
    const { store } = await replica('migrated', true);
    await sql`create table named_scratch (a int)`.execute(store.db);
    await sql`insert into named_scratch (a) values (1)`.execute(store.db);
    const read = () => sql<Record<string, unknown>>`select * from named_scratch where a = ${1}`.execute(store.db);
    for (let i = 0; i < 4; i++) expect((await read()).rows).toEqual([{ a: 1 }]);
    // What another replica's migration would do while this one runs.
    await reader.query('alter table named_scratch add column b int');
    const outcomes: string[] = [];
    for (let i = 0; i < 12; i++)
      outcomes.push(
        await read().then(
          (r) => JSON.stringify(r.rows),
          (err: { code?: string }) => `error ${err.code}`,
        ),
      );
    expect(outcomes.filter((o) => o.startsWith('error'))).toEqual(['error 0A000']);
    expect(outcomes.at(-1)).toBe(JSON.stringify([{ a: 1, b: null }]));
  });
});
