import { ErrorCode, GatewayError, UpstreamRejectedError, WarningCode, badUserInput, type GatewayWarning } from '../errors.js';
import type { EventRecord, Events } from '../events/index.js';
import type { CreateIdentificationInput, RegisterVerificationInput } from '../generated/graphql.js';
import type { Caller } from '../caller.js';
import type { Ledger, LedgerRecord } from '../store/ledger.js';
import { readableBy, visibleRecord } from '../tenancy.js';
import type { Idempotency } from '../upstream/idempotency.js';
import type { VerificationCallbacks } from './callbacks.js';
import type { IdentificationCompletions } from './completions.js';
import type { IdentificationClient, RegisteredVerification, VerificationClient } from './client.js';
import * as wire from './wire.js';

/** Event kind of verification callbacks in the event log. */
export const VERIFICATION_EVENT_KIND = 'verification';

/** Spec, Limits: "linkLifetimeInMinutes: at most 195". */
export const MAX_LINK_LIFETIME_MINUTES = 195;
/** Most ids one `verificationResults` field may ask for. */
export const MAX_RESULT_IDS = 1000;
const MAX_ID_LENGTH = 200;

/** What the gateway keeps of an identification (ledger `spec`). */
export interface IdentificationSpec {
  workflowId: string;
  applicantExternalId: string | null;
  linkLifetimeInMinutes: number | null;
  redirectUrl: string | null;
  environment: wire.IdentificationEnvironment;
  /** Null when the upstream's 202 lacked it (the request exists all the same; decision 019). */
  idShort: string | null;
  /** Null when the upstream's 202 lacked a valid one. */
  url: string | null;
  /** ISO timestamp; null when no lifetime was given. */
  expiresAt: string | null;
}

/** What the gateway keeps of a verification (ledger `spec`); never the applicant data. */
export interface VerificationSpec {
  workflowId: string;
  callback: boolean;
  status: string | null;
  jobResults: unknown;
}

export interface MutationResult<T> {
  result: T;
  idempotencyKey: string;
  /** The Idempotency-Key the upstream got (derived from the caller's scope and key). */
  upstreamIdempotencyKey: string;
  replayed: boolean;
  /** Caveats for `extensions.warnings`, derived from the stored result, so a replay carries them too. */
  warnings: GatewayWarning[];
}

/** The warning of an identification whose 202 answer lacked `idShort` or a valid `url`, if any. */
export function identificationWarnings(record: LedgerRecord): GatewayWarning[] {
  const spec = record.spec as unknown as IdentificationSpec;
  const missing = [...(spec.idShort == null ? ['idShort'] : []), ...(spec.url == null ? ['url'] : [])];
  if (missing.length === 0) return [];
  return [
    {
      code: WarningCode.UPSTREAM_ANSWER_INCOMPLETE,
      message: `the identification interface created request ${record.id} but its answer lacked ${missing.join(' and ')}; the gateway kept the request, and a retry with the same idempotencyKey returns it without creating another`,
      upstream: 'identification',
      id: record.id,
      missing,
    },
  ];
}

export type CallbackOutcome =
  | { status: 'unknown-token' }
  | { status: 'invalid'; description: string }
  | { status: 'created' | 'duplicate' | 'conflict'; event: EventRecord; publish: () => Promise<void> };

type StoredRecord = Omit<LedgerRecord, 'createdAt'> & { createdAt: string };
const toStored = (record: LedgerRecord): StoredRecord => ({ ...record, createdAt: record.createdAt.toISOString() });
const fromStored = (stored: unknown): LedgerRecord => {
  const s = stored as StoredRecord;
  return { ...s, createdAt: new Date(s.createdAt) };
};

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function nonEmpty(field: string, value: string): string {
  const v = value.trim();
  if (!v) throw badUserInput(field, 'must not be empty');
  if (v.length > MAX_ID_LENGTH) throw badUserInput(field, `must be at most ${MAX_ID_LENGTH} characters`);
  return v;
}

function optionalNonEmpty(field: string, value: string | null | undefined): string | null {
  return value == null ? null : nonEmpty(field, value);
}

