import type { Caller } from '../auth/caller.js';
import { provisioningDedupeKey, type EventRecord, type Events, type Position, type Resume } from '../events/index.js';
import { EVENT_KINDS } from '../events/kinds.js';
import type { ProvisioningRow, ProvisioningRows } from '../store/provisionings.js';
import {
  terminal,
  type Provisioning,
  type ProvisioningKind,
  type ProvisioningState,
  type Step,
  type StepError,
} from './model.js';

/** The event-log kind of provisioning progress; the key is the provisioning's id. */
export const PROVISIONING_EVENT_KIND = EVENT_KINDS.provisioning;

/** What the event log holds of one state of a provisioning (dates as epoch ms). */
type StoredState = Omit<Provisioning, 'createdAt' | 'updatedAt'> & { createdAt: number; updatedAt: number };

function toStored(p: Provisioning): StoredState {
  return { ...p, createdAt: p.createdAt.getTime(), updatedAt: p.updatedAt.getTime() };
}

function fromStored(s: StoredState): Provisioning {
  return { ...s, createdAt: new Date(s.createdAt), updatedAt: new Date(s.updatedAt) };
}

function toRow(p: Provisioning): ProvisioningRow {
  return {
    id: p.id,
    scope: p.scope,
    idempotency_key: p.idempotencyKey,
    kind: p.kind,
    state: p.state,
    steps: JSON.stringify(p.steps),
    error: p.error ? JSON.stringify(p.error) : null,
    fingerprint: p.fingerprint,
    revision: p.revision,
    created_at: p.createdAt.getTime(),
    updated_at: p.updatedAt.getTime(),
  };
}

function fromRow(row: ProvisioningRow): Provisioning {
  return {
    id: row.id,
    scope: row.scope,
    kind: row.kind as ProvisioningKind,
    state: row.state as ProvisioningState,
    steps: JSON.parse(row.steps) as Step[],
    error: row.error ? (JSON.parse(row.error) as StepError) : null,
    idempotencyKey: row.idempotency_key,
    fingerprint: row.fingerprint,
    revision: Number(row.revision),
    createdAt: new Date(Number(row.created_at)),
    updatedAt: new Date(Number(row.updated_at)),
  };
}

/**
 * The storing unit of composite provisioning: the row (what `provisioning(id)` and a resuming call read)
 * and, after every change, an event in the event log, published on the bus like a webhook event, so
 * `provisioningProgress` reaches subscribers on every replica (with PostgreSQL, through LISTEN/NOTIFY).
 */
export class ProvisioningRecords {
  constructor(
    private readonly rows: ProvisioningRows,
    private readonly events: Events,
    /** The gateway's clock, on which a resuming call judges the heartbeat. */
    private readonly now: () => number = () => Date.now(),
  ) {}

  /**
   * Stores a new provisioning; false when one with its id exists already (a concurrent call with the same key). Not
   * announced: the caller announces the claim (`announce`) once it is its own.
   */
  create(p: Provisioning): Promise<boolean> {
    return this.rows.insert(toRow(p));
  }

  /**
   * Stores `p`, a run's next state, only while the row is at `since` (the revision the run last wrote); false when
   * another call took the provisioning over meanwhile: nothing is written. Not announced, as `create`: the run records
   * the revision stored before it announces it, so that an announcement that fails is not taken for a takeover.
   */
  save(p: Provisioning, since: number): Promise<boolean> {
    return this.rows.update(toRow(p), since);
  }

  /**
   * The heartbeat of a live run: a provisioning touched within the takeover time is not resumed elsewhere. Only while
   * the row is at `revision` (the one the run last wrote); false when another call took it over.
   */
  touch(id: string, revision: number): Promise<boolean> {
    return this.rows.touch(id, revision, this.now());
  }

