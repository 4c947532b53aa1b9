import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { CursorCodec } from '../../src/events/cursor.js';
import { EventLog, type EventRecord } from '../../src/events/index.js';
import { PostgresBus } from '../../src/events/postgres-bus.js';
import { createLogger } from '../../src/logger.js';
import { openStore, type Store } from '../../src/store/index.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';

const KIND = 'grouped-probes';

/**
 * A replica that publishes its own events while lower numbers are not delivered there checks the log below each
 * before delivering it (the order probe, docs/decisions/061). With EVENT_ORDER_PROBE_GROUPED the publishes waiting for
 * a probe share one (docs/decisions/086). On or off: an event of another replica committed below them, whose notice has
 * not come, reaches the publishing replica's subscribers before every event above it, and each replica delivers every
 * event once, in sequence order.
 */
describe('grouped order probes across replicas on PostgreSQL', () => {
  let server: TestPostgres;
  let dir: string;
  let url: string;
  const stores: Store[] = [];
  const buses: PostgresBus[] = [];
  let receiver: PostgresBus;
  const received: number[] = [];
  const logger = createLogger({ level: 'silent' });
  let n = 0;

  const replica = async (name: string, groupProbes: boolean) => {
    const store = await openStore({ dataDir: path.join(dir, name), databaseUrl: url, logger });
    stores.push(store);
    const log = new EventLog(store.db, 86_400_000, store.dialect);
    // Each call of a probe with at least one stretch runs one statement (src/events/log.ts): count them.
    const probes = { count: 0 };
    const lowestIn = log.lowestIn.bind(log);
    log.lowestIn = (stretches) => (stretches.length > 0 && probes.count++, lowestIn(stretches));
    const bus = await PostgresBus.start({
      databaseUrl: url,
      db: store.db,
      log,
      logger,
      cursors: CursorCodec.random(),
      groupProbes,
    });
    buses.push(bus);
    return { log, bus, probes };
  };

  const append = async (log: EventLog): Promise<EventRecord> => {
    n += 1;
    const result = await log.append({ kind: KIND, key: `k-${n}`, dedupeKey: `probes-${n}`, payload: { n } });
    return result.event;
  };

  beforeAll(async () => {
    server = await startPostgres();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'grouped-probes-'));
    url = await server.createDatabase('grouped_probes');
    ({ bus: receiver } = await replica('receiver', true));
    receiver.subscribe(KIND, null, (e) => received.push(e.seq));
  }, 120_000);

  afterAll(async () => {
    for (const bus of buses) await bus.close();
    for (const store of stores) await store.close();
    await server?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Replica A appends e1..e3, replica C appends x, A appends e4..e6; A publishes its six events at once, the highest
   * first (so that every one but e1 finds a lower number not delivered), and only then does C publish x (its notice
   * was on its way). x may have been acknowledged before e4 was received: A must deliver it before e4, e5 and e6.
   */
  const run = async (groupProbes: boolean) => {
    const a = await replica(`a-${String(groupProbes)}`, groupProbes);
    const c = await replica(`c-${String(groupProbes)}`, groupProbes);
    const atA: number[] = [];
    const stop = a.bus.subscribe(KIND, null, (e) => atA.push(e.seq));
    const own: EventRecord[] = [];
    for (let i = 0; i < 3; i++) own.push(await append(a.log));
    const x = await append(c.log);
    for (let i = 0; i < 3; i++) own.push(await append(a.log));
    await Promise.all([...own].reverse().map((e) => a.bus.publish(e)));
    await c.bus.publish(x);
    const seqs = [...own, x].map((e) => e.seq).sort((p, q) => p - q);
    await waitFor(() => seqs.every((s) => atA.includes(s)), 20_000, 'replica A to deliver every event');
    await waitFor(() => seqs.every((s) => received.includes(s)), 20_000, 'the other replica to deliver every event');
    await waitFor(() => a.bus.unreadOwnEvents === 0, 20_000, "replica A to read back its own events' notices");
    stop();
    return { x: x.seq, seqs, atA, probes: a.probes.count };
  };

  it('one probe per waiting event when off, one for the group when on; x before the events above it, each once', async () => {
    const off = await run(false);
    const on = await run(true);
    // Off: e2..e6 each probe the log. On: they wait together for one probe, which finds x.
    expect(off.probes).toBe(5);
    expect(on.probes).toBe(1);
    for (const { seqs, atA, x } of [off, on]) {
      expect(atA).toEqual(seqs);
      expect(atA.indexOf(x)).toBe(3);
    }
    expect(received).toEqual([...off.seqs, ...on.seqs]);
  });

  it('a group of its own events with nothing else below them needs no probe when on', async () => {
    const counts: number[] = [];
    for (const groupProbes of [false, true]) {
      const a = await replica(`own-${String(groupProbes)}`, groupProbes);
      const atA: number[] = [];
      const stop = a.bus.subscribe(KIND, null, (e) => atA.push(e.seq));
      const own: EventRecord[] = [];
      for (let i = 0; i < 10; i++) own.push(await append(a.log));
      const before = received.length;
      await Promise.all([...own].reverse().map((e) => a.bus.publish(e)));
      const seqs = own.map((e) => e.seq);
      await waitFor(() => seqs.every((s) => atA.includes(s)), 20_000, 'replica A to deliver every event');
      await waitFor(() => seqs.every((s) => received.includes(s)), 20_000, 'the other replica to deliver every event');
      await waitFor(() => a.bus.unreadOwnEvents === 0, 20_000, "replica A to read back its own events' notices");
      stop();
      expect(atA).toEqual(seqs);
      expect(received.slice(before)).toEqual(seqs);
      counts.push(a.probes.count);
    }
    // Off: e2..e10 each probe (each finds the one below it and waits for a catch-up). On: the only numbers below the
    // group not delivered are the group's own, so there is nothing to ask.
    expect(counts).toEqual([9, 0]);
  });
});
