import { z } from 'zod';

import { answerId, readIdAt, readJsonPath, withValueAt, type JsonPath, type ShapePaths } from '../config/json-path.js';

/**
 * The identification and verification interfaces' wire shapes (docs/upstreams.md, Identity verification and identification).
 * The only place that knows upstream field names. Where the spec is silent (verification registration,
 * results and callback payloads, the rfm check) the names are the gateway's choice, written down once
 * here and explained in docs/decisions/004-verification-wire-names.md.
 */

export const PATHS = {
  identifications: '/api/v2/identifications/workflow-instances',
  verifications: '/api/v2/verifications/workflow-instances',
  results: '/api/v2/verifications/results',
  rfm: '/api/v1/rfm/is-in-catalog',
} as const;

/** Names the gateway SENDS where the spec gives none (docs/decisions/004). */
export const SENT = {
  /** Registration: the client's id of the verification. The spec's one name for it ("verificationExternalId"). */
  externalId: 'verificationExternalId',
  /** Registration: the applicant data ("applicant data"). */
  applicant: 'applicant',
  /** Registration: where the result is delivered ("POST callbackUrl"). */
  callbackUrl: 'callbackUrl',
  /** Results request: the ids, as an array under the spec's name ("request carries verificationExternalId values"). */
  resultsIds: 'verificationExternalId',
} as const;

/** Names ACCEPTED for the external id in responses and callbacks, in order of preference. */
export const EXTERNAL_ID_FIELDS = ['verificationExternalId', 'externalId', 'id'] as const;
/** Names accepted for a status in responses and callbacks, in order of preference. */
export const STATUS_FIELDS = ['status', 'state', 'verificationStatus'] as const;
/** Names accepted for the list of results in a results response (a bare array is accepted too). */
export const RESULT_LIST_FIELDS = ['results', 'items', 'data', 'verifications'] as const;
/** Names accepted for the answer of the rfm check (a bare boolean is accepted too). */
export const RFM_ANSWER_FIELDS = ['isInCatalog', 'inCatalog', 'found', 'result'] as const;

// ---------------------------------------------------------------------------------------------------------
// Identification (spec: "Identification request body", "Identification response (202)")

export type IdentificationEnvironment = 'PRODUCTION' | 'PRODLIKE';

export interface IdentificationRequest {
  workflowId: string;
  applicantExternalId?: string;
  linkLifetimeInMinutes?: number;
  redirectUrl?: string;
}

export function identificationRequest(input: {
  workflowId: string;
  applicantExternalId?: string | null | undefined;
  linkLifetimeInMinutes?: number | null | undefined;
  redirectUrl?: string | null | undefined;
}): IdentificationRequest {
  return {
    workflowId: input.workflowId,
    ...(input.applicantExternalId != null ? { applicantExternalId: input.applicantExternalId } : {}),
    ...(input.linkLifetimeInMinutes != null ? { linkLifetimeInMinutes: input.linkLifetimeInMinutes } : {}),
    ...(input.redirectUrl != null ? { redirectUrl: input.redirectUrl } : {}),
  };
}

/**
 * The 202 answer (spec: Identification response): `{ id, idShort, url }`. Only `id` is needed to keep what the
 * upstream created; an answer without a usable `idShort` or `url` is still a created request (decision 019).
 */
export const identificationResponseSchema = z.looseObject({
  id: z.unknown().transform((v, ctx) => answerId(v) ?? (ctx.addIssue({ code: 'custom', message: 'no id' }), z.NEVER)),
});

/** What the gateway reads from a 202; null where the answer lacked the field or held an unusable value. */
export interface IdentificationLink {
  id: string;
  idShort: string | null;
  url: string | null;
}

function absoluteUrl(value: unknown): string | null {
  if (typeof value !== 'string') return null;
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:' ? value : null;
  } catch {
    return null;
  }
}

/** The link of a 202 answer; null when it names no id (then nothing can be kept). */
export function parseIdentificationResponse(body: unknown): IdentificationLink | null {
  const parsed = identificationResponseSchema.safeParse(body);
  if (!parsed.success) return null;
  const b = body as Record<string, unknown>;
  const idShort = typeof b.idShort === 'string' && b.idShort !== '' ? b.idShort : null;
  return { id: parsed.data.id, idShort, url: absoluteUrl(b.url) };
}

