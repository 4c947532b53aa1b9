// The wire shapes of the mobile identity service's completion notification
// (docs/upstreams.md, Mobile-ID notification, "Body, positive scenario" / "Body, negative scenario").
// Snake_case lives here only; the intake (intake.ts) maps it to the stored payload.
import { isUtf8 } from 'node:buffer';
import { z } from 'zod';

/** Longest auth_req_id (and other identifiers) accepted; CIBA ids are short opaque strings. */
export const MAX_ID_LENGTH = 512;
const MAX_TEXT_LENGTH = 4096;
const MAX_TOKEN_LENGTH = 16_384;
/** The longest expires_in taken: ten years, in seconds. */
const MAX_EXPIRES_IN = 10 * 365 * 86_400;

const required = (what: string) => (iss: { input?: unknown }) =>
  iss.input === undefined ? 'is required' : `must be ${what}`;

const identifier = z
  .string({ error: required('a string') })
  .min(1, 'must not be empty')
  .max(MAX_ID_LENGTH, `must be at most ${MAX_ID_LENGTH} characters`);
const text = z
  .string({ error: required('a string') })
  .max(MAX_TEXT_LENGTH, `must be at most ${MAX_TEXT_LENGTH} characters`);
const optionalText = z
  .string({ error: 'must be a string' })
  .max(MAX_TEXT_LENGTH, `must be at most ${MAX_TEXT_LENGTH} characters`)
  .optional();

export interface JwtParts {
  readonly header: Readonly<Record<string, unknown>>;
  readonly claims: Readonly<Record<string, unknown>>;
}

/**
 * A compact JWE (RFC 7516 §7.1: five base64url parts, the encrypted key empty for direct encryption), whose protected
 * header is a JSON object naming its `alg` and `enc` (§4.1.1, §4.1.2: both required). The operator may encrypt the
 * id_token to the relying party's key; the gateway holds no decryption key, so such a token is kept sealed as
 * received and reported as not checked. Five parts of anything else are no JWE.
 */
export function isCompactJwe(token: string): boolean {
  // A token without four dots is no JWE; the pattern would scan all of it to say so (every signed id_token).
  let dot = -1;
  for (let n = 0; n < 4; n++) if ((dot = token.indexOf('.', dot + 1)) === -1) return false;
  if (!COMPACT_JWE.test(token)) return false;
  const header = jsonPart(token.slice(0, token.indexOf('.')));
  return header !== null && typeof header.alg === 'string' && typeof header.enc === 'string';
}

const COMPACT_JWE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/**
 * One base64url part of a compact JWS as the JSON object it holds, read as jose's `decodeJwt` and
 * `decodeProtectedHeader` read it (base64url that `atob` takes, strict UTF-8 with a leading BOM skipped, a JSON
 * object); null when it is not one. Decoded with Buffer, where jose goes through `atob` and a byte loop
 * (test/mobile-id/jws-decode.test.ts compares the two).
 */
function jsonPart(part: string): Record<string, unknown> | null {
  // The alphabet was checked by the caller; a length of 4n + 1 holds no whole byte, and `atob` refuses it.
  if (part.length === 0 || part.length % 4 === 1) return null;
  let bytes = Buffer.from(part, 'base64url');
  if (!isUtf8(bytes)) return null;
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) bytes = bytes.subarray(3);
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    return null;
  }
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : null;
}

/**
 * Decodes a compact JWS (header.payload.signature, each base64url, header and payload JSON objects) without
 * checking its signature; null when it is not one.
 */
export function decodeJws(token: string): JwtParts | null {
  if (!/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token)) return null;
  const first = token.indexOf('.');
  const header = jsonPart(token.slice(0, first));
  if (header === null || typeof header.alg !== 'string') return null;
  const claims = jsonPart(token.slice(first + 1, token.indexOf('.', first + 1)));
  return claims === null ? null : { header, claims };
}

/** The id_token's text; whether it is a JWT with a subject is checked by `idTokenIssue`, which keeps what it decoded. */
const idToken = z
  .string({ error: required('a string') })
  .max(MAX_TOKEN_LENGTH, `must be at most ${MAX_TOKEN_LENGTH} characters`);

