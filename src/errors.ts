import { GraphQLError } from 'graphql';

/** Every error code a client can see in `extensions.code`. Part of the public contract (docs/contract.md). */
export enum ErrorCode {
  BAD_USER_INPUT = 'BAD_USER_INPUT',
  UNAUTHENTICATED = 'UNAUTHENTICATED',
  /** The app's scopes do not cover a field the operation selects (extensions.field, extensions.scope). */
  FORBIDDEN = 'FORBIDDEN',
  IDEMPOTENCY_KEY_REUSED = 'IDEMPOTENCY_KEY_REUSED',
  IDEMPOTENCY_KEY_IN_USE = 'IDEMPOTENCY_KEY_IN_USE',
  UPSTREAM_UNAVAILABLE = 'UPSTREAM_UNAVAILABLE',
  /** The request may have been applied upstream and was not repeated; a retry with the same key is the app's decision. */
  UPSTREAM_OUTCOME_UNKNOWN = 'UPSTREAM_OUTCOME_UNKNOWN',
  UPSTREAM_REJECTED = 'UPSTREAM_REJECTED',
  /**
   * The upstream answered 2xx but the gateway cannot read what it needs from the answer. A creation's (the created
   * id): the answer is kept with the idempotency key, and a retry with the same key replays it. A read's (the list of
   * verification results): each entry asked for carries the error.
   */
  UPSTREAM_ANSWER_INCOMPLETE = 'UPSTREAM_ANSWER_INCOMPLETE',
  UPSTREAM_UNAUTHENTICATED = 'UPSTREAM_UNAUTHENTICATED',
  NOT_FOUND = 'NOT_FOUND',
  CONFLICT = 'CONFLICT',
  RATE_LIMITED = 'RATE_LIMITED',
  INTERNAL_SERVER_ERROR = 'INTERNAL_SERVER_ERROR',
  /** A documentId or persisted-query hash the gateway does not know, or (enforce mode) a document outside the manifest. */
  PERSISTED_QUERY_NOT_FOUND = 'PERSISTED_QUERY_NOT_FOUND',
  /** An HTTP request that is not a GraphQL request at all: a body over the limit, JSON that does not parse (Apollo's code too). */
  BAD_REQUEST = 'BAD_REQUEST',
  /**
   * The gateway's own database could not be reached: nothing was stored or sent, and a retry after
   * `extensions.retryAfter` seconds (with the same idempotency key) is safe. HTTP 503 with `Retry-After`.
   */
  SERVICE_UNAVAILABLE = 'SERVICE_UNAVAILABLE',
}

/**
 * The whole message of an INTERNAL_SERVER_ERROR on every transport: an unexpected error shows nothing of its own (its
 * own message goes to the log). docs/contract.md, Error codes.
 */
export const INTERNAL_ERROR_MESSAGE = 'Internal server error';

const CONTRACT_CODES = new Set<string>(Object.values(ErrorCode));

/**
 * Whether an error with `code` is the client's to read as it is: a code of the contract (docs/contract.md, Error codes)
 * other than INTERNAL_SERVER_ERROR, or one of `alsoShown` (Apollo's own request codes, for GraphQL answers). The one
 * masking rule's test of a code, for what a domain keeps for a client to read later (raisedOnPurpose) and for GraphQL
 * answers (src/execution/present.ts formatError).
 */
export function shownCode(code: unknown, alsoShown?: ReadonlySet<string>): boolean {
  return (
    typeof code === 'string' &&
    code !== ErrorCode.INTERNAL_SERVER_ERROR &&
    (CONTRACT_CODES.has(code) || alsoShown?.has(code) === true)
  );
}

/**
 * Whether `err` was raised on purpose with a code of the contract other than INTERNAL_SERVER_ERROR (shownCode): only
 * then are its words the client's to read. For what a domain keeps for a client to read later (a provisioning step's
 * error).
 */
export function raisedOnPurpose(err: unknown): err is GraphQLError & { extensions: { code: ErrorCode } } {
  return err instanceof GraphQLError && shownCode(err.extensions.code);
}

/**
 * The `error` of the OAuth-style `{ "error", "error_description" }` bodies the webhooks and the plain HTTP
 * routes answer with (docs/contract.md, Routes; RFC 6749 §5.2 and RFC 6750 §3.1 names). Public like ErrorCode.
 */
