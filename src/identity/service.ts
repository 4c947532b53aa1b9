import { parse as parseUuid } from 'uuid';

import type { Caller } from '../auth/caller.js';
import { visibleRecord } from '../auth/tenancy.js';
import type { ShapePaths } from '../config/json-path.js';
import {
  badUserInput,
  codePoint,
  keptAnswerText,
  LINE_CONTROL,
  UpstreamAnswerIncompleteError,
  UpstreamAnswerUnreadableError,
  UpstreamRejectedError,
  WarningCode,
  type GatewayWarning,
} from '../errors.js';
import { verificationDedupePrefix, type EventRecord, type Events, type Resume } from '../events/index.js';
import { EVENT_KINDS } from '../events/kinds.js';
import type { CreateIdentificationInput, RegisterVerificationInput } from '../generated/graphql.js';
import type { RequestLog } from '../logger.js';
import { StorageBoundError } from '../store/app-storage.js';
import type { Ledger, LedgerRecord } from '../store/ledger.js';
import { nameBasedUuid, upstreamKey, type Idempotency, type Outcome } from '../upstream/idempotency.js';
import { masked } from '../upstream/masked.js';
import type { CallbackBinding, CallbackBodies, CallbackReceipt, VerificationCallbacks } from './callbacks.js';
import type {
  CreatedIdentification,
  IdentificationClient,
  RegisteredVerification,
  VerificationClient,
} from './client.js';
import type { IdentificationCompletions } from './completions.js';
import * as wire from './wire.js';

/** Event kind of verification callbacks in the event log. */
export const VERIFICATION_EVENT_KIND = EVENT_KINDS.verification;

/** Spec, Limits: "linkLifetimeInMinutes: at most 195". */
export const MAX_LINK_LIFETIME_MINUTES = 195;
/** Most ids one `verificationResults` field may ask for. */
export const MAX_RESULT_IDS = 1000;
const MAX_ID_LENGTH = 200;
/** Retry-After of a callback on an address whose registration, in flight, has not bound it to its verification yet. */
const NOT_YET_RETRY_AFTER_SECONDS = 1;

/** What the gateway keeps of an identification (ledger `spec`). */
export interface IdentificationSpec {
  workflowId: string;
  applicantExternalId: string | null;
  linkLifetimeInMinutes: number | null;
  redirectUrl: string | null;
  environment: wire.IdentificationEnvironment;
  /**
   * Null when the upstream's 202 lacked it (the request exists all the same; decision 019); also null once stored,
   * where it is in `sealed` with the link it may appear in (spec: Identification response). Clear on records before.
   */
  idShort: string | null;
  /**
   * Null when the upstream's 202 lacked a valid one; also null once stored, where the link is in `sealed` (a bearer
   * link to a person's session is sealed at rest like the mobile-ID tokens). Clear only on records stored before.
   */
  url: string | null;
  /**
   * The link, the upstream's whole answer, and (`sealedFor: 'owner'`) the applicant's external id and the redirect
   * URL, sealed with the gateway secret (`IdentityService.identificationSecrets`).
   */
  sealed?: string;
  /** `owner`: `sealed` is bound to the record's owner and holds applicantExternalId and redirectUrl (both null here). */
  sealedFor?: 'owner';
  /** ISO timestamp; null when no lifetime was given. */
  expiresAt: string | null;
}

const EXTERNAL_ID_NAMESPACE = parseUuid('0d6f3c52-9b1e-5a7d-8c44-3e2a9f6b7d10');

/**
 * The verificationExternalId sent upstream for an app's own `externalId`: derived from the app's scope, as the
 * upstream Idempotency-Key is (docs/decisions/043). The verification interface has one id space for every app of
 * the gateway, so an app's id sent as it is could be taken first by another app (which then holds it, and against
 * an upstream that accepts a second registration, receives the first app's result), or be probed through the
 * upstream's 409. Derived, an app can only ever reach ids of its own scope. The ledger keeps the derived id as the
 * record's id and the app's id in its spec; every read maps the app's id back (`verificationsOf`).
 */
export function upstreamExternalId(scope: string, externalId: string): string {
  return nameBasedUuid(`${scope}\u0000${externalId}`, EXTERNAL_ID_NAMESPACE);
}

const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * An id the upstream names, a UUID written in lowercase as `upstreamExternalId` writes it: a UUID is the same whatever
 * the case of its hex digits (RFC 9562), so one echoed in capitals is the derived id, and one the upstream assigns in
 * capitals is kept as this form (VerificationSpec.assignedAs keeps how it was written). Any other id as it is.
 */
function uuidInLowercase(id: string): string {
  return UUID_TEXT.test(id) ? id.toLowerCase() : id;
}

/**
 * The id a verification named `id` by `node(id:)` is recorded under when that is not `id` itself: a UUID in another
 * letter case than lowercase, the case the gateway keeps every verification id it sends or is assigned in. Null else.
 */
export function verificationNodeId(id: string): string | null {
  const lowercase = uuidInLowercase(id);
  return lowercase === id ? null : lowercase;
}

/**
 * The ids a verification the upstream named `id` may be stored under, the one kept now first: a UUID in lowercase, and,
 * for rows written before assigned UUIDs were kept in lowercase, as it is named and in capitals (the form upstreams
 * that do not write lowercase use). Those rows are read where they are, not rewritten: their callback bodies are sealed
 * under the id they were stored by. Any other id is only itself.
 */
function storedForms(id: string): string[] {
  return UUID_TEXT.test(id) ? [...new Set([id.toLowerCase(), id, id.toUpperCase()])] : [id];
}