const NOT_A_JWT =
  'is neither a well-formed JWT (three base64url parts: a JSON header with alg, a JSON claims object, a signature) nor an encrypted one (JWE, five parts)';

/**
 * The id_token decoded once (null: an encrypted one, kept sealed), or what is wrong with it. The intake reads the
 * claims from here rather than decoding the token again.
 */
function idTokenIssue(value: string): { jwt: JwtParts | null; issue: string | null } {
  if (isCompactJwe(value)) return { jwt: null, issue: null };
  const jwt = decodeJws(value);
  if (!jwt) return { jwt: null, issue: NOT_A_JWT };
  // The spec shows no type for sub: a number is the same identifier written without quotes.
  const sub = jwt.claims.sub;
  // Beyond 2^53 JSON.parse rounds a number: two owners would read as one subject.
  if (typeof sub === 'number' && !Number.isSafeInteger(sub))
    return {
      jwt,
      issue: 'has a sub claim that is a number but not an integer up to 2^53 - 1 (a larger one arrives rounded)',
    };
  if (!((typeof sub === 'string' && sub !== '') || typeof sub === 'number'))
    return { jwt, issue: 'has no sub claim (the identifier of the number owner)' };
  return { jwt, issue: null };
}

/** The positive scenario. Unknown fields (jwks_endpoint, premiuminfo_endpoint, kyc_match_endpoint, ...) are kept. */
const successBodySchema = z.looseObject({
  auth_req_id: identifier,
  access_token: z
    .string({ error: required('a string') })
    .min(1, 'must not be empty')
    .max(MAX_TOKEN_LENGTH, `must be at most ${MAX_TOKEN_LENGTH} characters`),
  token_type: z.literal('Bearer', { error: 'must be "Bearer" (in any case)' }),
  id_token: idToken,
  expires_in: z
    .number({ error: required('an integer number of seconds') })
    .int('must be an integer number of seconds')
    .nonnegative('must not be negative')
    .max(MAX_EXPIRES_IN, 'must be at most ten years'),
  // The spec's "dynamic HTTPS URL": recorded and shown to apps, never fetched. http is tolerated (a test operator's);
  // another scheme (javascript:, file:, data:) is no key address, and an app that links it would run or open it.
  jwks_uri: z
    .url({ protocol: /^https?$/, error: 'must be an absolute https URL' })
    .max(MAX_TEXT_LENGTH)
    .optional(),
  leading_kyc_match: z.boolean({ error: 'must be true or false' }).optional(),
  correlation_id: optionalText,
});

/** The negative scenario (the spec's error table; unknown error codes are kept too). */
const failureBodySchema = z.looseObject({
  auth_req_id: identifier,
  error: identifier,
  error_description: text,
  correlation_id: optionalText,
});

type SuccessBody = z.infer<typeof successBodySchema>;
type FailureBody = z.infer<typeof failureBodySchema>;

export type WireNotification =
  /** `idToken`: the id_token decoded (null when it is encrypted). */
  { outcome: 'success'; body: SuccessBody; idToken: JwtParts | null } | { outcome: 'failure'; body: FailureBody };

export type ParseResult = { ok: true; notification: WireNotification } | { ok: false; description: string };

const SUCCESS_FIELDS = [
  'auth_req_id',
  'access_token',
  'token_type',
  'id_token',
  'expires_in',
  'jwks_uri',
  'leading_kyc_match',
  'correlation_id',
] as const;
const FAILURE_FIELDS = ['auth_req_id', 'error', 'error_description', 'correlation_id'] as const;
const SUCCESS_NAMES: ReadonlySet<string> = new Set(SUCCESS_FIELDS);
const FAILURE_NAMES: ReadonlySet<string> = new Set(FAILURE_FIELDS);

/**
 * Sets `name` on `target` as its own field. Assigned, a field named `__proto__` would set the object's prototype
 * instead (or nothing, for a value that is no object): the sender's field would be neither kept nor counted.
 */