export enum WebhookErrorCode {
  INVALID_REQUEST = 'invalid_request',
  INVALID_TOKEN = 'invalid_token',
  NOT_FOUND = 'not_found',
  METHOD_NOT_ALLOWED = 'method_not_allowed',
  TEMPORARILY_UNAVAILABLE = 'temporarily_unavailable',
  SERVER_ERROR = 'server_error',
  /** POST /admin/reload by an app without the `operator` scope (RFC 6750 §3.1). */
  INSUFFICIENT_SCOPE = 'insufficient_scope',
  /** POST /admin/reload found a bad file: the running configuration is kept. */
  RELOAD_FAILED = 'reload_failed',
}

/** An expected error: its message and extensions are shown to the client as they are. */
export class GatewayError extends GraphQLError {
  constructor(
    readonly code: ErrorCode,
    message: string,
    extensions: Record<string, unknown> = {},
  ) {
    super(message, { extensions: { ...extensions, code } });
    this.name = 'GatewayError';
  }
}

/** Seconds a client waits before it retries after SERVICE_UNAVAILABLE (the database's own restart is about that). */
export const STORE_RETRY_AFTER_SECONDS = 5;

/**
 * SERVICE_UNAVAILABLE: the database could not be reached (refused, reset, restarting) or written (SQLite's disk full,
 * read-only or failing). Retryable: what the operation
 * would have stored was not, so a retry with the same idempotency key runs it once. Over HTTP, 503 with Retry-After
 * (the `http` extension, which the HTTP presenters take off the error before it is written).
 */
export class StoreUnavailableError extends GatewayError {
  /**
   * `mayHaveCommitted`: the database stopped answering while a write was committing (its COMMIT, or a write outside a
   * transaction, sent and unanswered): it may have been stored, and the answer says so instead of "nothing was stored".
   */
  constructor(
    override readonly cause: unknown,
    readonly mayHaveCommitted = false,
  ) {
    super(
      ErrorCode.SERVICE_UNAVAILABLE,
      mayHaveCommitted
        ? `the gateway's database stopped answering while a write was committing: it may have been stored; a retry with the same key runs once; retry after ${STORE_RETRY_AFTER_SECONDS} s`
        : `the gateway's database cannot be reached or written: nothing was stored; retry after ${STORE_RETRY_AFTER_SECONDS} s`,
      {
        retryAfter: STORE_RETRY_AFTER_SECONDS,
        http: { status: 503, headers: new Map([['retry-after', String(STORE_RETRY_AFTER_SECONDS)]]) },
      },
    );
  }
}

/** `BAD_USER_INPUT` naming the offending field as a path such as `input.bootDisk.sizeGb`. */
export function badUserInput(field: string, message: string): GatewayError {
  return new GatewayError(ErrorCode.BAD_USER_INPUT, `${field}: ${message}`, { field });
}

/** C0 controls and DEL: none belongs in one line of text (a name, an id, an address). */
export const LINE_CONTROL = /[\u0000-\u001f\u007f]/;

/** How a refusal names a character it found: `U+000A`. */
export function codePoint(c: string): string {
  return `U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`;
}

/** A non-retryable answer of an upstream (4xx). Carries the upstream status and its error body. */
export class UpstreamRejectedError extends GatewayError {
  /**
   * Set when an earlier attempt of the same call may have taken effect (its answer was lost, it timed out, a 5xx): the
   * refusal is of a repetition, so the request may have been applied all the same. Not shown to the client.
   */
  mayHaveApplied = false;

  constructor(
    readonly upstream: string,
    readonly status: number,
    readonly body: unknown,
    code: ErrorCode = ErrorCode.UPSTREAM_REJECTED,
  ) {
    super(code, `${upstream} rejected the request with status ${status}${describeBody(body)}`, {
      upstream,
      status,
      upstreamError: body ?? null,
    });
  }
}

/** Transient failures that outlived the retry budget: connection errors, timeouts, 429, 5xx. */
export class UpstreamUnavailableError extends GatewayError {
  constructor(
    readonly upstream: string,
    reason: string,
    readonly attempts: number,
    status?: number,
  ) {
    super(ErrorCode.UPSTREAM_UNAVAILABLE, `${upstream} is unavailable after ${attempts} attempt(s): ${reason}`, {
      upstream,
      attempts,
      ...(status !== undefined ? { status } : {}),
    });
  }
}

/**
 * The upstream's circuit is open (or half-open with every trial slot taken): the call was answered at once, and the
 * request was not sent (docs/decisions/056). `sent: false` says so to the app: nothing can have taken effect upstream,
 * the idempotency key is released, and calling again with it after `retryAfter` seconds sends the request once.
 */
