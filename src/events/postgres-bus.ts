import { setTimeout as sleep } from 'node:timers/promises';
import { sql, type Kysely } from 'kysely';
import type pg from 'pg';

import type { Logger } from '../logger.js';
import type { Database } from '../store/schema.js';
import { InProcessBus, type EventBus, type EventListener } from './bus.js';
import type { CursorCodec, Position } from './cursor.js';
import type { EventLog, EventRecord } from './log.js';

const CHANNEL = 'gateway_events';
/** Events read from the log per query while catching up. */
const BATCH = 500;
/**
 * How long a sequence number below the highest one read is looked for again. bigserial hands out numbers before
 * the insert commits, so a number can appear after higher ones (two webhooks committing in the other order);
 * a number that never appears was burnt (a rolled-back insert, or two overlapping first deliveries of one
 * notification: a duplicate that comes after the first committed takes no number, src/events/log.ts).
 */
const GAP_WAIT_MS = 60_000;
/**
 * At most this many stretches of missing numbers are looked for again at once, the oldest given up first. A
 * stretch is one range however many numbers it spans, and each lies between two events that were read: a pass
 * costs one probe per stretch, never one per number (docs/decisions/054).
 */
const MAX_GAP_STRETCHES = 1000;
/**
 * The LISTEN connection is probed this often, and a probe unanswered for as long counts as a dropped connection:
 * a killed backend closes the socket at once, but a peer that vanished (network partition, failover) would
 * otherwise go unnoticed until TCP gives up, minutes later.
 */
const PROBE_MS = 10_000;

interface Notice {
  seq: number;
}

/** Numbers `from`..`to` (both included) below the highest one read and not read yet, missed first at `since`. */
interface Gap {
  from: number;
  to: number;
  since: number;
}

export interface PostgresBusOptions {
  databaseUrl: string;
  db: Kysely<Database>;
  log: EventLog;
  logger: Logger;
  /** What seals each event's cursor: the gateway's, so that every replica reads the others' cursors. */
  cursors: CursorCodec;
  /**
   * True: the NOTIFYs of events published while another NOTIFY is being sent go out together, in one statement and
   * one transaction (one commit, one turn of PostgreSQL's NOTIFY lock) once it is done; each is still its own notice.
   * False: one statement and one transaction per event (the off switch, EVENT_NOTIFY_GROUPED).
   */
  groupNotices?: boolean;
  /**
   * True: the order probes of events published while another probe is in flight go out together once it is done, as
   * one probe below the highest of them that skips their own numbers; each event below the lowest number it finds is
   * delivered here at once, in sequence order, the others wait for a catch-up. False: one probe per event that needs
   * one (the off switch, EVENT_ORDER_PROBE_GROUPED).
   */
  groupProbes?: boolean;
}

/** A publish waiting for the order probe of its group: true once it needs no catch-up (delivered or read back). */
interface ProbeWaiter {
  event: EventRecord;
  resolve: (first: boolean) => void;
  reject: (err: unknown) => void;
}

/** `stretches` (ascending, disjoint) without the numbers `skip` (ascending). */
function without(stretches: readonly [number, number][], skip: readonly number[]): [number, number][] {
  const out: [number, number][] = [];
  let k = 0;
  for (const [start, to] of stretches) {
    let from = start;
    while (k < skip.length && skip[k]! < from) k++;
    while (k < skip.length && skip[k]! <= to) {
      if (skip[k]! > from) out.push([from, skip[k]! - 1]);
      from = skip[k]! + 1;
      k++;
    }
    if (from <= to) out.push([from, to]);
  }
  return out;
}

/**
 * Events across replicas: each replica delivers to its own subscribers at once and sends a NOTIFY with the
 * event's sequence number; the other replicas LISTEN, read the events they have not delivered from the shared log
 * by sequence, and deliver them. The NOTIFY only wakes them: a replica that was not listening (its connection
 * dropped, PostgreSQL restarted) reads everything after the highest sequence it delivered once it listens again,
 * so no acknowledged event is lost and none is delivered twice. The payload stays tiny (NOTIFY is limited to
 * 8000 bytes) and secrets never travel in it.
 */