export function setField(target: Record<string, unknown>, name: string, value: unknown): void {
  if (name === '__proto__')
    Object.defineProperty(target, name, { value, enumerable: true, writable: true, configurable: true });
  else target[name] = value;
}

/** The fields of a body that neither shape names, as sent. */
export function extraFields(n: WireNotification): Record<string, unknown> {
  const known = n.outcome === 'success' ? SUCCESS_NAMES : FAILURE_NAMES;
  return Object.fromEntries(Object.entries(n.body).filter(([k]) => !known.has(k)));
}

function describe(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((i) => (i.path.length ? `${i.path.join('.')} ${i.message}` : i.message))
    .join('; ');
}

/**
 * Checks a decoded body against the two shapes: one with `error` is a failure notification, any other a
 * success notification. The description names every bad field (first five), never a field's value.
 */
export function parseNotification(raw: unknown, plain = false): ParseResult {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) {
    return { ok: false, description: 'the body must be a JSON object (or form fields)' };
  }
  const body = tolerate(raw as Record<string, unknown>);
  if ('error' in body) {
    if ('access_token' in body || 'id_token' in body) {
      return {
        ok: false,
        description: 'a notification carries either error (failure) or access_token and id_token (success), not both',
      };
    }
    const taken = plain ? plainFailure(body) : null;
    if (taken) return { ok: true, notification: { outcome: 'failure', body: taken } };
    const r = failureBodySchema.safeParse(body);
    return r.success
      ? { ok: true, notification: { outcome: 'failure', body: withProto(r.data, body, FAILURE_FIELDS, FAILURE_NAMES) } }
      : { ok: false, description: describe(r.error) };
  }
  // A failure whose error is null or empty (read as absent above, as a success's would be) and that has none of a
  // success's fields is still a failure: its own shape names what is wrong, not the success's missing tokens.
  if (FAILURE_ONLY.some((name) => name in raw) && !SUCCESS_ONLY.some((name) => name in body)) {
    const sent = raw as Record<string, unknown>;
    const r = failureBodySchema.safeParse({ ...body, error: sent.error, error_description: sent.error_description });
    if (!r.success) return { ok: false, description: describe(r.error) };
  }
  const token = typeof body.id_token === 'string' ? idTokenIssue(body.id_token) : null;
  const taken = plain && !token?.issue ? plainSuccess(body) : null;
  if (taken) return { ok: true, notification: { outcome: 'success', body: taken, idToken: token?.jwt ?? null } };
  const r = successBodySchema.safeParse(body);
  if (r.success && !token?.issue) {
    const parsed = withProto(r.data, body, SUCCESS_FIELDS, SUCCESS_NAMES);
    return { ok: true, notification: { outcome: 'success', body: parsed, idToken: token?.jwt ?? null } };
  }
  const issues: Array<{ field: string; text: string }> = r.success
    ? []
    : r.error.issues.map((i) => ({
        field: String(i.path[0] ?? ''),
        text: i.path.length ? `${i.path.join('.')} ${i.message}` : i.message,
      }));
  if (token?.issue) {
    // In the shape's field order, as the schema names each bad field.
    // After the id_token's own issue (its length) and those of the fields before it, as the refinement it was ran then.
    const order = (field: string) => (SUCCESS_FIELDS as readonly string[]).indexOf(field);
    const at = issues.findIndex((i) => order(i.field) > order('id_token'));
    issues.splice(at === -1 ? issues.length : at, 0, { field: 'id_token', text: `id_token ${token.issue}` });
  }
  return {
    ok: false,
    description: issues
      .slice(0, 5)
      .map((i) => i.text)
      .join('; '),
  };
}

/**
 * MOBILEID_PLAIN_CHECKS (docs/decisions/158): a body every field of which the success schema takes as it is, checked by
 * plain code, as the object zod's parse gives (the shape's fields in its order, then the unknown ones in the body's);
 * null for anything else, which zod then decides and words. It takes nothing zod refuses:
 * test/mobile-id/plain-checks.test.ts holds the two equal on generated bodies. Live, zod's generic checks cost a
 * notification ~5 % of its CPU, where a loop shows under 1 µs: a request finds their code and objects cold.
 *
 * @public
 */