  /**
   * Claims `existing`, FAILED or abandoned, for this call to resume, storing `run` (its resumed state) in the claim's
   * one write; false when another call got it first (nothing is written). Not announced, as `create`.
   */
  claimResume(existing: Provisioning, run: Provisioning, staleMs: number): Promise<boolean> {
    return this.rows.claimResume(toRow(run), existing.revision, staleMs);
  }

  async read(id: string): Promise<Provisioning | null> {
    const row = await this.rows.get(id);
    return row ? fromRow(row) : null;
  }

  /** What this replica's bus has delivered now: taken before a subscriber reads the row it follows (`follow`). */
  delivered(): Position {
    return this.events.bus.position();
  }

  /**
   * `current` (read by the caller from the provisioning's row, so a stored event left behind the row by a crash
   * cannot hold it back), then every later state, until SUCCEEDED or FAILED: one event stream over the
   * provisioning's key. `since` is where the bus stood before the row was read (`delivered`): the row is written
   * before its event, so every state newer than `current` is announced outside it. The stream replays the key's
   * events outside `since` from the log, oldest first, then follows live ones, and only revisions newer than
   * `current` pass: each state after it comes once, in order, none passed over. Reading the log's latest state
   * instead, as a stream of one result does, delivered only the newest of the states stored while the subscriber
   * connected (two steps stored between the row's read and the stream's listening, or an older one coming live
   * while the latest was read), where the subscription promises the state after every step.
   *
   * With `resume`, not `current`: the states whose events the cursor does not cover, from the log, then
   * live, each once (the stream orders them by their log sequence, which is their revisions' order); a provisioning
   * that reached SUCCEEDED or FAILED inside the cursor ends the stream at once, as the resumed stream ended there,
   * unless the same key restarted it after that FAILED state: the restart's states follow, up to its terminal one.
   */
  follow(
    caller: Caller,
    current: Provisioning,
    resume: Resume | undefined,
    since: Position,
  ): AsyncGenerator<Provisioning> {
    if (resume?.after !== undefined) {
      return this.events.streams.subscribe({
        kind: PROVISIONING_EVENT_KIND,
        key: current.id,
        reader: caller,
        ...resume,
        endAt: caller.expiresAt,
        // A terminal state ended the stream, unless the same key restarted the provisioning after it (a FAILED one
        // resumed: the row holds a later revision): the resume then delivers the restart, up to its own terminal state.
        endedWithin: (event) => {
          const stored = event.payload as StoredState;
          return terminal(stored.state) && stored.revision >= current.revision;
        },
        map: fromEvent,
        until: (p) => terminal(p.state),
      });
    }
    const revision = current.revision;
    return this.events.streams.subscribe({
      kind: PROVISIONING_EVENT_KIND,
      key: current.id,
      reader: caller,
      endAt: caller.expiresAt,
      initial: current,
      // No client's cursor (no `cursorAt`): the replay checks nothing against the purge.
      after: since,
      // A bound fixed at the row's revision, not raised by each event the filter passes: the filter sees an event when
      // it is read or comes live, not when it is delivered, and a live event seen during the replay's read would have
      // raised it past the states that read was about to replay. The log's order is the revisions' order.
      filter: (event) => (event.payload as StoredState).revision > revision,
      map: fromEvent,
      until: (p) => terminal(p.state),
    });
  }

  /** Appends `p`, a state just stored, to the event log and publishes it (`provisioningProgress` on every replica). */
  async announce(p: Provisioning): Promise<void> {
    const { publish } = await this.events.ingest({
      kind: PROVISIONING_EVENT_KIND,
      key: p.id,
      dedupeKey: provisioningDedupeKey(p.id, p.revision),
      payload: toStored(p),
      scope: p.scope,
    });
    await publish();
  }
}

/** The state an event records, with the event's cursor (the result's `extensions.cursor`, src/execution/shared.ts). */
function fromEvent(event: EventRecord): Provisioning {
  const p: Provisioning & { cursor?: string } = fromStored(event.payload as StoredState);
  if (event.cursor !== undefined) p.cursor = event.cursor;
  return p;
}