/**
 * What holds `named` for another verification of the app `createdBy` (VerificationCallbacks.claim's `held`): an address
 * bound to it in any of the forms it may be stored in, or a ledger record under one of those or under the id the
 * gateway derives from one (an app's own id sent upstream).
 */
function heldForms(createdBy: string, named: string): { spellings: string[]; records: string[] } {
  const spellings = storedForms(named);
  return { spellings, records: spellings.flatMap((id) => [id, upstreamExternalId(createdBy, id)]) };
}

/** Whether two ids the upstream names are one verification's: the same text, or the same UUID in another case. */
function sameUpstreamId(a: string, b: string): boolean {
  return a === b || (UUID_TEXT.test(a) && UUID_TEXT.test(b) && a.toLowerCase() === b.toLowerCase());
}

/**
 * The sealing contexts (AES-GCM associated data): a sealed value opens only where it was sealed. The first ones
 * named the record alone; those written since name its owner too, as a JSON array (unambiguous; docs/decisions/050).
 */
const RFM_CONTEXT = 'rfm-answer';
const identificationContext = (id: string) => `identification\u0000${id}`;
const ownedContext = (what: string, owner: string, id: string) => JSON.stringify([what, owner, id]);

/** What the gateway keeps of a verification (ledger `spec`); never the applicant data. */
export interface VerificationSpec {
  workflowId: string;
  /**
   * The app's own external id when it gave one (the record's id is then `upstreamExternalId` of it); absent when
   * the upstream assigned the id, which is then the app's id too, and on records stored before ids were derived.
   */
  externalId?: string;
  callback: boolean;
  status: string | null;
  jobResults: unknown;
  /**
   * True when the verification was recorded from a 409 answering the repeat of a send whose answer was lost: the
   * upstream said it is registered, and what its lost answer held (status, jobResults) is not known. Absent otherwise.
   */
  answerLost?: true;
  /**
   * The id as the upstream wrote it when it assigned a UUID not in lowercase: the record's id (and the id the app is
   * told) is that UUID in lowercase, and the upstream is asked for the results by the id it wrote, which it may know
   * only so. Absent otherwise.
   */
  assignedAs?: string;
}