export function plainSuccess(body: Record<string, unknown>): SuccessBody | null {
  const b = body as Partial<Record<(typeof SUCCESS_FIELDS)[number], unknown>>;
  const tokenOk = (v: unknown, min: number) => typeof v === 'string' && v.length >= min && v.length <= MAX_TOKEN_LENGTH;
  const ok =
    isIdentifier(b.auth_req_id) &&
    tokenOk(b.access_token, 1) &&
    b.token_type === 'Bearer' &&
    tokenOk(b.id_token, 0) &&
    typeof b.expires_in === 'number' &&
    Number.isSafeInteger(b.expires_in) &&
    b.expires_in >= 0 &&
    b.expires_in <= MAX_EXPIRES_IN &&
    // A URL is left to zod's own reading of it.
    !('jwks_uri' in body) &&
    (!('leading_kyc_match' in body) || typeof b.leading_kyc_match === 'boolean') &&
    isOptionalText(body, 'correlation_id');
  return ok ? (asParsed(body, body, SUCCESS_FIELDS, SUCCESS_NAMES) as SuccessBody) : null;
}

/**
 * The failure schema's plain check, as `plainSuccess` is the success schema's (both exported for their test).
 *
 * @public
 */
export function plainFailure(body: Record<string, unknown>): FailureBody | null {
  const ok =
    isIdentifier(body.auth_req_id) &&
    isIdentifier(body.error) &&
    typeof body.error_description === 'string' &&
    body.error_description.length <= MAX_TEXT_LENGTH &&
    isOptionalText(body, 'correlation_id');
  return ok ? (asParsed(body, body, FAILURE_FIELDS, FAILURE_NAMES) as FailureBody) : null;
}

const isIdentifier = (v: unknown): boolean => typeof v === 'string' && v.length >= 1 && v.length <= MAX_ID_LENGTH;

const isOptionalText = (body: Record<string, unknown>, name: string): boolean =>
  !(name in body) || (typeof body[name] === 'string' && (body[name] as string).length <= MAX_TEXT_LENGTH);

/**
 * The body as zod's loose object gives it: the shape's fields present in `known` (the body, or zod's copy of it), in
 * the shape's order, then the body's others in its order, a field named `__proto__` among them as its own field.
 */
function asParsed(
  known: Record<string, unknown>,
  body: Record<string, unknown>,
  fields: readonly string[],
  names: ReadonlySet<string>,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const name of fields) if (name in known) out[name] = known[name];
  for (const name of Object.keys(body)) if (!names.has(name)) setField(out, name, body[name]);
  return out;
}

/**
 * zod's copy of a loose object leaves out an unknown field named `__proto__` (it would set the copy's prototype);
 * the gateway keeps it with the other unknown fields, in the body's order (the unknown ones zod passes as they are).
 */
function withProto<T extends object>(
  parsed: T,
  body: Record<string, unknown>,
  fields: readonly string[],
  names: ReadonlySet<string>,
): T {
  if (!Object.hasOwn(body, '__proto__')) return parsed;
  return asParsed(parsed as Record<string, unknown>, body, fields, names) as T;
}

/** The fields only a failure has, and those only a success has. */
const FAILURE_ONLY = ['error', 'error_description'] as const;
const SUCCESS_ONLY = ['access_token', 'id_token', 'token_type', 'expires_in'] as const;
/** Optional fields of either scenario: null or an empty value means absent. */
const OPTIONAL_FIELDS = ['jwks_uri', 'leading_kyc_match', 'correlation_id'] as const;
/** Identifiers the spec shows without a type: a number is the same identifier written without quotes. */
const IDENTIFIER_FIELDS = ['auth_req_id', 'correlation_id'] as const;

/** Absent, null, or empty text (what a form writes for null). */
const blank = (v: unknown): boolean => v === undefined || v === null || v === '';

