import { ownerCaller, type Caller } from '../auth/caller.js';
import { visibleRecord } from '../auth/tenancy.js';
import { badUserInput } from '../errors.js';
import { identificationDedupePrefix, type EventRecord, type Events, type Resume } from '../events/index.js';
import { EVENT_KINDS } from '../events/kinds.js';
import { StorageBoundError } from '../store/app-storage.js';
import type { Ledger, LedgerRecord } from '../store/ledger.js';
import type { CallbackBodies, CallbackReceipt } from './callbacks.js';
import type { IdentificationCallbackBinding, IdentificationCallbacks } from './identification-callbacks.js';
import * as wire from './wire.js';

/** Event kind of identification completion callbacks in the event log. */
export const IDENTIFICATION_EVENT_KIND = EVENT_KINDS.identification;

/** Retry-After of a callback naming an identification that a creation in flight may still be storing. */
const NOT_YET_RETRY_AFTER_SECONDS = 1;

/** The route of identification completion callbacks; the token is base64url (the gateway derives 43 characters). */
export const IDENTIFICATION_CALLBACK_PREFIX = '/webhooks/identification/';

export interface IdentificationCompletionsOptions {
  callbacks: IdentificationCallbacks;
  /** How callback bodies are kept (bounded, sealed, charged to their owner). */
  bodies: CallbackBodies;
  ledger: Ledger;
  events: Events;
  /** The gateway's public address; read when an address is shown, because it is known only after listen. */
  publicUrl: () => string;
  /**
   * Told each address the gateway issues. In full sandbox mode it configures the sandbox's workflow, as an
   * operator configures the real platform's.
   */
  onIssued?: (workflowId: string, url: string) => void;
}

/**
 * Identification completion callbacks (spec: Events 2; typical identification flow, step 3): the addresses
 * the operator configures per workflow, the callbacks they receive, and the completions an app reads.
 * The payload is not shown in the spec: any JSON object naming an identification the address's API key
 * created from the address's workflow is stored whole (docs/decisions/018).
 */
export class IdentificationCompletions {
  constructor(private readonly o: IdentificationCompletionsOptions) {}

  /**
   * The completions of one identification (`id`: the stored one first, then live ones), or without it every
   * completion of the caller's API key; with `resume`, what came after its position, then live. Another key's
   * identification streams nothing (src/auth/tenancy.ts).
   */
  watch(caller: Caller, id: string | null | undefined, resume?: Resume): AsyncGenerator<EventRecord> {
    if (id != null && id.trim() === '') throw badUserInput('id', 'must not be empty');
    return this.o.events.streams.subscribe(
      id != null
        ? { kind: IDENTIFICATION_EVENT_KIND, key: id, reader: caller, ...resume, endAt: caller.expiresAt }
        : { kind: IDENTIFICATION_EVENT_KIND, scope: caller.scope, ...resume, endAt: caller.expiresAt },
    );
  }

  /** The callback address of the caller's identifications of one workflow: derived, nothing stored (a query only reads). */
  callbackUrl(caller: Caller, workflowId: string): string {
    return this.urlOf(workflowId, this.o.callbacks.address(caller.scope, workflowId));
  }

  /**
   * The address, made able to receive callbacks: called when the caller creates an identification of the workflow,
   * before the upstream call (StorageBoundError past the app's bound of addresses, and nothing is sent).
   */
  async open(caller: Caller, workflowId: string): Promise<string> {
    return this.urlOf(workflowId, await this.o.callbacks.issue(caller.scope, workflowId));
  }

  private urlOf(workflowId: string, token: string): string {
    const url = `${this.o.publicUrl().replace(/\/+$/, '')}${IDENTIFICATION_CALLBACK_PREFIX}${token}`;
    this.o.onIssued?.(workflowId, url);
    return url;
  }

  /** The binding of an address the gateway issued, or null (its token is the route's authentication). */
  bind(token: string): Promise<IdentificationCallbackBinding | null> {
    return this.o.callbacks.find(token);
  }