export class PostgresBus implements EventBus {
  private readonly local: InProcessBus;
  private client: pg.Client | null = null;
  /** The highest sequence read from the log (or published here). */
  private high = 0;
  /** Stretches of numbers below `high` not read yet, ascending and disjoint (each new one lies above the others). */
  private gaps: Gap[] = [];
  /**
   * Events published here, delivered locally already: skipped when read back from the log. An entry goes when its
   * notice or the log brings it back, or with its gap (GAP_WAIT_MS); an event read back before it was published
   * (another notice's catch-up got there first) never enters.
   */
  private readonly own = new Set<number>();
  private closed = false;
  private reconnecting = false;
  private passPending = false;
  private delivering: Promise<void> = Promise.resolve();
  /** Notices waiting for the NOTIFY in flight to finish, and the statement that will send them. */
  private queuedNotices: string[] = [];
  private nextNotify: Promise<void> | null = null;
  private notifying: Promise<void> = Promise.resolve();
  /** Publishes waiting for the order probe in flight to finish, and whether the probe that will answer them is set. */
  private queuedProbes: ProbeWaiter[] = [];
  private probeSet = false;
  private probing: Promise<void> = Promise.resolve();
  private readonly probe: NodeJS.Timeout;

  private constructor(private readonly options: PostgresBusOptions) {
    this.local = new InProcessBus(0, options.cursors);
    this.probe = setInterval(() => this.checkConnection(), PROBE_MS);
    this.probe.unref();
  }

  static async start(options: PostgresBusOptions): Promise<PostgresBus> {
    const bus = new PostgresBus(options);
    // A number missing between the newest events may be held by an insert of another replica that has not committed
    // yet: it is looked for as any other gap, and not counted delivered, so that its event comes here once committed.
    const newest = await options.log.newestSeqs(BATCH);
    // The numbers the retention purge deleted count as delivered: the log may hold none of them (emptied by the purge
    // before this start), and a cursor whose floor lay below the purge's watermark would be refused `expired`.
    const purged = await options.log.purgedThrough();
    const now = Date.now();
    let floor = Math.max(newest[0] ?? 0, purged);
    for (let i = 1; i < newest.length; i++) {
      const from = Math.max(newest[i - 1]! + 1, floor + 1);
      if (newest[i]! > from) bus.gaps.push({ from, to: newest[i]! - 1, since: now });
    }
    bus.high = Math.max(newest.at(-1) ?? 0, floor);
    if (bus.gaps.length > MAX_GAP_STRETCHES) bus.gaps.splice(0, bus.gaps.length - MAX_GAP_STRETCHES);
    if (bus.gaps.length > 0) floor = bus.gaps[0]!.from - 1;
    bus.local.startAt(
      floor,
      newest.filter((seq) => seq > floor),
    );
    try {
      await bus.listen();
    } catch (err) {
      clearInterval(bus.probe);
      throw err;
    }
    return bus;
  }

  /** Null while this replica receives the other replicas' events; otherwise why not (for /readyz). */
  notReady(): string | null {
    return this.client === null && !this.closed
      ? 'not listening for the events of other replicas (reconnecting to PostgreSQL)'
      : null;
  }

