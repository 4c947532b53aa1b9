import type { Metrics } from '../metrics.js';
import { TRACING_OFF, type Tracing } from '../telemetry/tracing.js';
import type { EventBus } from './bus.js';
import { EventReader } from './cursor-read.js';
import type { CursorCodec, Position } from './cursor.js';
import type { AppendResult, EventLog, EventRecord, NewEvent } from './log.js';
import type { EventStreams } from './stream.js';

export { InProcessBus, type EventBus } from './bus.js';
export {
  EventLog,
  type EventRecord,
  type NewEvent,
  type AppendResult,
  type StorageCharge,
  callbackDedupeKey,
  identificationDedupePrefix,
  mobileIdDedupeKey,
  provisioningDedupeKey,
  verificationDedupePrefix,
} from './log.js';
export {
  EventStreams,
  readWaitingOut,
  StreamCancel,
  type CancelSignal,
  type Resume,
  type StreamOptions,
} from './stream.js';
export { CursorCodec, CursorError, type Position } from './cursor.js';
export { EventReader, type EventsPage, type WaitForEvents } from './cursor-read.js';

/** The key of an event's meta that holds the W3C traceparent of the request that took it in. */
export const TRACEPARENT_META = 'traceparent';

/** The event log, the bus and the streams over them, as the services see them. */
export class Events {
  /** The app's events after a cursor, and waiting for them, for transports that poll (src/events/cursor-read.ts). */
  readonly reader: EventReader;

  constructor(
    readonly log: EventLog,
    readonly bus: EventBus,
    readonly streams: EventStreams,
    private readonly metrics: Metrics,
    private readonly tracing: Tracing = TRACING_OFF,
    /** The clock events are stamped and a cursor's age read on: the retention purge's (the gateway's). */
    private readonly now: () => number = Date.now,
  ) {
    this.reader = new EventReader(log, bus, streams.cursors, now);
  }

  /** What seals and opens cursors (under the gateway secret). */
  get cursors(): CursorCodec {
    return this.streams.cursors;
  }

  /** The position a cursor names; throws CursorError for one this gateway did not hand out or one older than the retention. */
  position(cursor: string): Position {
    return this.resume(cursor).after;
  }

  /**
   * A resume from `cursor`, as a stream takes it (StreamOptions.after, cursorAt): its position, and its date, with
   * which the stream's replay refuses it if events after it were purged (src/events/replay.ts). Throws CursorError as
   * `position` does; reads nothing.
   */
  resume(cursor: string): { after: Position; cursorAt: number } {
    const { position, at } = this.cursors.decode(cursor, this.log.retentionMs, this.now());
    return { after: position, cursorAt: at };
  }

  /**
   * Appends durably, then lets the caller acknowledge, then publishes: `ingest` returns the append result
   * and a `publish` function that the webhook calls after its 2xx is written. Duplicates and conflicts
   * have nothing to publish.
   */
  async ingest(e: NewEvent): Promise<AppendResult & { publish: () => Promise<void> }> {
    // The intake span travels with the event (in the log, so across replicas) for the delivery spans to link to.
    // Asked only when tracing is on: with it off, no tracing code runs for an event.
    const traceparent = this.tracing.enabled ? this.tracing.traceparent() : undefined;
    // Stamped on the clock the retention purge reads (the gateway's), not the wall's.
    const result = await this.log.append(
      traceparent ? { ...e, meta: { ...e.meta, [TRACEPARENT_META]: traceparent } } : e,
      this.now(),
    );
    const publish = async () => {
      if (result.status !== 'created') return;
      await this.bus.publish(result.event);
      this.metrics.eventsPublished.inc([result.event.kind]);
    };
    // Object.assign, not a spread with a new key: on Node 20 that makes a hidden class a call (docs/decisions/120).
    return Object.assign({}, result, { publish });
  }
}
