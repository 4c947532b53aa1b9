import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql, type Kysely } from 'kysely';
import type pg from 'pg';
import type { Logger } from '../logger.js';
import type { Database } from '../store/schema.js';
import { InProcessBus, type EventBus, type EventListener } from './bus.js';
import type { EventLog, EventRecord } from './log.js';

const CHANNEL = 'gateway_events';

interface Notice {
  seq: number;
  /** The replica that published it: it has already delivered the event to its own subscribers. */
  from: string;
}

/**
 * Events across replicas: each replica delivers to its own subscribers at once and sends a NOTIFY with the
 * event's sequence number; the other replicas LISTEN, read the event from the shared log and deliver it.
 * The payload stays tiny (NOTIFY is limited to 8000 bytes) and secrets never travel in it. After the
 * LISTEN connection drops, the replica reconnects and catches up from the log by sequence number.
 */
export class PostgresBus implements EventBus {
  private readonly local = new InProcessBus();
  private readonly instance = randomUUID();
  private client: pg.Client | null = null;
  private lastSeq = 0;
  private closed = false;
  private delivering: Promise<void> = Promise.resolve();

  private constructor(
    private readonly options: { databaseUrl: string; db: Kysely<Database>; log: EventLog; logger: Logger },
  ) {}

  static async start(options: { databaseUrl: string; db: Kysely<Database>; log: EventLog; logger: Logger }): Promise<PostgresBus> {
    const bus = new PostgresBus(options);
    bus.lastSeq = await options.log.lastSeq();
    await bus.listen();
    return bus;
  }

  private async listen(): Promise<void> {
    const { default: pgModule } = await import('pg');
    const client = new pgModule.Client({ connectionString: this.options.databaseUrl });
    client.on('notification', (msg) => {
      if (msg.channel !== CHANNEL || !msg.payload) return;
      let notice: Notice;
      try {
        notice = JSON.parse(msg.payload) as Notice;
      } catch {
        return;
      }
      if (notice.from === this.instance) {
        this.lastSeq = Math.max(this.lastSeq, notice.seq);
        return;
      }
      this.enqueue(() => this.catchUp(notice.seq));
    });
    client.on('error', (err) => {
      this.options.logger.warn({ err: { message: err.message } }, 'the event LISTEN connection failed; reconnecting');
      void this.reconnect(client);
    });
    client.on('end', () => void this.reconnect(client));
    await client.connect();
    await client.query(`LISTEN ${CHANNEL}`);
    this.client = client;
  }

  private async reconnect(old: pg.Client): Promise<void> {
    if (this.closed || this.client !== old) return;
    this.client = null;
    for (let attempt = 1; !this.closed; attempt++) {
      await sleep(Math.min(5_000, 100 * 2 ** attempt));
      try {
        await this.listen();
        // Events appended while we were not listening.
        this.enqueue(() => this.catchUp(Number.MAX_SAFE_INTEGER));
        return;
      } catch (err) {
        this.options.logger.warn({ err: { message: (err as Error).message }, attempt }, 'reconnecting the event LISTEN connection failed');
      }
    }
  }

  /** Deliveries run one after another, in sequence order. */
  private enqueue(task: () => Promise<void>): void {
    this.delivering = this.delivering.then(task).catch((err: unknown) => this.options.logger.error({ err }, 'delivering a replicated event failed'));
  }

  /** Delivers every event after the last one seen, up to `seq`. */
  private async catchUp(seq: number): Promise<void> {
    while (this.lastSeq < seq) {
      const events = await this.options.log.after(this.lastSeq, 500);
      if (events.length === 0) return;
      for (const event of events) {
        if (event.seq > seq) return;
        this.lastSeq = event.seq;
        await this.local.publish(event);
      }
    }
  }

  async publish(event: EventRecord): Promise<void> {
    await this.local.publish(event);
    const notice: Notice = { seq: event.seq, from: this.instance };
    await sql`select pg_notify(${CHANNEL}, ${JSON.stringify(notice)})`.execute(this.options.db);
  }

  subscribe(kind: string, key: string | null, listener: EventListener): () => void {
    return this.local.subscribe(kind, key, listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
    await this.delivering;
    await this.local.close();
  }
}