export class UpstreamCircuitOpenError extends GatewayError {
  constructor(
    readonly upstream: string,
    readonly circuit: 'open' | 'half-open',
    readonly retryAfter: number,
    /** False when no earlier attempt of this call may have taken effect; null when one may have (its outcome is unknown). */
    sent: false | null,
    attempts: number,
  ) {
    super(
      ErrorCode.UPSTREAM_UNAVAILABLE,
      `${upstream} is unavailable: its circuit is ${circuit} after repeated failures, so the request was ${sent === false ? 'not sent' : 'not sent again'}; retry after ${retryAfter} s`,
      { upstream, circuit, retryAfter, attempts, ...(sent === false ? { sent } : {}) },
    );
  }
}

/**
 * A request to an upstream not known to honour Idempotency-Key failed in a way that leaves its outcome
 * unknown (docs/decisions/011), or any upstream answered a creation with a redirect (a 3xx `status`, which the gateway
 * does not follow: docs/decisions/166). It was not sent again; the idempotency layer adds the keys to retry with.
 */
export class UpstreamOutcomeUnknownError extends GatewayError {
  constructor(
    readonly upstream: string,
    readonly reason: string,
    readonly attempts: number,
    readonly status?: number,
    keys: { idempotencyKey?: string; upstreamIdempotencyKey?: string } = {},
  ) {
    super(
      ErrorCode.UPSTREAM_OUTCOME_UNKNOWN,
      status !== undefined && status >= 300 && status < 400
        ? `${upstream} answered with a redirect (${reason}), which the gateway does not follow: it may or may not have applied the request, and it was not sent again. ` +
            `Calling again with the same idempotencyKey sends it once more under the same upstream key, which an upstream that honours Idempotency-Key answers without applying it twice`
        : `${upstream} may or may not have applied the request (${reason}); it was not sent again because ${upstream} is not known to honour Idempotency-Key. ` +
            `Calling again with the same idempotencyKey sends it once more under the same upstream key: do so once you know it did not take effect, or when a duplicate is acceptable`,
      { upstream, reason, attempts, ...(status !== undefined ? { status } : {}), ...keys },
    );
  }

  /** The same error, carrying the caller's key and the upstream key to retry with. */
  withKeys(idempotencyKey: string, upstreamIdempotencyKey: string): UpstreamOutcomeUnknownError {
    return new UpstreamOutcomeUnknownError(this.upstream, this.reason, this.attempts, this.status, {
      idempotencyKey,
      upstreamIdempotencyKey,
    });
  }
}

/** What the idempotency record keeps of a 2xx answer the gateway could not read (UpstreamAnswerIncompleteError). */
export interface IncompleteAnswer {
  upstream: string;
  status: number;
  /** What could not be read, e.g. `the created id`. */
  missing: string;
  /** Where the gateway looked: its guesses, or the configured path. */
  lookedFor: string;
  /**
   * The variable that names the exact JSON path of the field; null where the spec names the field and no variable
   * moves it (the identification's `id`): a retry then reads the kept answer again as it was read the first time.
   */
  variable: string | null;
  /** The whole answer, secrets removed (src/cloud/wire.ts scrubResponse). */
  answer: unknown;
}

/** Longest text answer kept whole; a longer one is cut (it is kept for an operator to read, not parsed). */
const MAX_KEPT_TEXT = 4096;

/** An answer as an IncompleteAnswer keeps it: a text answer past MAX_KEPT_TEXT cut, anything else as it is. */
export function keptAnswerText(answer: unknown): unknown {
  return typeof answer === 'string' && answer.length > MAX_KEPT_TEXT ? `${answer.slice(0, MAX_KEPT_TEXT)}…` : answer;
}

/**
 * A 2xx answer is a creation even when the gateway cannot read its id (docs/contract.md, "Shapes a spec does not show"):
 * the answer is kept with the idempotency key, which stays bound to the request, and the app is told so, never that
 * nothing happened. A retry with the same key replays the kept answer (reading it again with the configured path),
 * without a second upstream request.
 */
export class UpstreamAnswerIncompleteError extends GatewayError {
  constructor(
    readonly incomplete: IncompleteAnswer,
    keys: { idempotencyKey?: string; upstreamIdempotencyKey?: string } = {},
  ) {
    const i = incomplete;
    super(
      ErrorCode.UPSTREAM_ANSWER_INCOMPLETE,
      `${i.upstream} answered ${i.status}, so it created the resource, but the gateway cannot read ${i.missing} from the answer (looked for ${i.lookedFor}). ` +
        `The answer is kept under this idempotency key; nothing is sent again. ` +
        (i.variable === null
          ? `Calling again with the same idempotencyKey reads the kept answer again, without creating another`
          : `Once ${i.variable} names the field's JSON path (e.g. data.uuid), ` +
            `calling again with the same idempotencyKey reads the kept answer and records the resource`),
      {
        upstream: i.upstream,
        status: i.status,
        missing: i.missing,
        variable: i.variable,
        answer: i.answer ?? null,
        ...keys,
      },
    );
  }