/** Names under which an answer may hold an identification's link or its short id, compared in lower case. */
const LINK_FIELDS = new Set(['url', 'link', 'idshort', 'id_short', 'shorturl', 'short_url']);
/** The shortest last path segment of a link taken for its short id (shorter ones would mask common words). */
const MIN_SHORT_ID = 6;
/** An absolute http(s) URL inside a text: an identification link, wherever an answer puts it. */
const URL_IN_TEXT = /https?:\/\/[^\s"'<>]+/gi;

/**
 * The texts of a 202 answer and of its request that are kept only sealed (src/identity/service.ts
 * IdentificationSpec), for masking an answer whose id could not be read, and so whose shape is not the spec's: the
 * string under any link-like name (LINK_FIELDS) at any depth, any absolute http(s) URL in any string of it (a text
 * answer's included: an envelope or a message may carry the link) and its last path segment, and the applicant's
 * external id and the redirect URL sent, which an answer may echo. Over-masking a URL that is not the link costs an
 * operator a detail; missing the link would keep it in clear.
 */
export function identificationAnswerSecrets(body: unknown, sent: IdentificationRequest): string[] {
  const found: unknown[] = [sent.applicantExternalId, sent.redirectUrl];
  // Iterative, over the answer as parsed (cut at its depth bound by the HTTP layer).
  const stack: [unknown, string | null][] = [[body, null]];
  while (stack.length) {
    const [value, name] = stack.pop()!;
    if (typeof value === 'string') {
      if (name !== null && LINK_FIELDS.has(name.toLowerCase())) found.push(value);
      for (const m of value.matchAll(URL_IN_TEXT)) {
        found.push(m[0]);
        // The link's last path segment is its short id in the shapes seen (`…/i/<idShort>`), which a text may quote
        // alone: masked too when it is long enough to be one.
        const last = m[0].split(/[?#]/)[0]!.split('/').pop() ?? '';
        if (last.length >= MIN_SHORT_ID) found.push(last);
      }
    } else if (Array.isArray(value)) {
      for (const item of value) stack.push([item, null]);
    } else if (isObject(value)) {
      for (const [key, item] of Object.entries(value)) stack.push([item, key]);
    }
  }
  return found.filter((v): v is string => typeof v === 'string' && v !== '');
}

// ---------------------------------------------------------------------------------------------------------
// Identification completion callback (spec: Events 2; "Kinds of identification event ... not shown")

/** Names accepted for the identification's id in a callback, in order of preference (decision 018). */
export const IDENTIFICATION_ID_FIELDS = ['identificationId', 'workflowInstanceId', 'id'] as const;
/** Objects a callback may nest the identification under. */
export const IDENTIFICATION_NESTED_FIELDS = ['identification', 'workflowInstance', 'data', 'result'] as const;
/** Names accepted for the kind of event in a callback. */
export const EVENT_TYPE_FIELDS = ['event', 'eventType', 'type'] as const;

/**
 * The ids a callback may name its identification by, in order of preference: top level first, then inside each of
 * IDENTIFICATION_NESTED_FIELDS (a top-level `id` may be the event's own, the identification nested under it).
 */
export function identificationIdsOf(raw: unknown): string[] {
  const body = one(raw);
  if (!isObject(body)) return [];
  const ids: string[] = [];
  const add = (obj: Record<string, unknown>) => {
    for (const f of IDENTIFICATION_ID_FIELDS) {
      const id = firstString(obj, [f]);
      if (id !== null && !ids.includes(id)) ids.push(id);
    }
  };
  add(body);
  for (const nested of IDENTIFICATION_NESTED_FIELDS) {
    const inner = one(member(body, nested));
    if (isObject(inner)) add(inner);
  }
  return ids;
}

/** Status and event kind of an identification callback, top level or nested like the id. */
export function identificationEventOf(raw: unknown): { status: string | null; event: string | null } {
  const body = one(raw);
  if (!isObject(body)) return { status: null, event: null };
  const read = (fields: readonly string[]) => {
    const top = firstString(body, fields);
    if (top) return top;
    for (const nested of IDENTIFICATION_NESTED_FIELDS) {
      const inner = one(member(body, nested));
      if (isObject(inner)) {
        const v = firstString(inner, fields);
        if (v) return v;
      }
    }
    return null;
  };
  return { status: read(STATUS_FIELDS), event: read(EVENT_TYPE_FIELDS) };
}

// ---------------------------------------------------------------------------------------------------------
// Verification registration (spec: Endpoints, "register a verification by workflow")

export type RegistrationRequest = Record<string, unknown> & { workflowId: string };

export function registrationRequest(
  input: {
    workflowId: string;
    applicant: Record<string, unknown>;
    externalId?: string | null | undefined;
    callbackUrl?: string | null | undefined;
  },
  /** VERIFICATION_CALLBACK_URL_PATH: where the request carries the callbackUrl; null for SENT.callbackUrl. */
  callbackUrlPath: JsonPath | null = null,
): RegistrationRequest {
  const body: RegistrationRequest = {
    workflowId: input.workflowId,
    ...(input.externalId != null ? { [SENT.externalId]: input.externalId } : {}),
    [SENT.applicant]: input.applicant,
    ...(input.callbackUrl != null && !callbackUrlPath ? { [SENT.callbackUrl]: input.callbackUrl } : {}),
  };
  return input.callbackUrl != null && callbackUrlPath
    ? (withValueAt(body, callbackUrlPath, input.callbackUrl) as RegistrationRequest)
    : body;
}

export interface Registration {
  externalId: string | null;
  status: string | null;
  jobResults: unknown;
}

/** An array of exactly one element stands for that element (platforms wrap single events in lists). */
export function one(value: unknown): unknown {
  return Array.isArray(value) && value.length === 1 ? value[0] : value;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** The members of the objects looked into, by their names in lower case (member). */
const caseless = new WeakMap<object, Map<string, unknown>>();
/** No name the gateway reads is longer: longer members are not indexed. */
const LONGEST_NAME = 32;

/** ASCII letters in lower case, nothing else changed (a non-ASCII letter that lower-cases to ASCII stays apart). */
function asciiLower(text: string): string {
  return text.replace(/[A-Z]/g, (c) => String.fromCharCode(c.charCodeAt(0) + 32));
}

/**
 * The member `name` of `obj`, written in the gateway's case or, when it is absent, in any other letter case (the
 * first such member in the body's order). The identity callbacks and answers whose names the spec does not show
 * (docs/decisions/004 and 018) may write `Status` or `VerificationExternalId`: an id in another case is still the id,
 * so a body naming another verification that way is refused like one naming it in the gateway's case.
 */
function member(obj: Record<string, unknown>, name: string): unknown {
  if (Object.hasOwn(obj, name)) return obj[name];
  let index = caseless.get(obj);
  if (index === undefined) {
    // Built once per object, in one pass: a body of many members is looked into for several names.
    index = new Map();
    for (const key of Object.keys(obj)) {
      if (key.length > LONGEST_NAME) continue;
      const lower = asciiLower(key);
      if (!index.has(lower)) index.set(lower, obj[key]);
    }
    caseless.set(obj, index);
  }
  return index.get(asciiLower(name));
}

function firstString(obj: Record<string, unknown>, fields: readonly string[]): string | null {
  for (const f of fields) {
    const v = member(obj, f);
    if (typeof v === 'string' && v !== '') return v;
    // An integer beyond 2^53 was rounded by JSON.parse (two ids would read as one), and a fraction names nothing.
    if (typeof v === 'number' && Number.isSafeInteger(v)) return String(v);
  }
  return null;
}

/** Objects a verification body may nest its id and status under (each may also be an array of one). */
export const VERIFICATION_NESTED_FIELDS = ['data', 'verification', 'result'] as const;

/** The first of `fields` at the top level, else inside one of `nests`, each object possibly an array of one. */
function located(raw: unknown, fields: readonly string[], nests: readonly string[]): string | null {
  const body = one(raw);
  if (!isObject(body)) return null;
  const top = firstString(body, fields);
  if (top) return top;
  for (const nested of nests) {
    const inner = one(member(body, nested));
    if (isObject(inner)) {
      const v = firstString(inner, fields);
      if (v) return v;
    }
  }
  return null;
}

/** Names of the external id alone (EXTERNAL_ID_FIELDS without the generic `id`, which may be a job's or a check's). */
export const NAMED_EXTERNAL_ID_FIELDS = EXTERNAL_ID_FIELDS.filter((f) => f !== 'id');

/**
 * The external id of a response or callback body: top level, or inside `data` / `verification` / `result`; under its
 * own name wherever it is before a bare `id` anywhere (`namedNests`: where the named one is looked for), since a bare
 * `id` beside it may be the request's, a job's or a row's.
 */
export function externalIdOf(body: unknown, namedNests: readonly string[] = VERIFICATION_NESTED_FIELDS): string | null {
  return located(body, NAMED_EXTERNAL_ID_FIELDS, namedNests) ?? located(body, ['id'], VERIFICATION_NESTED_FIELDS);
}

/** The external id a body names under an external id's own name, top level or nested like externalIdOf. */
export function namedExternalIdOf(body: unknown): string | null {
  return located(body, NAMED_EXTERNAL_ID_FIELDS, VERIFICATION_NESTED_FIELDS);
}

/**
 * The status of a body: top level, else inside `jobResults` / `data` / `verification` / `result`, else inside the
 * `jobResults` of one of those: an answer nested where its id is read holds its status of acceptance there.
 */
export function statusOf(body: unknown): string | null {
  const found = located(body, STATUS_FIELDS, ['jobResults', ...VERIFICATION_NESTED_FIELDS]);
  if (found !== null) return found;
  const outer = one(body);
  if (!isObject(outer)) return null;
  for (const nested of VERIFICATION_NESTED_FIELDS) {
    const v = located(member(outer, nested), STATUS_FIELDS, ['jobResults']);
    if (v !== null) return v;
  }
  return null;
}

/** VERIFICATION_EXTERNAL_ID_PATH when set (it replaces the guesses), else the guesses of externalIdOf. */
export function parseRegistration(body: unknown, idPath: JsonPath | null = null): Registration {
  const b = isObject(body) ? body : {};
  return {
    // jobResults holds the status of acceptance (spec) and may hold the id beside it, under its own name only: an `id`
    // there may be a job's. A guessed id is taken as one at the path is (answerId): an id no store keeps as it is (a
    // control character, a lone surrogate, too long) would be recorded as another id than the app is told, or not at
    // all.
    externalId: idPath
      ? readIdAt(body, idPath)
      : answerId(externalIdOf(body, [...VERIFICATION_NESTED_FIELDS, 'jobResults'])),
    status: statusOf(body),
    jobResults: b.jobResults ?? null,
  };
}

/** Where the identity readers look for what the spec does not show: a configured path, or the guesses. */
export function describeIdentityShapes(
  paths: Pick<ShapePaths, 'verificationExternalId' | 'verificationResults' | 'verificationCallbackUrl'>,
): {
  externalId: string;
  results: string;
  callbackUrl: string;
} {
  const nested = VERIFICATION_NESTED_FIELDS.join(', ');
  return {
    externalId: paths.verificationExternalId
      ? `VERIFICATION_EXTERNAL_ID_PATH=${paths.verificationExternalId.text}`
      : `guesses ${EXTERNAL_ID_FIELDS.join(', ')}, at the top level or under ${nested} (${NAMED_EXTERNAL_ID_FIELDS.join(', ')} also under jobResults)`,
    results: paths.verificationResults
      ? `VERIFICATION_RESULTS_PATH=${paths.verificationResults.text}`
      : `guesses a bare list, ${RESULT_LIST_FIELDS.join(', ')}`,
    callbackUrl: paths.verificationCallbackUrl
      ? `VERIFICATION_CALLBACK_URL_PATH=${paths.verificationCallbackUrl.text}`
      : `sent as ${SENT.callbackUrl}`,
  };
}

/**
 * The registration response as stored: applicant data the upstream may echo is personal data, and dropped wherever the
 * answer puts it (a member named SENT.applicant, in any letter case, at any depth: an answer may nest itself under
 * `data`, where the gateway reads its id, or echo the applicant in `jobResults`). The answer's depth is bounded by the
 * HTTP layer, so the walk is too.
 */
export function scrubRegistration(body: unknown): unknown {
  const applicant = asciiLower(SENT.applicant);
  const scrub = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(scrub);
    if (!isObject(value)) return value;
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      // Defined, not assigned: a member named `__proto__` stays a member, as JSON.parse made it.
      if (asciiLower(key) !== applicant)
        Object.defineProperty(out, key, { value: scrub(item), enumerable: true, writable: true, configurable: true });
    }
    return out;
  };
  return scrub(body) ?? null;
}

// ---------------------------------------------------------------------------------------------------------
// Verification results (spec: Endpoints, "get results for one or several verificationExternalId values")

export function resultsRequest(externalIds: readonly string[]): Record<string, unknown> {
  return { [SENT.resultsIds]: [...externalIds] };
}

/** One result, mapped back to its id; `data` is the item as the upstream sent it. */
export interface VerificationResultItem {
  externalId: string;
  status: string | null;
  data: unknown;
}

/**
 * Results by external id. Accepts a list (bare, under the first of RESULT_LIST_FIELDS that holds one, or at
 * VERIFICATION_RESULTS_PATH) of items that each carry their id, or an object keyed by id (the key is the id, each
 * member an item). Items without an id are skipped. Null when the answer holds no list where the gateway looks: then
 * it cannot tell which ids the upstream knows, and must not answer as if it knew none. An answer with nothing in it (`{}`, `null`, an empty
 * body) is such an answer too: the gateway only asks about verifications it registered there, so an answer that
 * names none of them without a list that says so is more likely one in a shape it does not read than a "none".
 */
export function parseResults(
  body: unknown,
  listPath: JsonPath | null = null,
): Map<string, VerificationResultItem> | null {
  const out = new Map<string, VerificationResultItem>();
  const add = (item: unknown, idFromKey?: string) => {
    // Keyed by id, the key names the verification: an item's own `id` (a job's, a check's under `data`) does not.
    const id = idFromKey ?? externalIdOf(item);
    if (!id || out.has(id)) return;
    out.set(id, { externalId: id, status: statusOf(item), data: item });
  };
  // An object is a list keyed by id only when each member is an item (an object, or null for none): one whose members
  // are not (`{ results: [...], total: 2 }`, an envelope nesting the list) would read its member names as ids, and
  // answer every id asked null, as if the upstream knew none of them.
  const keyed = (value: unknown): value is Record<string, unknown> =>
    isObject(value) && Object.values(value).every((item) => item === null || isObject(item));
  const isList = (value: unknown) => Array.isArray(value) || keyed(value);
  let list: unknown = body;
  // VERIFICATION_RESULTS_PATH replaces the guesses of where the list is.
  if (listPath) list = readJsonPath(body, listPath);
  else if (isObject(body)) {
    // A guessed name holding anything but a list (`null`, a text) is skipped, as the created id's guesses are.
    const field = RESULT_LIST_FIELDS.find((f) => isList(body[f]));
    list = field ? body[field] : undefined;
  }
  if (Array.isArray(list)) {
    for (const item of list) add(item);
  } else if (keyed(list)) {
    for (const [key, item] of Object.entries(list)) add(item, key);
  } else return null;
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Verification callback (spec: Events 1; payload "not shown")

/** A callback must be a JSON object; everything else about it is open. */
export const callbackBodySchema = z.looseObject({});

// ---------------------------------------------------------------------------------------------------------
// rfm check (spec: Endpoints, POST /api/v1/rfm/is-in-catalog; body "not shown")

/** The yes/no answer of an rfm check when the response says it plainly, else null. */
export function rfmAnswer(body: unknown): boolean | null {
  if (typeof body === 'boolean') return body;
  if (!isObject(body)) return null;
  for (const f of RFM_ANSWER_FIELDS) if (typeof body[f] === 'boolean') return body[f];
  return null;
}