function absoluteHttpUrl(field: string, value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw badUserInput(field, 'must be an absolute http(s) URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw badUserInput(field, 'must be an absolute http(s) URL');
  return value;
}

export interface IdentityServiceOptions {
  identification: IdentificationClient;
  verification: VerificationClient;
  ledger: Ledger;
  idempotency: Idempotency;
  callbacks: VerificationCallbacks;
  /** Identification completion callbacks: their addresses, receipt and reads. */
  identificationCompletions: IdentificationCompletions;
  events: Events;
  /** The gateway's public address; read at registration time, because it is known only after listen. */
  publicUrl: () => string;
}

/**
 * Identification links, verification registrations and results, the rfm check, and verification callbacks.
 * Mutations follow the cloud order: validate (no upstream call on bad input), run under the caller's
 * idempotency key, record what was created in the ledger.
 */
export class IdentityService {
  readonly identificationCompletions: IdentificationCompletions;

  constructor(private readonly o: IdentityServiceOptions) {
    this.identificationCompletions = o.identificationCompletions;
  }

  async createIdentification(caller: Caller, input: CreateIdentificationInput, key?: string | null): Promise<MutationResult<LedgerRecord>> {
    const workflowId = nonEmpty('input.workflowId', input.workflowId);
    const lifetime = input.linkLifetimeInMinutes ?? null;
    if (lifetime !== null && (!Number.isInteger(lifetime) || lifetime < 1 || lifetime > MAX_LINK_LIFETIME_MINUTES)) {
      throw badUserInput('input.linkLifetimeInMinutes', `must be an integer from 1 to ${MAX_LINK_LIFETIME_MINUTES}`);
    }
    const redirectUrl = input.redirectUrl == null ? null : absoluteHttpUrl('input.redirectUrl', input.redirectUrl);
    const applicantExternalId = optionalNonEmpty('input.applicantExternalId', input.applicantExternalId);
    const environment: wire.IdentificationEnvironment = input.environment ?? 'PRODUCTION';
    const body = wire.identificationRequest({ workflowId, applicantExternalId, linkLifetimeInMinutes: lifetime, redirectUrl });
    // The workflow's completion callback address exists before any request of it can complete.
    await this.o.identificationCompletions.callbackUrl(caller, workflowId);

    const out = await this.o.idempotency.run<LedgerRecord>({
      scope: caller.scope,
      key,
      operation: 'createIdentification',
      request: { environment, path: wire.PATHS.identifications, body },
      execute: async (idempotencyKey) => {
        // From here on the upstream has created the request: whatever its answer lacks, it is recorded and
        // the key completed, so a retry replays it instead of creating a second one (decision 019).
        const created = await this.o.identification.create(environment, body, idempotencyKey);
        const now = Date.now();
        const spec: IdentificationSpec = {
          workflowId,
          applicantExternalId,
          linkLifetimeInMinutes: lifetime,
          redirectUrl,
          environment,
          idShort: created.link.idShort,
          url: created.link.url,
          expiresAt: lifetime === null ? null : new Date(now + lifetime * 60_000).toISOString(),
        };
        return this.o.ledger.record({
          id: created.link.id,
          kind: 'identification',
          projectId: null,
          parentId: null,
          title: workflowId,
          spec: { ...spec },
          response: created.response,
          idempotencyKey,
          createdBy: caller.scope,
          createdAt: new Date(now),
        });
      },
      toStored,
      fromStored,
    });
    return { result: out.result, idempotencyKey: out.idempotencyKey, upstreamIdempotencyKey: out.upstreamIdempotencyKey, replayed: out.replayed, warnings: identificationWarnings(out.result) };
  }

  async registerVerification(caller: Caller, input: RegisterVerificationInput, key?: string | null): Promise<MutationResult<LedgerRecord>> {
    const workflowId = nonEmpty('input.workflowId', input.workflowId);
    if (!isPlainObject(input.applicant)) throw badUserInput('input.applicant', 'must be a JSON object');
    const applicant = input.applicant;
    const externalId = optionalNonEmpty('input.externalId', input.externalId);
    const callback = input.callback ?? true;

    const out = await this.o.idempotency.run<LedgerRecord>({
      scope: caller.scope,
      key,
      operation: 'registerVerification',
      // The callback token derives from the upstream key (src/identity/callbacks.ts), so the fingerprint holds only the flag.
      request: { path: wire.PATHS.verifications, workflowId, applicant, externalId, callback },
      execute: async (idempotencyKey) => {
        const issued = callback ? await this.o.callbacks.issue(caller.scope, externalId, idempotencyKey) : null;
        const token = issued?.token ?? null;
        const callbackUrl = token === null ? null : `${this.o.publicUrl().replace(/\/+$/, '')}/webhooks/verification/${token}`;
        let registered: RegisteredVerification;
        try {
          registered = await this.o.verification.register(wire.registrationRequest({ workflowId, applicant, externalId, callbackUrl }), idempotencyKey);
        } catch (error) {
          // A refused registration has nothing to call back. After a transient failure the upstream may have
          // registered it with this callbackUrl, so that token stays valid; so does one issued by an earlier
          // send of the same registration (this one is a retry, and the first may have been applied).
          if (issued?.fresh && error instanceof UpstreamRejectedError) await this.o.callbacks.revoke(issued.token);
          throw error;
        }
        const id = registered.externalId ?? externalId;
        if (!id) {
          throw new GatewayError(
            ErrorCode.UPSTREAM_REJECTED,
            `the verification interface accepted the registration without an external id (${wire.EXTERNAL_ID_FIELDS.join(', ')})`,
            { upstream: 'verification' },
          );
        }
        if (token !== null && externalId === null) await this.o.callbacks.bind(token, id);
        const spec: VerificationSpec = { workflowId, callback, status: registered.status, jobResults: registered.jobResults };
        return this.o.ledger.record({
          id,
          kind: 'verification',
          projectId: null,
          parentId: null,
          title: workflowId,
          spec: { ...spec },
          response: wire.scrubRegistration(registered.response),
          idempotencyKey,
          createdBy: caller.scope,
        });
      },
      toStored,
      fromStored,
    });
    return { result: out.result, idempotencyKey: out.idempotencyKey, upstreamIdempotencyKey: out.upstreamIdempotencyKey, replayed: out.replayed, warnings: [] };
  }

  async checkRfm(caller: Caller, input: unknown, key?: string | null): Promise<MutationResult<unknown>> {
    if (!isPlainObject(input)) throw badUserInput('input', 'must be a JSON object');
    const out = await this.o.idempotency.run<unknown>({
      scope: caller.scope,
      key,
      operation: 'checkRfm',
      request: { path: wire.PATHS.rfm, body: input },
      execute: (idempotencyKey) => this.o.verification.checkRfm(input, idempotencyKey),
      // The idempotency record stores JSON; `undefined` would not survive a replay.
      toStored: (result) => result ?? null,
    });
    return { result: out.result, idempotencyKey: out.idempotencyKey, upstreamIdempotencyKey: out.upstreamIdempotencyKey, replayed: out.replayed, warnings: [] };
  }

  /** Checks the ids of one `verificationResults` field before any upstream call. */
  checkResultIds(externalIds: readonly string[]): void {
    if (externalIds.length > MAX_RESULT_IDS) throw badUserInput('externalIds', `must hold at most ${MAX_RESULT_IDS} ids`);
    externalIds.forEach((id, i) => nonEmpty(`externalIds[${i}]`, id));
  }

  /**
   * The batch function of the per-request results loader: one upstream call for the ids given (the loader
   * splits above the batch size), each id mapped back to its result, null where the upstream has none.
   * Only verifications this caller registered are asked for (src/tenancy.ts): any other id, another key's
   * or one never registered here, is null without reaching the upstream.
   */
  async results(caller: Caller, externalIds: readonly string[]): Promise<(wire.VerificationResultItem | null)[]> {
    const records = await this.o.ledger.getMany(externalIds);
    const own = externalIds.filter((_id, i) => {
      const rec = visibleRecord(caller, records[i]);
      return rec !== null && rec.kind === 'verification';
    });
    if (own.length === 0) return externalIds.map(() => null);
    const byId = await this.o.verification.results([...new Set(own)]);
    const allowed = new Set(own);
    return externalIds.map((id) => (allowed.has(id) ? (byId.get(id) ?? null) : null));
  }

  /** Newest callback event of each verification, in the order of `externalIds`; null for another key's. */
  async completions(caller: Caller, externalIds: readonly string[]): Promise<(EventRecord | null)[]> {
    const events = await this.o.events.log.latestMany(VERIFICATION_EVENT_KIND, externalIds);
    return events.map((e) => (e && readableBy(caller, e.scope) ? e : null));
  }

  /** True when the token is one of a callbackUrl the gateway handed out. */
  async isCallbackToken(token: string): Promise<boolean> {
    return (await this.o.callbacks.find(token)) !== null;
  }

  /**
   * A POST to a callbackUrl: the token must be one the gateway issued; the body, a JSON object, is appended
   * to the event log keyed by the verification. Acknowledge, then call `publish`.
   */
  async receiveCallback(token: string, body: unknown, meta: Record<string, unknown>): Promise<CallbackOutcome> {
    const binding = await this.o.callbacks.find(token);
    if (!binding) return { status: 'unknown-token' };
    const parsed = wire.callbackBodySchema.safeParse(wire.one(body));
    if (!parsed.success) return { status: 'invalid', description: 'the body must be a JSON object (or an array of one), or form fields' };
    const named = wire.externalIdOf(body);
    if (binding.externalId !== null && named !== null && named !== binding.externalId) {
      return { status: 'invalid', description: 'the body names another verification than the one this callbackUrl was issued for' };
    }
    const externalId = binding.externalId ?? named;
    if (externalId === null) {
      return { status: 'invalid', description: `the body does not name its verification (${wire.EXTERNAL_ID_FIELDS.join(', ')})` };
    }
    // Only an exact repeat of a body is the same delivery; every distinct callback is kept and published once,
    // and a read returns the newest (docs/decisions/041).
    const digest = this.o.callbacks.bodyDigest(body);
    const appended = await this.o.events.ingest({
      kind: VERIFICATION_EVENT_KIND,
      key: externalId,
      dedupeKey: `verification:${externalId}:${digest}`,
      fingerprint: digest,
      payload: body,
      meta,
      scope: binding.createdBy,
    });
    return appended;
  }
}