  /** The same error, carrying the caller's key and the upstream key the resource was created with. */
  withKeys(idempotencyKey: string, upstreamIdempotencyKey: string): UpstreamAnswerIncompleteError {
    return new UpstreamAnswerIncompleteError(this.incomplete, { idempotencyKey, upstreamIdempotencyKey });
  }
}

/**
 * A read answered 2xx in a shape the gateway cannot read (the verification results' list, found neither by the guesses
 * nor at the configured path): what the upstream knows of the ids asked is not known, so each entry carries this
 * rather than a null that would claim the upstream knows none. The operator is told the variable in the log; the app
 * only that the answer could not be read.
 */
export class UpstreamAnswerUnreadableError extends GatewayError {
  constructor(upstream: string, status: number) {
    super(
      ErrorCode.UPSTREAM_ANSWER_INCOMPLETE,
      `${upstream} answered ${status}, but its answer could not be read: this result is not known`,
      { upstream, status },
    );
  }
}

function describeBody(body: unknown): string {
  const text = refusalWords(body, true);
  // At most 200 characters of the upstream's words in the message, whichever field they come from: the whole answer
  // is the error's `upstreamError`.
  return text ? `: ${text.slice(0, 200)}` : '';
}

/** Fields of a refusal that may hold the upstream's words, in order of preference. */
const REFUSAL_WORD_FIELDS = ['details', 'message', 'error_description', 'error'] as const;

/**
 * The upstream's words in a refusal's body (its shape is not shown): a text body, or the first of REFUSAL_WORD_FIELDS
 * holding a non-empty text, or, once, the same inside an `error` object (`{ error: { message } }`). A field holding
 * anything else (a list of details, an empty text) is skipped.
 */
function refusalWords(body: unknown, top: boolean): string | null {
  if (typeof body === 'string') return body || null;
  if (!body || typeof body !== 'object' || Array.isArray(body)) return null;
  const b = body as Record<string, unknown>;
  for (const field of REFUSAL_WORD_FIELDS) {
    const v = b[field];
    if (typeof v === 'string' && v) return v;
  }
  return top && typeof b.error === 'object' ? refusalWords(b.error, false) : null;
}

/**
 * Codes of `extensions.warnings`: the operation succeeded and its data is returned, with a caveat the app
 * should see (e.g. the upstream created the resource but its answer lacked a field).
 */
export enum WarningCode {
  UPSTREAM_ANSWER_INCOMPLETE = 'UPSTREAM_ANSWER_INCOMPLETE',
}

/** One entry of `extensions.warnings`. */
export interface GatewayWarning {
  code: WarningCode;
  message: string;
  /** The response path it concerns, e.g. `["createIdentification", "identification"]`. */
  path?: readonly (string | number)[];
  [extension: string]: unknown;
}

/** Where in an operator's file a problem is: the file, and the line when it is known. */
export interface FilePlace {
  readonly file: string;
  readonly line: number | null;
}

/** A file an operator writes (a JWKS, the apps file, a manifest) that cannot be read or is wrong at `line`. */
export class FileError extends Error implements FilePlace {
  constructor(
    readonly file: string,
    readonly line: number | null,
    readonly reason: string,
    message = `${file}${line === null ? '' : ` line ${line}`}: ${reason}`,
  ) {
    super(message);
  }
}

/**
 * A configuration error: the variable, what is wrong with it (never its value when it may be a secret), and, for a
 * variable that names a file, the file and line (a reload answers and logs them; the message names them too).
 */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
    readonly place: FilePlace | null = null,
  ) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }

  /** The error of a bad file, named by its variable. */
  static ofFile(variable: string, err: FileError): ConfigError {
    return new ConfigError(variable, err.message, err);
  }
}

/**
 * A URL as errors, logs, the start-up line and stored checks show it: its user info (`https://user:password@host`)
 * cut up to the host's last `@` (a password may hold one), so that a password written into an address (an upstream's,
 * a JWKS's, PUBLIC_URL) is never printed.
 */
export function shownUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/?#]*@/i, '$1');
}