/** The warning of an identification whose 202 answer lacked `idShort` or a valid `url`, if any. */
export function identificationWarnings(record: LedgerRecord, link: Pick<IdentificationSecrets, 'idShort' | 'url'>) {
  const missing = [...(link.idShort == null ? ['idShort'] : []), ...(link.url == null ? ['url'] : [])];
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

/**
 * The warning of a verification recorded from a 409 (VerificationSpec.answerLost), if it is one: its null status is
 * not the upstream's answer, and the app could not tell it from one without this. Derived from the record, so a replay
 * of the key carries it too.
 */
export function verificationWarnings(record: LedgerRecord): GatewayWarning[] {
  if ((record.spec as unknown as VerificationSpec).answerLost !== true) return [];
  return [
    {
      code: WarningCode.UPSTREAM_ANSWER_INCOMPLETE,
      message: `the verification interface reported verification ${record.id} as already registered (answering a repeat of a registration whose answer was lost), so its status is not known: status, jobResults and raw are null until its results or a callback tell it`,
      upstream: 'verification',
      id: record.id,
      missing: ['status', 'jobResults', 'raw'],
    },
  ];
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * An id the app gives (a workflow's, an applicant's): without the blanks around it, not empty, at most MAX_ID_LENGTH
 * characters, one line. `identificationCallbackUrl` reads its workflowId this way too, so it never hands out an address
 * for a workflow id that createIdentification would refuse.
 */
export function nonEmpty(field: string, value: string): string {
  const v = value.trim();
  if (!v) throw badUserInput(field, 'must not be empty');
  if (v.length > MAX_ID_LENGTH) throw badUserInput(field, `must be at most ${MAX_ID_LENGTH} characters`);
  // An id is one line, as the cloud inputs' names are (src/cloud/validation.ts checkTexts): a control character inside
  // one (U+0000 to U+001F, U+007F) was sent to the identity interface and kept, an id no person can type or read back.
  const bad = LINE_CONTROL.exec(v);
  if (bad) throw badUserInput(field, `must be one line of text without control characters; found ${codePoint(bad[0])}`);
  return v;
}

/**
 * A verification's external id as the app gives it, as the gateway keeps and looks it up: without the blanks around
 * it. registerVerification, verificationResults, the loaders and verificationCompleted all read an id this way, so
 * an id registered as "  v-1  " is "v-1" everywhere.
 */
function externalIdKey(externalId: string): string {
  return externalId.trim();
}

function optionalNonEmpty(field: string, value: string | null | undefined): string | null {
  return value == null ? null : nonEmpty(field, value);
}

/** The longest URL taken: what browsers and servers reliably pass on. */
const MAX_URL_LENGTH = 2048;
/** The characters of a URI (RFC 3986, section 2): unreserved, reserved, and `%` only as a percent-encoded octet. */
const URI_TEXT = /^(?:[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*$/;

/**
 * An absolute http(s) URL, as it is sent: without the blanks around it that the URL parser skips (a newline in what is
 * sent would be the upstream's to guess at), and at most MAX_URL_LENGTH characters.
 */
function absoluteHttpUrl(field: string, value: string): string {
  const text = value.trim();
  if (text.length > MAX_URL_LENGTH) throw badUserInput(field, `must be at most ${MAX_URL_LENGTH} characters`);
  // The URL parser takes (and drops, or encodes) what a URL cannot hold; the text is sent as given, so it must be one.
  if (!URI_TEXT.test(text))
    throw badUserInput(
      field,
      'must be an absolute http(s) URL in URL characters: percent-encode spaces and non-ASCII text, punycode a host',
    );
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw badUserInput(field, 'must be an absolute http(s) URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw badUserInput(field, 'must be an absolute http(s) URL');
  return text;
}

/** The gateway secret, as the identity service uses it: keyed digests, and sealing personal data at rest. */
export interface IdentitySecret {
  digest(text: string): string;
  seal(plain: string, context: string): string;
  open(sealed: string, context: string): string;
}

/** What the ledger holds of an identification's secrets once opened. */
export interface IdentificationSecrets {
  url: string | null;
  /** The link's short id, which may appear in it. */
  idShort: string | null;
  /** The upstream's answer to the creation (`Identification.raw`). */
  response: unknown;
  applicantExternalId: string | null;
  redirectUrl: string | null;
}

export interface IdentityServiceOptions {
  secret: IdentitySecret;
  identification: IdentificationClient;
  verification: VerificationClient;
  ledger: Ledger;
  idempotency: Idempotency;
  callbacks: VerificationCallbacks;
  /** Identification completion callbacks: their addresses, receipt and reads. */
  identificationCompletions: IdentificationCompletions;
  /** How verification callback bodies are kept (bounded, sealed, charged to their owner). */
  bodies: CallbackBodies;
  events: Events;
  /** The gateway's public address; read at registration time, because it is known only after listen. */
  publicUrl: () => string;
  /** The *_PATH variables (VERIFICATION_*): where registration answers and requests carry what the spec does not show. */
  shapePaths: ShapePaths;
  /** The gateway's clock (GatewayTesting.clock): identification links' creation and expiry. Default Date.now. */
  now?: (() => number) | undefined;
}

/**
 * Identification links, verification registrations and results, the rfm check, and verification callbacks.
 * Mutations follow the cloud order: validate (no upstream call on bad input), run under the caller's
 * idempotency key, record what was created in the ledger.
 */
export class IdentityService {
  readonly identificationCompletions: IdentificationCompletions;

  private readonly now: () => number;

  constructor(private readonly o: IdentityServiceOptions) {
    this.identificationCompletions = o.identificationCompletions;
    this.now = o.now ?? (() => Date.now());
  }

  /**
   * What a key's record keeps for a replay, and the record read back from it (src/store/ledger.ts): a copy for both
   * kinds, since a verification's id may be the caller's external id, which an earlier registration may have recorded
   * first (the ledger keeps the first).
   */
  private readonly toStored = (record: LedgerRecord): unknown => this.o.ledger.storedResult(record, true);
  private readonly fromStored = (stored: unknown): Promise<LedgerRecord> => this.o.ledger.replayOf(stored);

  /** An identification request, validated and built for the wire: what createIdentification sends, and a plan shows. */
  private identificationCall(input: CreateIdentificationInput) {
    const workflowId = nonEmpty('input.workflowId', input.workflowId);
    const lifetime = input.linkLifetimeInMinutes ?? null;
    if (lifetime !== null && (!Number.isInteger(lifetime) || lifetime < 1 || lifetime > MAX_LINK_LIFETIME_MINUTES)) {
      throw badUserInput('input.linkLifetimeInMinutes', `must be an integer from 1 to ${MAX_LINK_LIFETIME_MINUTES}`);
    }
    const redirectUrl = input.redirectUrl == null ? null : absoluteHttpUrl('input.redirectUrl', input.redirectUrl);
    const applicantExternalId = optionalNonEmpty('input.applicantExternalId', input.applicantExternalId);
    const environment: wire.IdentificationEnvironment = input.environment ?? 'PRODUCTION';
    const body = wire.identificationRequest({
      workflowId,
      applicantExternalId,
      linkLifetimeInMinutes: lifetime,
      redirectUrl,
    });
    return { workflowId, lifetime, redirectUrl, applicantExternalId, environment, body };
  }

  /**
   * The upstream requests the identity mutations would send, built by the code that sends them, nothing sent or
   * written (an agent's plan, src/agents/dry-run.ts): the upstream, the path, the body (a verification's callback
   * token masked; the spec's headers are added by the plan).
   */
  plannedRequest(
    caller: Caller,
    field: 'createIdentification' | 'registerVerification' | 'checkRfm',
    input: unknown,
    key: string,
  ): { upstream: string; path: string; body: unknown; shown: unknown } {
    if (field === 'createIdentification') {
      const call = this.identificationCall(input as CreateIdentificationInput);
      const upstream = call.environment === 'PRODLIKE' ? 'identification-prodlike' : 'identification';
      return { upstream, path: wire.PATHS.identifications, body: call.body, shown: call.body };
    }
    if (field === 'checkRfm') {
      if (!isPlainObject(input)) throw badUserInput('input', 'must be a JSON object');
      return { upstream: 'rfm', path: wire.PATHS.rfm, body: input, shown: input };
    }
    const v = this.verificationInput(input as RegisterVerificationInput);
    const token = v.callback ? this.o.callbacks.tokenFor(upstreamKey(caller.scope, key)) : null;
    const request = (t: string | null) =>
      wire.registrationRequest(
        {
          workflowId: v.workflowId,
          applicant: v.applicant,
          externalId: v.externalId === null ? null : upstreamExternalId(caller.scope, v.externalId),
          callbackUrl: t === null ? null : `${this.o.publicUrl().replace(/\/+$/, '')}/webhooks/verification/${t}`,
        },
        this.o.shapePaths.verificationCallbackUrl,
      );
    return {
      upstream: 'verification',
      path: wire.PATHS.verifications,
      body: request(token),
      shown: request(token && '***'),
    };
  }

  /**
   * `log` of each call: the request it serves, whose logger writes what the call logs (an upstream attempt's failure,
   * an unknown outcome, its lease's warnings), naming its request id. None: the service-wide logger.
   */
  async createIdentification(
    caller: Caller,
    input: CreateIdentificationInput,
    key?: string | null,
    log?: RequestLog,
  ): Promise<Outcome<LedgerRecord>> {
    const { workflowId, lifetime, redirectUrl, applicantExternalId, environment, body } =
      this.identificationCall(input);

    /** The upstream's answer, once it came: what `unstorable` keeps. */
    let answer: CreatedIdentification | undefined;
    const out = await this.o.idempotency.run<LedgerRecord>({
      scope: caller.scope,
      key,
      operation: 'createIdentification',
      request: { environment, path: wire.PATHS.identifications, body },
      unrepeatable: this.o.identification.unrepeatable(environment),
      execute: async (idempotencyKey, answered) => {
        // The workflow's completion callback address exists before any request of it can complete (past the app's
        // bound of addresses, nothing is sent). Written here, under the claimed key, as registerVerification issues
        // its token: a request the key refuses (reused, in use) or a replay writes nothing.
        await this.o.identificationCompletions.open(caller, workflowId);
        // From here on the upstream has created the request: whatever its answer lacks, it is recorded and the key
        // completed (decision 019), or, without a readable id, kept with the key (decision 042), so a retry replays it
        // instead of creating a second one.
        // The upstream starts the link's lifetime somewhere between this send and its answer: counted from the send, on
        // the gateway's clock, `expired` may read true a little early, but never false once the link has expired.
        const sentAt = this.now();
        const created = await this.o.identification.create(environment, body, idempotencyKey, log);
        answered();
        const now = this.now();
        const spec: IdentificationSpec = {
          workflowId,
          applicantExternalId,
          linkLifetimeInMinutes: lifetime,
          redirectUrl,
          environment,
          idShort: created.link.idShort,
          url: created.link.url,
          expiresAt: lifetime === null ? null : new Date(sentAt + lifetime * 60_000).toISOString(),
        };
        const id = created.link.id;
        const secrets: IdentificationSecrets = {
          url: spec.url,
          idShort: spec.idShort,
          response: created.response,
          applicantExternalId,
          redirectUrl,
        };
        const sealed = this.o.secret.seal(JSON.stringify(secrets), ownedContext('identification', caller.scope, id));
        answer = created;
        return {
          id,
          kind: 'identification',
          projectId: null,
          parentId: null,
          title: workflowId,
          // The ledger and the idempotency record (which stores this record) hold the link, the applicant's id and
          // the redirect only sealed, bound to the owner.
          spec: {
            ...spec,
            url: null,
            idShort: null,
            applicantExternalId: null,
            redirectUrl: null,
            sealed,
            sealedFor: 'owner',
          },
          response: null,
          idempotencyKey,
          createdBy: caller.scope,
          createdAt: new Date(now),
        };
      },
      // The record is written in the same commit as the completion of the key. An answer naming an id the ledger holds
      // for another creation (the other environment's, or another app's) changes no row: the app is told so, rather
      // than told of an identification it could then not read, and the first record stays as it was.
      storeWith: (record) => [this.o.ledger.recordWrite(record)],
      unstorable: () => this.o.identification.alreadyRecorded(environment, answer!, body),
      // No `recover`: a 202 whose id cannot be read (UPSTREAM_ANSWER_INCOMPLETE, src/identity/client.ts) is kept with
      // the key, and a retry answers the kept answer again without sending. The spec names the field (`id`), so no
      // variable could point elsewhere, and the kept answer has the link masked, so it could not be recorded from.
      toStored: this.toStored,
      fromStored: this.fromStored,
      log,
    });
    return { ...out, warnings: identificationWarnings(out.result, this.identificationSecrets(out.result)) };
  }

  private verificationInput(input: RegisterVerificationInput) {
    const workflowId = nonEmpty('input.workflowId', input.workflowId);
    if (!isPlainObject(input.applicant)) throw badUserInput('input.applicant', 'must be a JSON object');
    const applicant = input.applicant;
    // nonEmpty trims, as externalIdKey does.
    const externalId = optionalNonEmpty('input.externalId', input.externalId);
    const callback = input.callback ?? true;
    return { workflowId, applicant, externalId, callback };
  }

  async registerVerification(
    caller: Caller,
    input: RegisterVerificationInput,
    key?: string | null,
    log?: RequestLog,
  ): Promise<Outcome<LedgerRecord>> {
    const { workflowId, applicant, externalId, callback } = this.verificationInput(input);
    // The answer as kept: without the applicant, and with the callback token masked where it quotes the callbackUrl
    // it was sent (the token is stored only as its digest: in clear, anyone who reads the store could post results).
    const keptAnswer = (response: unknown, token: string | null): unknown =>
      masked(wire.scrubRegistration(response), token === null ? [] : [token]);
    // `named`: the verification's id as the upstream names it (or as the gateway sent it). An assigned UUID is kept in
    // lowercase wherever it is compared or looked up (the record, the address's binding, the events of its callbacks),
    // so that a callback or an app naming it in another case finds it; the spec keeps how the upstream wrote it.
    const recordOf = async (
      named: string,
      registered: wire.Registration & { response: unknown },
      token: string | null,
      idempotencyKey: string,
      answerLost = false,
    ): Promise<LedgerRecord> => {
      const id = uuidInLowercase(named);
      // Not bound to an id another verification of the app holds, as a callback's claim is not (`receive`): when its
      // record holds it, this registration cannot be recorded, and the address would write that one's result.
      if (token !== null && externalId === null)
        await this.o.callbacks.bind(token, caller.scope, id, heldForms(caller.scope, named));
      const spec: VerificationSpec = {
        workflowId,
        ...(externalId === null ? {} : { externalId }),
        callback,
        status: registered.status,
        // Kept as Verification.jobResults: without the applicant data an answer may echo there, as the answer is.
        jobResults: wire.scrubRegistration(registered.jobResults),
        ...(answerLost ? { answerLost: true as const } : {}),
        ...(named === id ? {} : { assignedAs: named }),
      };
      // Written by `storeWith`, in the commit that completes the key.
      return {
        id,
        kind: 'verification',
        projectId: null,
        parentId: null,
        title: workflowId,
        spec: { ...spec },
        response: keptAnswer(registered.response, token),
        idempotencyKey,
        createdBy: caller.scope,
        createdAt: new Date(),
      };
    };
    /** The status the upstream answered the registration with, once it did: what `unstorable` reports. */
    let answeredStatus = 0;

    const out = await this.o.idempotency.run<LedgerRecord>({
      scope: caller.scope,
      key,
      operation: 'registerVerification',
      // The callback token derives from the upstream key (src/identity/callbacks.ts), so the fingerprint holds only the flag.
      request: { path: wire.PATHS.verifications, workflowId, applicant, externalId, callback },
      unrepeatable: this.o.verification.unrepeatable,
      execute: async (idempotencyKey, answered, sentBefore) => {
        const issued = callback ? await this.o.callbacks.issue(caller.scope, externalId, idempotencyKey) : null;
        const token = issued?.token ?? null;
        const callbackUrl =
          token === null ? null : `${this.o.publicUrl().replace(/\/+$/, '')}/webhooks/verification/${token}`;
        const sentId = externalId === null ? null : upstreamExternalId(caller.scope, externalId);
        let registered: RegisteredVerification;
        try {
          registered = await this.o.verification.register(
            wire.registrationRequest(
              { workflowId, applicant, externalId: sentId, callbackUrl },
              this.o.shapePaths.verificationCallbackUrl,
            ),
            idempotencyKey,
            log,
          );
          answered();
        } catch (error) {
          // A refused registration has nothing to call back. After a transient failure the upstream may have
          // registered it with this callbackUrl, so that token stays valid; so does one issued by an earlier
          // send of the same registration (this one is a retry, and the first may have been applied).
          if (!(error instanceof UpstreamRejectedError)) throw error;
          // A 409 answering a repeat of a send that may have been applied (its answer lost) says that the id the
          // gateway sent exists upstream: that send registered it, since the id is derived from this app and its
          // external id. Refused, the app could never read the verification through the gateway; it is recorded
          // under the id sent, with what its lost answer said unknown. An id the ledger holds already was recorded
          // by another key's registration of the same external id, and the 409 is that one's conflict.
          if (
            error.status === 409 &&
            sentId !== null &&
            (sentBefore || error.mayHaveApplied) &&
            (await this.o.ledger.get(sentId)) === null
          ) {
            answered();
            answeredStatus = error.status;
            return recordOf(
              sentId,
              { externalId: sentId, status: null, jobResults: null, response: null },
              token,
              idempotencyKey,
              true,
            );
          }
          if (issued?.fresh) await this.o.callbacks.revoke(issued.token);
          // A refusal may quote the callbackUrl it refused; its text reaches the app and an agent plan's outcome, and
          // the token it holds is still valid when an earlier send of this registration may have been applied.
          if (token === null) throw error;
          throw new UpstreamRejectedError(error.upstream, error.status, masked(error.body, [token]), error.code);
        }
        // The id the upstream names is the one it was sent, when it was sent one; the ledger keys the record by it.
        const id = sentId ?? registered.externalId;
        if (!id) {
          // A 2xx registered it: the answer is kept with the key (UPSTREAM_ANSWER_INCOMPLETE), never dropped, so
          // that a retry cannot register a second one and the id can be read once VERIFICATION_EXTERNAL_ID_PATH is set.
          throw new UpstreamAnswerIncompleteError({
            upstream: 'verification',
            status: registered.httpStatus,
            missing: "the verification's external id",
            lookedFor: this.describeShapes().externalId,
            variable: 'VERIFICATION_EXTERNAL_ID_PATH',
            answer: keptAnswerText(this.o.verification.withoutToken(keptAnswer(registered.response, token))),
          });
        }
        answeredStatus = registered.httpStatus;
        return recordOf(id, registered, token, idempotencyKey);
      },
      // Reads the kept answer again with the path configured now; nothing is sent (docs/decisions/042). The id is the
      // one sent, when one was (its answer is kept when the ledger held that id for another creation), else the one
      // the answer names.
      recover: async (incomplete, idempotencyKey) => {
        answeredStatus = incomplete.status;
        const id =
          externalId === null
            ? this.o.verification.externalIdOf(incomplete.answer)
            : upstreamExternalId(caller.scope, externalId);
        if (!id)
          throw new UpstreamAnswerIncompleteError({ ...incomplete, lookedFor: this.describeShapes().externalId });
        const token = callback ? (await this.o.callbacks.issue(caller.scope, externalId, idempotencyKey)).token : null;
        return recordOf(
          id,
          { ...wire.parseRegistration(incomplete.answer), response: incomplete.answer },
          token,
          idempotencyKey,
        );
      },
      // The record is written in the same commit as the completion of the key. An answer naming an id the ledger holds
      // for another creation (another app's identification or verification) changes no row: the app is told so, as
      // for an identification, rather than told of a verification it could then not read; the first record stays.
      storeWith: (record) => [this.o.ledger.recordWrite(record)],
      unstorable: (record) =>
        new UpstreamAnswerIncompleteError({
          upstream: 'verification',
          status: answeredStatus,
          missing: `a new id (the id read, ${record.id}, is one the gateway already recorded for another creation)`,
          lookedFor: this.describeShapes().externalId,
          variable: null,
          answer: keptAnswerText(this.o.verification.withoutToken(record.response)),
        }),
      toStored: this.toStored,
      fromStored: this.fromStored,
      log,
    });
    return { ...out, warnings: verificationWarnings(out.result) };
  }

  /** Where registration answers and requests carry what the spec does not show, for errors and the start-up line. */
  describeShapes(): { externalId: string; results: string; callbackUrl: string } {
    return wire.describeIdentityShapes(this.o.shapePaths);
  }

  async checkRfm(caller: Caller, input: unknown, key?: string | null, log?: RequestLog): Promise<Outcome<unknown>> {
    if (!isPlainObject(input)) throw badUserInput('input', 'must be a JSON object');
    const out = await this.o.idempotency.run<unknown>({
      scope: caller.scope,
      key,
      operation: 'checkRfm',
      request: { path: wire.PATHS.rfm, body: input },
      execute: (idempotencyKey) => this.o.verification.checkRfm(input, idempotencyKey, log),
      // The answer names the matched persons: stored for replay only sealed, bound to the caller (`undefined` stored as null).
      toStored: (result) => ({
        ownerSealed: this.o.secret.seal(JSON.stringify(result ?? null), ownedContext(RFM_CONTEXT, caller.scope, '')),
      }),
      fromStored: (stored) => {
        const { sealed, ownerSealed } = (stored ?? {}) as { sealed?: unknown; ownerSealed?: unknown };
        const only = stored !== null && typeof stored === 'object' && Object.keys(stored).length === 1;
        if (only && typeof ownerSealed === 'string')
          return JSON.parse(this.o.secret.open(ownerSealed, ownedContext(RFM_CONTEXT, caller.scope, ''))) as unknown;
        // Answers sealed before owners were bound; answers stored before sealing are the answer itself.
        return only && typeof sealed === 'string'
          ? (JSON.parse(this.o.secret.open(sealed, RFM_CONTEXT)) as unknown)
          : stored;
      },
      log,
    });
    return out;
  }

  /**
   * Checks the ids of one `verificationResults` field before any upstream call; the ids as they are looked up
   * (externalIdKey).
   */
  checkResultIds(externalIds: readonly string[]): string[] {
    if (externalIds.length > MAX_RESULT_IDS)
      throw badUserInput('externalIds', `must hold at most ${MAX_RESULT_IDS} ids`);
    return externalIds.map((id, i) => nonEmpty(`externalIds[${i}]`, id));
  }

  /**
   * The batch function of the per-request results loader: one upstream call for the ids given (the loader
   * splits above the batch size), each id mapped back to its result, null where the upstream has none.
   * Only verifications this caller registered are asked for (src/auth/tenancy.ts): any other id, another key's
   * or one never registered here, is null without reaching the upstream. An answer holding no list the gateway can
   * read makes each id asked an UPSTREAM_ANSWER_INCOMPLETE error (DataLoader rejects the load of a key whose entry is
   * an Error), not a null claiming the upstream knows none. `log`: the request the loader serves.
   */
  async results(
    caller: Caller,
    asked: readonly string[],
    log: RequestLog,
  ): Promise<(wire.VerificationResultItem | UpstreamAnswerUnreadableError | null)[]> {
    const externalIds = asked.map(externalIdKey);
    const records = await this.verificationsOf(caller, externalIds);
    // The upstream is asked by the id it was sent, or by the one it assigned as it wrote it.
    const sentIds = records.map((r) =>
      r === null ? null : ((r.spec as unknown as VerificationSpec).assignedAs ?? r.id),
    );
    const upstreamIds = [...new Set(sentIds.flatMap((id) => (id === null ? [] : [id])))];
    if (upstreamIds.length === 0) return externalIds.map(() => null);
    const { status, byId } = await this.o.verification.results(upstreamIds, log);
    if (byId === null)
      return records.map((r) => (r === null ? null : new UpstreamAnswerUnreadableError('verification', status)));
    // A result naming a UUID in capitals is filed under the lowercase id it stands for too, unless one is named so.
    for (const [id, item] of [...byId]) {
      const lowercase = uuidInLowercase(id);
      if (!byId.has(lowercase)) byId.set(lowercase, item);
    }
    // The upstream answers by the id it was sent (a UUID in any case); the app reads its own id back.
    return externalIds.map((id, i) => {
      const sent = sentIds[i];
      const item = sent == null ? undefined : (byId.get(sent) ?? byId.get(uuidInLowercase(sent)));
      return item ? { ...item, externalId: id } : null;
    });
  }

  /**
   * The verification records the caller's external ids stand for, in order (null for an id the caller has no
   * verification of): its own id's derived record (`upstreamExternalId`) first, else a record the upstream
   * assigned that id to, a UUID in any letter case (`storedForms`). Another app's verification is null, whatever id
   * it was registered with.
   */
  async verificationsOf(caller: Caller, asked: readonly string[]): Promise<(LedgerRecord | null)[]> {
    const externalIds = asked.map(externalIdKey);
    const derived = externalIds.map((id) => upstreamExternalId(caller.scope, id));
    const assigned = externalIds.map(storedForms);
    const records = await this.o.ledger.getMany([...derived, ...assigned.flat()]);
    const verification = (r: LedgerRecord | null | undefined, assigned: boolean) => {
      const rec = visibleRecord(caller, r);
      if (!rec || rec.kind !== 'verification') return null;
      // A record under the id itself is the app's only when that id was not one the app chose (then it is derived).
      return assigned && (rec.spec as unknown as VerificationSpec).externalId !== undefined ? null : rec;
    };
    let next = externalIds.length;
    return externalIds.map((_id, i) => {
      const forms = records.slice(next, (next += assigned[i]!.length));
      return verification(records[i], false) ?? forms.reduce((found, r) => found ?? verification(r, true), null);
    });
  }

  /** An identification record's `expired`: its link's expiry has passed on the gateway's clock. */
  linkExpired(record: LedgerRecord): boolean {
    const at = (record.spec as unknown as IdentificationSpec).expiresAt;
    return at !== null && Date.parse(at) <= this.now();
  }

  private readonly opened = new WeakMap<LedgerRecord, IdentificationSecrets>();

  /** The link, the upstream answer, the applicant's id and the redirect of an identification record, opened once per record object. */
  identificationSecrets(record: LedgerRecord): IdentificationSecrets {
    let secrets = this.opened.get(record);
    if (!secrets) {
      const spec = record.spec as unknown as IdentificationSpec;
      const clear = {
        url: spec.url,
        idShort: spec.idShort,
        response: record.response,
        applicantExternalId: spec.applicantExternalId,
        redirectUrl: spec.redirectUrl,
      };
      if (spec.sealed === undefined) secrets = clear;
      // Sealed for its owner before the short id was sealed too: the short id in clear.
      else if (spec.sealedFor === 'owner')
        secrets = {
          idShort: spec.idShort,
          ...(JSON.parse(
            this.o.secret.open(spec.sealed, ownedContext('identification', record.createdBy, record.id)),
          ) as Partial<IdentificationSecrets>),
        } as IdentificationSecrets;
      // Sealed before owners were bound: the link and the answer only; the applicant's id and the redirect in clear.
      else
        secrets = {
          ...clear,
          ...(JSON.parse(this.o.secret.open(spec.sealed, identificationContext(record.id))) as Pick<
            IdentificationSecrets,
            'url' | 'response'
          >),
        };
      this.opened.set(record, secrets);
    }
    return secrets;
  }

  /** The body a verification or identification callback event holds (opened when sealed, once per event object). */
  callbackBody(event: EventRecord): unknown {
    return this.o.bodies.body(event);
  }

  /** The external id an app knows a verification record by. */
  static externalIdOf(record: LedgerRecord): string {
    return (record.spec as unknown as VerificationSpec).externalId ?? record.id;
  }

  /**
   * The results of one verification (`externalId`: the stored one first, then live ones), or without it every result
   * of the caller's API key; with `resume`, what came after its position, from the log, then live. Another key's
   * verification streams nothing, like an id that has no result yet (src/auth/tenancy.ts).
   *
   * A UUID names its verification in any letter case, and its callbacks are kept under the id the app knows it by
   * (`externalIdOf`: a UUID the upstream assigned in lower case, or, for a verification an earlier release recorded, as
   * the upstream wrote it): the stream follows the key its record names (StreamOptions.keyOf), looked up in the
   * stream's first read of the log and retried as that one is, so that a subscriber waits out a database that is away
   * as every stream does. An id of no verification yet (an app's own id, subscribed to before its registration) is
   * followed as it is written.
   */
  watch(caller: Caller, externalId: string | null | undefined, resume?: Resume): AsyncGenerator<EventRecord> {
    const key = externalId == null ? null : externalIdKey(externalId);
    if (key === '') throw badUserInput('externalId', 'must not be empty');
    return this.o.events.streams.subscribe(
      key === null
        ? { kind: VERIFICATION_EVENT_KIND, scope: caller.scope, ...resume, endAt: caller.expiresAt }
        : {
            kind: VERIFICATION_EVENT_KIND,
            key,
            keyOf: UUID_TEXT.test(key) ? () => this.eventKeyOf(caller, key) : undefined,
            reader: caller,
            ...resume,
            endAt: caller.expiresAt,
          },
    );
  }

  /** The key the events of the caller's verification named `externalId` are kept under; null when it has none. */
  private async eventKeyOf(caller: Caller, externalId: string): Promise<string | null> {
    const [record] = await this.verificationsOf(caller, [externalId]);
    return record ? IdentityService.externalIdOf(record) : null;
  }

  /** Newest callback event of each verification, in the order of `externalIds`; null for another key's. */
  async completions(caller: Caller, externalIds: readonly string[]): Promise<(EventRecord | null)[]> {
    return this.o.events.log.latestMany(VERIFICATION_EVENT_KIND, externalIds.map(externalIdKey), caller);
  }

  /** True when the token is one of a callbackUrl the gateway handed out. */
  /** The binding of a callbackUrl the gateway issued, or null (its token is the route's authentication). */
  callbackBinding(token: string): Promise<CallbackBinding | null> {
    return this.o.callbacks.find(token);
  }

  /**
   * Whether the registration a bound address was issued for is in flight: its verification is not recorded (under the id
   * the gateway derived from the app's, or under the bound id itself: one the upstream assigned, or one an earlier
   * release recorded), and the call's lease runs (`VerificationCallbacks.registering`).
   */
  private async registrationInFlight(binding: CallbackBinding & { externalId: string }): Promise<boolean> {
    const ids = [upstreamExternalId(binding.createdBy, binding.externalId), binding.externalId];
    const records = await this.o.ledger.getMany(ids);
    if (records.some((r) => r?.kind === 'verification' && r.createdBy === binding.createdBy)) return false;
    return this.o.callbacks.registering(binding);
  }

  /**
   * A POST to a callbackUrl: the token must be one the gateway issued; the body, a JSON object, is appended
   * to the event log keyed by the verification. Acknowledge, then call `publish`.
   */
  async receiveCallback(
    binding: CallbackBinding,
    body: unknown,
    meta: Record<string, unknown>,
  ): Promise<CallbackReceipt> {
    const parsed = wire.callbackBodySchema.safeParse(wire.one(body));
    if (!parsed.success)
      return { status: 'invalid', description: 'the body must be a JSON object (or an array of one), or form fields' };
    // The spec shows no payload, only that a callback delivers a result (Events 1): a body with no field at all
    // (`{}`, an empty form) delivers none, and stored it would become the newest callback, the one a read returns.
    if (Object.keys(parsed.data).length === 0)
      return { status: 'invalid', description: 'the body carries no field: a callback delivers a verification result' };
    // An id is read only under an external id's own name, since a bare `id` (top level or nested) may be the job's or
    // a check's: a bound address names the verification, and a body contradicts it only so.
    const named = wire.namedExternalIdOf(body);
    const anotherVerification = {
      status: 'invalid',
      description: 'the body names another verification than the one this callbackUrl was issued for',
    } as const;
    // The token is bound to the app's own id, or to the id the upstream assigned; the upstream names the id it was sent
    // (derived from the app's, in any letter case), the one it assigned (a UUID in any letter case), or, for a
    // verification registered before ids were derived, the app's id itself.
    if (
      binding.externalId !== null &&
      named !== null &&
      !sameUpstreamId(named, binding.externalId) &&
      uuidInLowercase(named) !== upstreamExternalId(binding.createdBy, binding.externalId)
    ) {
      return anotherVerification;
    }
    if (binding.externalId === null) {
      // The service may call back before it answers the registration, whose answer binds the address. While the
      // address's own registration is in flight the sender is asked to retry (as an identification callback naming one
      // not stored yet is), whatever the body names: refused, a body naming no id would be lost (a sender does not
      // retry a 400), and one naming an id is taken only once the answer says whether the registration exists (a
      // refused one's address is forgotten: a callback kept before it would stay as the result of nothing) and which
      // verification it is (the answer binds the address to it).
      if (await this.o.callbacks.registering(binding))
        return {
          status: 'not-yet',
          description:
            'this callbackUrl is not yet bound to its verification, whose registration is in flight; retry later',
          retryAfterSeconds: NOT_YET_RETRY_AFTER_SECONDS,
        };
      if (named === null)
        return {
          status: 'invalid',
          description: `the body does not name its verification (${wire.NAMED_EXTERNAL_ID_FIELDS.join(', ')})`,
        };
    } else if (await this.registrationInFlight({ ...binding, externalId: binding.externalId })) {
      // An address bound from the start (the app's own id) is asked the same while its registration is in flight: kept
      // at once, a callback outlived a registration the service then refused, and a later registration of the same id
      // (the applicant's data corrected) read it as its own completion. Once the verification is recorded, as it is for
      // nearly every callback, one read of the ledger says so and the calls in flight are not asked.
      return {
        status: 'not-yet',
        description: 'the registration this callbackUrl was issued for is still in flight; retry later',
        retryAfterSeconds: NOT_YET_RETRY_AFTER_SECONDS,
      };
    }
    // Events are keyed by the id the app knows, and carry its owner (two apps may use the same id). An id named on an
    // address not yet bound is one the upstream assigned: a UUID is kept in lowercase, as its record will be.
    const externalId = binding.externalId ?? uuidInLowercase(named!);
    // An address not yet bound (its registration's answer named no readable id, or its outcome is unknown) is bound by
    // the first id it names, unless another verification of the app holds that id: another address bound to it (in any
    // spelling of a UUID), or a record of the ledger (registered without a callback, or under an id the app gave, or
    // that the gateway derived from one): else one address could write any verification's result.
    if (
      binding.externalId === null &&
      !(await this.o.callbacks.claim(binding, externalId, heldForms(binding.createdBy, named!)))
    )
      return anotherVerification;
    // Only an exact repeat of a body is the same delivery; every distinct callback is kept and published once,
    // and a read returns the newest (docs/decisions/041); up to a size, sealed to its owner and within its storage
    // bound (decisions 050 and 051).
    const event = this.o.bodies.event({
      kind: VERIFICATION_EVENT_KIND,
      key: externalId,
      scope: binding.createdBy,
      dedupePrefix: verificationDedupePrefix(binding.createdBy, externalId),
      body,
      summary: () => ({ externalId, status: wire.statusOf(body) }),
      meta,
    });
    return this.o.events.ingest(event).catch((err: unknown) => {
      if (err instanceof StorageBoundError)
        return { status: 'over-bound', description: err.refusal.description } as const;
      throw err;
    });
  }
}