  /**
   * A POST to an identification callback address. The body must be a JSON object naming an identification
   * that the address's API key created from the address's workflow; anything else changes nothing. The body is
   * appended to the event log keyed by the identification. Acknowledge, then call `publish`.
   */
  async receive(
    binding: IdentificationCallbackBinding,
    body: unknown,
    meta: Record<string, unknown>,
  ): Promise<CallbackReceipt> {
    const object = wire.one(body);
    if (object === null || typeof object !== 'object' || Array.isArray(object))
      return { status: 'invalid', description: 'the body must be a JSON object (or an array of one), or form fields' };
    const ids = wire.identificationIdsOf(body);
    if (ids.length === 0) {
      return {
        status: 'invalid',
        description: `the body does not name its identification (${wire.IDENTIFICATION_ID_FIELDS.join(', ')}, at the top level or under ${wire.IDENTIFICATION_NESTED_FIELDS.join(', ')})`,
      };
    }
    // Another key's identification, or another workflow's, is answered as one that does not exist.
    const ours = (r: LedgerRecord | null) => {
      const record = visibleRecord(ownerCaller(binding.createdBy), r);
      return (
        record !== null &&
        record.kind === 'identification' &&
        (record.spec as { workflowId?: unknown }).workflowId === binding.workflowId
      );
    };
    let id = ids[0]!;
    let found = ours(await this.o.ledger.get(id));
    // The first id may be another thing's (the event's own): the others are looked up, in one query, only then.
    if (!found && ids.length > 1) {
      const rest = await this.o.ledger.getMany(ids.slice(1));
      const at = rest.findIndex(ours);
      if (at !== -1) [id, found] = [ids[at + 1]!, true];
    }
    if (!found) {
      // A creation of the app in flight may be this one, answered by the platform and not stored yet: the sender is
      // asked to retry rather than told it does not exist (it would not retry a 404). The answer depends on the
      // address's own app alone, alike for another app's id and an unknown one.
      if (await this.o.callbacks.creating(binding.createdBy))
        return {
          status: 'not-yet',
          description: `identification ${shownId(id)} is not stored yet for this callback address; retry later`,
          retryAfterSeconds: NOT_YET_RETRY_AFTER_SECONDS,
        };
      return {
        status: 'not-found',
        description: `identification ${shownId(id)} was not created through this gateway for this callback address`,
      };
    }
    // Only an exact repeat of a body is the same delivery; every distinct callback is kept (decision 041), up to a
    // size, sealed to its owner and within its storage bound (decisions 050 and 051).
    const event = this.o.bodies.event({
      kind: IDENTIFICATION_EVENT_KIND,
      key: id,
      scope: binding.createdBy,
      dedupePrefix: identificationDedupePrefix(id),
      body,
      summary: () => ({ identificationId: id, ...wire.identificationEventOf(body) }),
      meta,
    });
    return this.o.events.ingest(event).catch((err: unknown) => {
      if (err instanceof StorageBoundError)
        return { status: 'over-bound', description: err.refusal.description } as const;
      throw err;
    });
  }

  /** Newest callback event of each identification, in the order of `ids`; null for another key's. */
  async latest(caller: Caller, ids: readonly string[]): Promise<(EventRecord | null)[]> {
    return this.o.events.log.latestMany(IDENTIFICATION_EVENT_KIND, ids, caller);
  }
}

/**
 * An id as a refusal shows it: the body (up to 1 MiB) may name one of any length, and the answer should not echo it
 * whole; a surrogate pair is not cut in two.
 */
function shownId(id: string): string {
  if (id.length <= 128) return id;
  const end = /[\uD800-\uDBFF]/.test(id[127]!) ? 127 : 128;
  return `${id.slice(0, end)}…`;
}

/** Status and event kind of a stored callback's body, for the GraphQL view. */
export function completionFields(body: unknown): { status: string | null; event: string | null } {
  return wire.identificationEventOf(body);
}