/**
 * How an allowed value may be written, normalised before the shapes are checked (docs/decisions/039): strict about
 * what the spec requires, tolerant about its spelling. The same rules apply to JSON and form bodies.
 * - an optional field that is null or empty (`jwks_uri=`) is absent, and so is a field of the other scenario that is
 *   null or empty (a success's `error`, a failure's `access_token`);
 * - auth_req_id and correlation_id given as a number are that number's decimal text;
 * - token_type is case-insensitive (RFC 6749 §5.1): any spelling of "bearer" is "Bearer";
 * - expires_in given as decimal text ("3600") is that integer;
 * - leading_kyc_match given as true/false, 1/0 (text or number) is that boolean.
 * Anything else stays as sent, so the schema names it. A value that is not an allowed spelling is never guessed.
 */
function tolerate(input: Record<string, unknown>): Record<string, unknown> {
  const body: Record<string, unknown> = { ...input };
  for (const name of OPTIONAL_FIELDS) {
    const v = body[name];
    if (v === null || (typeof v === 'string' && v.trim() === '')) delete body[name];
  }
  // A serializer that writes every field writes the other scenario's as null, or in a form as an empty field: not
  // there (a failure has an error that is neither; a success has none).
  for (const name of blank(body.error) ? FAILURE_ONLY : SUCCESS_ONLY) if (blank(body[name])) delete body[name];
  for (const name of IDENTIFIER_FIELDS) {
    const v = body[name];
    if (typeof v === 'number' && Number.isSafeInteger(v)) body[name] = String(v);
  }
  if (typeof body.token_type === 'string' && body.token_type.trim().toLowerCase() === 'bearer')
    body.token_type = 'Bearer';
  if (typeof body.expires_in === 'string' && /^\d{1,15}$/.test(body.expires_in.trim()))
    body.expires_in = Number(body.expires_in.trim());
  const kyc = body.leading_kyc_match;
  if (typeof kyc === 'string' || typeof kyc === 'number') {
    const v = String(kyc).trim().toLowerCase();
    if (v === 'true' || v === '1') body.leading_kyc_match = true;
    else if (v === 'false' || v === '0') body.leading_kyc_match = false;
  }
  return body;
}

/** The reasons of the spec's error table (section "Errors"), and UNKNOWN for anything else. */
export type FailureReason =
  | 'CLIENT_TIMEOUT'
  | 'CANCELLED_BY_USER'
  | 'AUTHENTICATION_ERROR'
  | 'SMS_ATTEMPTS_EXHAUSTED'
  | 'HHE_REQUEST_FAILED'
  | 'LOGIN_HINT_MISMATCH'
  | 'SERVER_ERROR'
  | 'UNKNOWN';

/** error_description texts of the `access_denied` rows, normalised (see `normalise`). */
const ACCESS_DENIED_REASONS: Record<string, FailureReason> = {
  'client timeout': 'CLIENT_TIMEOUT',
  'the client cancelled the authentication': 'CANCELLED_BY_USER',
  'error authentication': 'AUTHENTICATION_ERROR',
  'the client has run out of attempts to authorize by sms code': 'SMS_ATTEMPTS_EXHAUSTED',
  'hhe request failed': 'HHE_REQUEST_FAILED',
  "login hint doesn't match": 'LOGIN_HINT_MISMATCH',
};

// The spec writes "doesn’t" with a typographic apostrophe; senders may not. Case, spacing and a final
// full stop do not change the meaning either.
function normalise(text: string): string {
  return text
    .replace(/[\u2018\u2019\u02bc`´]/g, "'")
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/\.$/, '')
    .toLowerCase();
}

/** Maps a failure's error and error_description to a reason; unknown pairs are kept as UNKNOWN. */
export function failureReason(error: string, description: string): FailureReason {
  if (error === 'server_error') return 'SERVER_ERROR';
  if (error === 'access_denied') return ACCESS_DENIED_REASONS[normalise(description)] ?? 'UNKNOWN';
  return 'UNKNOWN';
}