  private async listen(): Promise<void> {
    const { default: pgModule } = await import('pg');
    const client = new pgModule.Client({
      connectionString: this.options.databaseUrl,
      application_name: 'gateway-events',
      keepAlive: true,
      query_timeout: PROBE_MS,
      // A connection attempt the network swallows (a partition: accepted, never answered) fails as an unanswered probe
      // does, and the next attempt is made; without a bound it would wait for good, and this replica never listen again.
      connectionTimeoutMillis: PROBE_MS,
    });
    client.on('notification', (msg) => {
      if (msg.channel !== CHANNEL || !msg.payload) return;
      let notice: Notice;
      try {
        notice = JSON.parse(msg.payload) as Notice;
      } catch {
        return;
      }
      const seq = Number(notice.seq);
      if (this.own.has(seq)) {
        // Ours, and nothing can lie between it and what was read: no need to read the log.
        this.enqueue(async () => {
          if (this.high === seq - 1 && this.own.delete(seq)) this.high = seq;
          else await this.catchUp();
        });
      } else if (seq > this.high || this.gapIndex(seq) !== -1) {
        this.scheduleCatchUp();
      }
      // Otherwise it was read already (published here through a catch-up, or read after a later notice).
    });
    client.on('error', (err) => this.dropped(client, err.message));
    client.on('end', () => this.dropped(client, 'the connection ended'));
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
    } catch (err) {
      client.removeAllListeners('end');
      client.removeAllListeners('error');
      client.on('error', () => undefined);
      void client.end().catch(() => undefined);
      throw err;
    }
    this.client = client;
  }

  private checkConnection(): void {
    const client = this.client;
    if (!client) return;
    client.query('select 1').then(
      // A notice can be missing while this connection is fine: the replica that stored an event stopped after its
      // commit and before its NOTIFY (a crash, a stall, its own connection lost), and the sender's retry, taken by
      // another replica as a duplicate, publishes nothing. A pass after each probe reads such an event from the log,
      // at most PROBE_MS late; with nothing new it is one indexed read that returns no row.
      () => {
        if (this.client === client) this.scheduleCatchUp();
      },
      (err: unknown) => this.dropped(client, `the connection did not answer a probe: ${(err as Error).message}`),
    );
  }

  private dropped(client: pg.Client, why: string): void {
    if (this.closed || this.client !== client) return;
    this.client = null;
    this.options.logger.warn(
      { err: { message: why } },
      'the event LISTEN connection dropped: not ready until it is back; reconnecting',
    );
    void client.end().catch(() => undefined);
    void this.reconnect();
  }

  private async reconnect(): Promise<void> {
    if (this.reconnecting) return;
    this.reconnecting = true;
    try {
      for (let attempt = 1; !this.closed; attempt++) {
        await sleep(Math.min(5_000, 100 * 2 ** attempt));
        if (this.closed) return;
        try {
          await this.listen();
          this.options.logger.info({ attempt }, 'the event LISTEN connection is back: catching up from the event log');
          // Events appended while we were not listening.
          this.scheduleCatchUp();
          return;
        } catch (err) {
          this.options.logger.warn(
            { err: { message: (err as Error).message }, attempt },
            'reconnecting the event LISTEN connection failed',
          );
        }
      }
    } finally {
      this.reconnecting = false;
    }
  }

  /** Deliveries run one after another, in sequence order. */
  private enqueue(task: () => Promise<void>): void {
    this.delivering = this.delivering.then(task).catch((err: unknown) => {
      this.options.logger.error({ err }, 'delivering a replicated event failed');
      // What was not read is read by the next pass; make sure there is one.
      // (While not listening, the reconnect starts it.)
      setTimeout(() => this.client !== null && this.scheduleCatchUp(), 1_000).unref();
    });
  }

  /** One pass reads whatever every notice received before it started announced. */
  private scheduleCatchUp(): void {
    if (this.passPending) return;
    this.passPending = true;
    this.enqueue(() => {
      this.passPending = false;
      return this.catchUp();
    });
  }

  /**
   * Delivers every event after the highest one read, and those that filled a gap since, in sequence order.
   *
   * The order is what the gateway promises across replicas (docs/decisions/061): an event acknowledged before another
   * was received is delivered before it, on every replica. Such an event committed before the other was inserted, so
   * it has the lower number, and every read that sees the later one sees it too. Each batch read after `high` is
   * therefore merged, by number, with the gap fillers read just after it (a later snapshot, which sees every gap
   * filler the first read would have): one that fills a gap below an event of the batch is delivered before it.
   * A number that appears only in a later read was not committed when the batch was read, so nothing of the batch
   * was acknowledged after it: delivering it later keeps the promise.
   */
  private async catchUp(): Promise<void> {
    for (;;) {
      const events = await this.options.log.after(this.high, BATCH);
      // Until the batch is delivered, a failed read (the database went away) leaves `high` and the stretches as they
      // were: the next pass reads the batch again, rather than start after events it never delivered.
      const before = { high: this.high, gaps: this.gaps.slice() };
      const now = Date.now();
      for (const event of events) {
        if (event.seq > this.high + 1) this.addGap({ from: this.high + 1, to: event.seq - 1, since: now });
        this.high = event.seq;
      }
      const late: EventRecord[] = [];
      try {
        while (this.gaps.length > 0) {
          const found = await this.options.log.inStretches(
            this.gaps.map((g) => [g.from, g.to] as const),
            BATCH,
          );
          for (const event of found) this.fillGap(event.seq);
          late.push(...found);
          if (found.length < BATCH) break;
        }
      } catch (err) {
        this.high = before.high;
        this.gaps = before.gaps;
        throw err;
      }
      const merged = late.length === 0 ? events : [...events, ...late].sort((x, y) => x.seq - y.seq);
      for (const event of merged) await this.deliver(event);
      if (events.length < BATCH) break;
    }
    if (this.gaps.length === 0) return;
    const now = Date.now();
    const expired = this.gaps.filter((g) => now - g.since >= GAP_WAIT_MS);
    if (expired.length > 0) {
      this.gaps = this.gaps.filter((g) => now - g.since < GAP_WAIT_MS);
      this.forgetOwn(expired);
    }
  }

  private addGap(gap: Gap): void {
    this.gaps.push(gap);
    if (this.gaps.length > MAX_GAP_STRETCHES) this.forgetOwn(this.gaps.splice(0, this.gaps.length - MAX_GAP_STRETCHES));
  }

  /** The index of the stretch that holds `seq`, or -1. */
  private gapIndex(seq: number): number {
    let lo = 0;
    let hi = this.gaps.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const g = this.gaps[mid]!;
      if (seq < g.from) hi = mid - 1;
      else if (seq > g.to) lo = mid + 1;
      else return mid;
    }
    return -1;
  }

  /** `seq` was read: its stretch loses it (and splits in two when it lay inside). */
  private fillGap(seq: number): void {
    const i = this.gapIndex(seq);
    if (i === -1) return;
    const g = this.gaps[i]!;
    const parts: Gap[] = [];
    if (g.from < seq) parts.push({ from: g.from, to: seq - 1, since: g.since });
    if (seq < g.to) parts.push({ from: seq + 1, to: g.to, since: g.since });
    this.gaps.splice(i, 1, ...parts);
    if (this.gaps.length > MAX_GAP_STRETCHES) this.forgetOwn(this.gaps.splice(0, this.gaps.length - MAX_GAP_STRETCHES));
  }

  /** Events published here whose numbers lie in stretches no longer looked for will not be read back. */
  private forgetOwn(stretches: readonly Gap[]): void {
    for (const seq of this.own) if (stretches.some((g) => g.from <= seq && seq <= g.to)) this.own.delete(seq);
  }

  private async deliver(event: EventRecord): Promise<void> {
    if (this.own.delete(event.seq)) return;
    await this.local.publish(event);
  }

  /** Events published here and not read back from the log yet (tests: the set empties). */
  get unreadOwnEvents(): number {
    return this.own.size;
  }

  /** Whether a catch-up has read `seq` from the log (and delivered it here). */
  private readBack(seq: number): boolean {
    return seq <= this.high && this.gapIndex(seq) === -1;
  }

  async publish(event: EventRecord): Promise<void> {
    // The webhook committed before it is published: a catch-up that another notice started in between has read it
    // from the log and delivered it. Nothing will read it back again, so marking it as ours would keep it forever.
    // That catch-up also delivered it to this replica's subscribers: delivering it again here would be a second time.
    let caughtUp: Promise<void> | null = null;
    if (!this.readBack(event.seq)) {
      // Delivered at once when nothing below it can still come here: every lower number was delivered (the usual
      // case, no read), or none of the lower numbers not delivered holds an event (one probe of the log, while a
      // number is held or burnt below it). Otherwise an event that may have been acknowledged before this one was
      // received (another replica's, whose notice is on its way) must reach this replica's subscribers first: a
      // catch-up reads both from the log (this one committed) and delivers them in order (docs/decisions/061).
      let first: boolean;
      if (this.local.deliveredThrough() >= event.seq - 1) {
        first = true;
        await this.deliverOwn(event);
      } else if (this.options.groupProbes !== false) {
        first = await this.probeGrouped(event);
      } else {
        first = (await this.options.log.lowestIn(this.local.holesBelow(event.seq))) === null;
        if (first) await this.deliverOwn(event);
      }
      if (!first) {
        this.scheduleCatchUp();
        caughtUp = this.delivering;
      }
    }
    const notice: Notice = { seq: event.seq };
    await this.notify(JSON.stringify(notice));
    await caughtUp;
  }

  /** Delivers an event published here to this replica's subscribers, unless a catch-up has read it back meanwhile. */
  private async deliverOwn(event: EventRecord): Promise<void> {
    if (this.readBack(event.seq)) return;
    this.own.add(event.seq);
    await this.local.publish(event);
  }

  /**
   * The order probe of a publish, shared with every publish that needs one while a probe is in flight: they wait for
   * it, then go as one group. Resolves true once the event needs no catch-up (delivered here, or read back), false
   * when a catch-up must deliver it.
   */
  private probeGrouped(event: EventRecord): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.queuedProbes.push({ event, resolve, reject });
      if (this.probeSet) return;
      this.probeSet = true;
      this.probing = this.probing.then(() => this.probeGroup());
    });
  }

  /**
   * One probe for the group waiting: the lowest number below its highest event that holds an event, neither delivered
   * here nor one of the group's own. Each event of the group below that number is delivered at once, in sequence
   * order; each above it waits for a catch-up, which reads it and what lies below it from the log and delivers them by
   * number. This keeps decision 061's order as one probe per event does (docs/decisions/086): an event below a member
   * that may have been acknowledged before the member was received committed before the probe (the member committed
   * before it was published, and the probe is sent after that), so it is delivered here already or the probe finds
   * it; a member of the group below another is delivered before it by the same group (and was not acknowledged yet: a
   * webhook is answered once its publish resolved). Never rejects: a failed probe fails the publishes of its group.
   */
  private async probeGroup(): Promise<void> {
    const group = this.queuedProbes.sort((x, y) => x.event.seq - y.event.seq);
    this.queuedProbes = [];
    this.probeSet = false;
    try {
      const waiting = group.filter((w) => !this.readBack(w.event.seq)).map((w) => w.event.seq);
      const top = waiting.at(-1);
      const lowest =
        top === undefined || this.local.deliveredThrough() >= top - 1
          ? null
          : await this.options.log.lowestIn(without(this.local.holesBelow(top), waiting));
      for (const w of group) {
        if (lowest !== null && w.event.seq > lowest && !this.readBack(w.event.seq)) {
          w.resolve(false);
        } else {
          await this.deliverOwn(w.event);
          w.resolve(true);
        }
      }
    } catch (err) {
      for (const w of group) w.reject(err);
    }
  }

  /**
   * Sends one notice; resolves once its transaction committed. Grouped, a notice that comes while a NOTIFY is in
   * flight waits for it and goes with every other notice that came meanwhile: one statement, one commit, each notice
   * still its own (a replica reads the log after the highest number it read, whatever order the notices come in).
   */
  private notify(payload: string): Promise<void> {
    if (this.options.groupNotices === false) {
      return sql`select pg_notify(${CHANNEL}, ${payload})`.execute(this.options.db).then(() => undefined);
    }
    this.queuedNotices.push(payload);
    if (this.nextNotify === null) {
      const next = this.notifying.then(async () => {
        const payloads = this.queuedNotices;
        this.queuedNotices = [];
        this.nextNotify = null;
        await sql`select pg_notify(${CHANNEL}, p) from unnest(${payloads}::text[]) as p`.execute(this.options.db);
      });
      this.nextNotify = next;
      this.notifying = next.catch(() => undefined);
    }
    return this.nextNotify;
  }

  subscribe(kind: string, key: string | null, listener: EventListener): () => void {
    return this.local.subscribe(kind, key, listener);
  }

  subscribers(kind: string, key?: string | null): number {
    return this.local.subscribers(kind, key);
  }

  position(): Position {
    return this.local.position();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.probe);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
    await this.delivering;
    await this.local.close();
  }
}
