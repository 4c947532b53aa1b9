import type { IncomingHttpHeaders } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import pRetry, { AbortError } from 'p-retry';
import type { Dispatcher } from 'undici';
import undiciUtil from 'undici/lib/core/util.js';
import Pool from 'undici/lib/dispatcher/pool.js';

import {
  ErrorCode,
  UpstreamCircuitOpenError,
  UpstreamOutcomeUnknownError,
  UpstreamRejectedError,
  UpstreamUnavailableError,
} from '../errors.js';
import { SECRET_KEY, type Logger, type RequestLog } from '../logger.js';
import type { Metrics } from '../metrics.js';
import { TRACING_OFF, type SpanHandle, type Tracing } from '../telemetry/tracing.js';
import { REFUSED, type CircuitBreaker } from './breaker.js';
import { masked } from './masked.js';

export interface UpstreamHttpOptions {
  /** Name in metrics, logs and error extensions: `cloud`, `verification`, `identification`, `rfm`. */
  name: string;
  /** Base URL; may carry a path prefix that every request path is appended to. */
  baseUrl: string;
  /**
   * Time limit of one attempt: headers and body each. undici's body timeout is the longest pause between two pieces of
   * the body; an answer that keeps coming in small pieces is cut once its body has taken longer than this.
   */
  timeoutMs: number;
  /**
   * The longest answer body read, in bytes (default 16 MiB). A longer one is cut off where it passes this: its attempt
   * fails as UPSTREAM_ANSWER_TOO_LARGE, an answer that could not be read, so its outcome is unknown.
   */
  maxAnswerBytes?: number;
  /** Total time one call may spend on retries. */
  retryBudgetMs: number;
  maxRetries: number;
  connections?: number;
  metrics: Metrics;
  logger: Logger;
  /** One CLIENT span per call (retries included), its `traceparent` sent upstream on every attempt. */
  tracing?: Tracing;
  /**
   * Whether the upstream is known to honour `Idempotency-Key`, so that a request whose outcome is unknown
   * (a timeout or reset after it was sent, a 5xx other than 503 with Retry-After) may be sent again on its
   * own. Default true (the cloud API documents the key). False for the identity endpoints unless
   * IDEMPOTENT_UPSTREAMS names them: such a failure is then UPSTREAM_OUTCOME_UNKNOWN at once
   * (docs/decisions/011).
   */
  retryUnknownOutcome?: boolean;
  /**
   * The upstream's circuit breaker (docs/decisions/056), consulted before every attempt, inside the retry loop: an
   * open circuit ends the retries at once with UPSTREAM_UNAVAILABLE (`sent: false`). None: every attempt goes out.
   */
  breaker?: CircuitBreaker | undefined;
}

export interface UpstreamRequest {
  method: 'GET' | 'POST';
  /** Path below the base URL, starting with `/`. */
  path: string;
  /** Low-cardinality route name for metrics, e.g. `POST /ocs/v1/services`. */
  route: string;
  /**
   * An `Idempotency-Key` among them makes the request a creation: a redirect (3xx) answering it is an unknown outcome
   * (UPSTREAM_OUTCOME_UNKNOWN), not a refusal, since the upstream may have applied it.
   */
  headers?: Record<string, string>;
  body?: unknown;
  /**
   * Called before each attempt for headers that may change between attempts (a refreshed token), with the request's
   * `log` (for what fetching a token writes). Runs again after `onUnauthorized` returns true. Headers known at once (a
   * configured token) may come without a promise: then the attempt goes out in the same turn.
   */
  authorize?: (log: RequestLog | undefined) => Record<string, string> | Promise<Record<string, string>>;
  /** On a 401, may refresh credentials and return true to retry once at once. */
  onUnauthorized?: () => Promise<boolean>;
  /** Maps a 4xx status (a 3xx, on a request that is no creation) to an error code other than UPSTREAM_REJECTED. */
  rejectCode?: (status: number) => ErrorCode;
  /** A lookup with no effect upstream (verification results): repeated after any transient failure. */
  readOnly?: boolean;
  /**
   * The request this call serves: its failed attempts and an unknown outcome are logged with its logger, naming its
   * request id. None (a call no request made): the client's own logger.
   */
  log?: RequestLog | undefined;
}

export interface UpstreamResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Parsed JSON when the upstream sent JSON, the text otherwise, null when empty. */
  body: unknown;
}

/**
 * What a transient failure says about the request:
 * - `not-sent`: it provably never reached the upstream (no connection was made);
 * - `not-processed`: the upstream said it did not process it (429, 503 with Retry-After, RFC 9110 §15.6.4);
 * - `unknown`: it may have been applied (a timeout or reset after it was sent, any other 5xx).
 */
type Outcome = 'not-sent' | 'not-processed' | 'unknown';

/** An attempt that got no answer in UPSTREAM_TIMEOUT (headers or body). */
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
/**
 * Failures before a connection existed: nothing was sent. The host name did not resolve (ENOTFOUND: no such name;
 * EAI_AGAIN, EAI_FAIL: the resolver failed), or the connection could not be made.
 */
const NOT_SENT_CODES = new Set([
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'ECONNREFUSED',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);
/**
 * Failures on a connection the request may have been written to: the upstream may have acted. An answer that is not
 * HTTP (undici's HTTPParserError, its code `HPE_…`, or PARSER_FAILURE when it names none) or whose head is too large to
 * read is one: the request went out before it came.
 */
const UNKNOWN_CODES = new Set([
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_HEADERS_OVERFLOW',
]);
/** The longest answer body read when the options name no other (UPSTREAM_MAX_ANSWER_BYTES's default). */
const DEFAULT_MAX_ANSWER_BYTES = 16 * 1024 * 1024;
/** The reason of an answer undici could not parse as HTTP/1.1 when its error names no llhttp code. */
const PARSER_FAILURE = 'HPE_ERROR';

/** One call's state across its attempts. */
interface Call {
  readonly req: UpstreamRequest;
  readonly inject: ((headers: Record<string, string>) => void) | undefined;
  readonly span: SpanHandle | undefined;
  /** performance.now() when the call began: the retry budget counts from here. */
  readonly started: number;
  attempts: number;
  refreshedAuth: boolean;
  /** Whether a failure whose outcome is unknown may be repeated (see retryUnknownOutcome). */
  readonly repeatUnknown: boolean;
  /** Set once an attempt of this call failed in a way that may have taken effect upstream. */
  mayHaveApplied: boolean;
}

/** The breaker refused an attempt: nothing was sent. */
class CircuitRefusal extends Error {
  constructor(
    readonly circuit: 'open' | 'half-open',
    readonly retryAfter: number,
  ) {
    super('circuit open');
  }
}

class TransientFailure extends Error {
  constructor(
    readonly reason: string,
    readonly outcome: Outcome,
    readonly status?: number,
    readonly retryAfterMs?: number,
  ) {
    super(reason);
  }
}

/**
 * One upstream: a keep-alive undici Pool, a timeout per attempt and retries of transient failures
 * (connection errors, timeouts, 429, 5xx) with exponential backoff and jitter inside a time budget.
 * Callers resend the same request, so the same Idempotency-Key, on every attempt.
 */
export class UpstreamHttp {
  private readonly pool: InstanceType<typeof Pool>;
  private readonly basePath: string;
  /** host:port only: a base URL may carry credentials, and a span attribute must not. */
  private readonly host: string;
  private readonly tracing: Tracing;
  private readonly maxAnswerBytes: number;

  /** The upstream's name when it is not known to honour Idempotency-Key (see retryUnknownOutcome); else undefined. */
  get unrepeatable(): string | undefined {
    return this.options.retryUnknownOutcome === false ? this.options.name : undefined;
  }

  constructor(private readonly options: UpstreamHttpOptions) {
    this.maxAnswerBytes = options.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES;
    const url = new URL(options.baseUrl);
    this.basePath = url.pathname.replace(/\/+$/, '');
    this.host = url.host;
    this.tracing = options.tracing ?? TRACING_OFF;
    this.pool = new Pool(url.origin, {
      connections: options.connections ?? 64,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      keepAliveTimeout: 10_000,
    });
  }

  get name(): string {
    return this.options.name;
  }

  request(req: UpstreamRequest): Promise<UpstreamResponse> {
    // Without tracing, the call is `perform` itself: no async layer that would only pass its promise on.
    return this.tracing.enabled ? this.traced(req) : this.perform(req, undefined, undefined);
  }

  /** The call inside its CLIENT span. */
  private async traced(req: UpstreamRequest): Promise<UpstreamResponse> {
    // Attributes name the route template, never the path (a path may hold a token) or any header or body.
    const attributes = {
      'gateway.upstream': this.options.name,
      'http.request.method': req.method,
      'url.template': req.route,
      'server.address': this.host,
    };
    return this.tracing.client(
      `${req.method} ${this.options.name} ${req.route.replace(/^[A-Z]+ /, '')}`,
      attributes,
      async (span, inject) => {
        try {
          const res = await this.perform(req, inject, span);
          span.setAttribute('http.response.status_code', res.status);
          return res;
        } catch (err) {
          const code = (err as { extensions?: { code?: unknown; status?: unknown } }).extensions;
          if (typeof code?.code === 'string') span.fail(code.code);
          if (typeof code?.status === 'number') span.setAttribute('http.response.status_code', code.status);
          throw err;
        }
      },
    );
  }

  private async perform(
    req: UpstreamRequest,
    inject: ((headers: Record<string, string>) => void) | undefined,
    span: SpanHandle | undefined,
  ): Promise<UpstreamResponse> {
    const call: Call = {
      req,
      inject,
      span,
      started: performance.now(),
      attempts: 0,
      refreshedAuth: false,
      repeatUnknown: req.readOnly === true || this.options.retryUnknownOutcome !== false,
      mayHaveApplied: false,
    };
    try {
      try {
        // The first attempt runs on its own, with no closure made for it: p-retry's set-up (its options copied and
        // validated, its loop) cost about as much as the rest of this method on every call, and most calls succeed
        // at once.
        return await this.attempt(call);
      } catch (first) {
        // Refused by the circuit, or not to be repeated: no retry loop to set up.
        if (first instanceof AbortError) throw first.originalError;
        // From the first failure on, p-retry decides as if it had run that attempt itself: it gets the failure
        // first, with the budget that is left, then retries.
        let replayed = false;
        return await pRetry(
          () => {
            if (replayed) return this.attempt(call);
            replayed = true;
            throw first;
          },
          this.retryOptions(call, Math.max(0, this.options.retryBudgetMs - (performance.now() - call.started))),
        );
      }
    } catch (error) {
      if (error instanceof TransientFailure)
        throw new UpstreamUnavailableError(this.options.name, error.reason, call.attempts, error.status);
      if (error instanceof AbortError) throw error.originalError;
      // Given up by `close` at shutdown: the upstream may have acted, as after any attempt cut short (not a bug).
      if (failureCode(error) === 'UND_ERR_DESTROYED')
        throw new UpstreamUnavailableError(this.options.name, 'the gateway is shutting down', call.attempts);
      throw error;
    }
  }

  /**
   * One attempt of `call` (and its repetition once after a 401 that refreshed the credentials), its failure turned into
   * what the retry loop expects (AbortError: not to be retried).
   */
  private async attempt(call: Call): Promise<UpstreamResponse> {
    const { req } = call;
    try {
      call.attempts += 1;
      call.span?.setAttribute('gateway.upstream.attempts', call.attempts);
      const res = await this.sendThrough(req, call.inject);
      if (res.status === 401 && req.onUnauthorized && !call.refreshedAuth) {
        call.refreshedAuth = true;
        if (await req.onUnauthorized()) {
          call.attempts += 1;
          const again = await this.sendThrough(req, call.inject);
          return this.classify(call, again);
        }
      }
      return this.classify(call, res);
    } catch (error) {
      const { name, metrics } = this.options;
      if (error instanceof CircuitRefusal) {
        // The refused attempt was counted before it was refused; it never went out.
        call.attempts -= 1;
        throw new AbortError(
          new UpstreamCircuitOpenError(
            name,
            error.circuit,
            error.retryAfter,
            call.mayHaveApplied ? null : false,
            call.attempts,
          ),
        );
      }
      if (error instanceof TransientFailure && error.outcome === 'unknown') call.mayHaveApplied = true;
      // Not repeated on its own: the upstream may have acted and is not known to honour the key.
      if (error instanceof TransientFailure && error.outcome === 'unknown' && !call.repeatUnknown) {
        const route = req.route;
        this.loggerOf(req).warn(
          { upstream: name, route, reason: error.reason, attempt: call.attempts },
          'upstream outcome unknown; not repeated',
        );
        metrics.upstreamOutcomeUnknown.inc({ upstream: name, route });
        throw new AbortError(new UpstreamOutcomeUnknownError(name, error.reason, call.attempts, error.status));
      }
      // A refusal of a repetition: an earlier attempt may have been applied, whatever this one was answered.
      if (call.mayHaveApplied && error instanceof AbortError && error.originalError instanceof UpstreamRejectedError)
        error.originalError.mayHaveApplied = true;
      throw error;
    }
  }

  /** p-retry's options for the attempts after the first failure of `call`. */
  private retryOptions(call: Call, budgetMs: number) {
    const { name, metrics } = this.options;
    const route = call.req.route;
    return {
      retries: this.options.maxRetries,
      factor: 2,
      // The first backoff delay is 100 ms, doubling per retry with jitter (x1..x2), at most 2 s.
      minTimeout: 100,
      maxTimeout: 2_000,
      randomize: true,
      maxRetryTime: budgetMs,
      shouldRetry: ({ error }: { error: Error }) => error instanceof TransientFailure,
      onFailedAttempt: async ({ error, retriesLeft }: { error: Error; retriesLeft: number }) => {
        if (!(error instanceof TransientFailure)) return;
        if (retriesLeft > 0) metrics.upstreamRetries.inc({ upstream: name, route, reason: error.reason });
        this.loggerOf(call.req).warn(
          { upstream: name, route, reason: error.reason, attempt: call.attempts, retriesLeft },
          'upstream attempt failed',
        );
        if (error.retryAfterMs !== undefined && retriesLeft > 0) {
          const left = this.options.retryBudgetMs - (performance.now() - call.started);
          // Retry-After beyond the budget: give up now rather than sleep and fail anyway.
          if (error.retryAfterMs > left) throw error;
          await sleep(error.retryAfterMs);
        }
      },
    };
  }

  /** What writes `req`'s lines: the logger of the request it serves (read only now: RequestLog), else the client's. */
  private loggerOf(req: UpstreamRequest): Logger {
    return req.log?.logger ?? this.options.logger;
  }

  /** One attempt through the breaker: refused at once while the circuit is open, its outcome recorded otherwise. */
  private async sendThrough(
    req: UpstreamRequest,
    inject?: (headers: Record<string, string>) => void,
  ): Promise<UpstreamResponse> {
    const breaker = this.options.breaker;
    if (breaker === undefined) return this.send(req, inject);
    const passage = breaker.pass();
    if (passage === REFUSED)
      throw new CircuitRefusal(breaker.state === 'open' ? 'open' : 'half-open', breaker.retryAfterSeconds());
    let res: UpstreamResponse;
    const answeredAtStart = breaker.answered;
    try {
      res = await this.send(req, inject);
    } catch (error) {
      // A timeout counts only when the upstream answered nothing else meanwhile (recordTimeout); another transport
      // error counts; a failure before anything was sent (the cloud token could not be had: that is the token
      // endpoint's own breaker's business) does not.
      if (error instanceof TransientFailure && TIMEOUT_CODES.has(error.reason))
        breaker.recordTimeout(passage, answeredAtStart);
      else breaker.record(passage, error instanceof TransientFailure || error instanceof AbortError ? true : null);
      throw error;
    }
    // 502/503/504 say the upstream (or what stands before it) is unhealthy; 429 says nothing either way (it is
    // honoured through Retry-After, never counted); any other answer is the upstream answering.
    const status = res.status;
    breaker.record(passage, status === 429 ? null : status === 502 || status === 503 || status === 504);
    return res;
  }

  private async send(
    req: UpstreamRequest,
    inject?: (headers: Record<string, string>) => void,
  ): Promise<UpstreamResponse> {
    // Not `{ ...req.headers }`: on Node 20 a property added to a spread copy makes a new hidden class in the old
    // generation on every call (~165 B), which only a mark-compact takes back (docs/decisions/120).
    const headers: Record<string, string> = Object.assign({}, req.headers);
    if (req.authorize) {
      const auth = req.authorize(req.log);
      Object.assign(headers, auth instanceof Promise ? await auth : auth);
    }
    inject?.(headers);
    const body = req.body === undefined ? undefined : JSON.stringify(req.body);
    if (body !== undefined && headers['content-type'] === undefined && !hasContentType(headers)) {
      headers['content-type'] = 'application/json';
    }
    // One observation at the end with every label: no timer closure, no merge of label objects.
    const started = performance.now();
    let res: Answer;
    try {
      res = await new Promise<Answer>((resolve, reject) =>
        this.pool.dispatch(
          { method: req.method, path: this.basePath + req.path, headers, body },
          new Exchange(resolve, reject, this.options.timeoutMs, this.maxAnswerBytes),
        ),
      );
    } catch (failure) {
      if (failure instanceof BodyFailure) {
        // The answer's head had come: its body failed (a reset, the body timeout).
        const code = (failure.error as { code?: string }).code ?? 'BODY_ERROR';
        this.observe(req, code, started);
        throw new TransientFailure(code, 'unknown');
      }
      const code = failureCode(failure);
      this.observe(req, code, started);
      if (NOT_SENT_CODES.has(code)) throw new TransientFailure(code, 'not-sent');
      if (UNKNOWN_CODES.has(code) || code.startsWith('HPE_')) throw new TransientFailure(code, 'unknown');
      throw new AbortError(failure instanceof Error ? failure : new Error(String(failure)));
    }
    this.observe(req, String(res.status), started);
    const parsed = parseBody(res.text, res.headers['content-type']);
    // An answer may quote the gateway's own credential (an echoed Authorization header): a refusal's reaches the app's
    // error and the log, a taken answer's is stored. A refusal is masked in every form an upstream may quote it in; a
    // taken answer, only when its text holds the credential as sent (a search of the text, not a walk of the answer).
    let answer = parsed;
    if (res.status >= 300) answer = masked(parsed, credentialsIn(headers));
    else if (res.text.length > 0) {
      const quoted = credentialsIn(headers).filter((c) => res.text.includes(c));
      if (quoted.length > 0) answer = masked(parsed, quoted);
    }
    return { status: res.status, headers: res.headers, body: answer };
  }

  /** The duration of one attempt, from `started` (performance.now()) to now, under its outcome. */
  private observe(req: UpstreamRequest, status: string, started: number): void {
    this.options.metrics.upstreamDuration.observe(
      [this.options.name, req.route, status],
      (performance.now() - started) / 1000,
    );
  }

  private classify(call: Call, res: UpstreamResponse): UpstreamResponse {
    const req = call.req;
    if (res.status >= 200 && res.status < 300) return res;
    if (res.status === 429 || res.status >= 500) {
      const retryAfter = retryAfterMs(res.headers['retry-after']);
      const outcome: Outcome =
        res.status === 429 || (res.status === 503 && retryAfter !== undefined) ? 'not-processed' : 'unknown';
      throw new TransientFailure(`HTTP ${res.status}`, outcome, res.status, retryAfter);
    }
    if (res.status < 400 && req.readOnly !== true && carriesIdempotencyKey(req.headers)) {
      // A redirect answering a creation ("303 See Other": created, see there) is no refusal: the upstream may have
      // applied the request. It is not followed (its Location may be another host, which the gateway's credentials
      // must not reach) nor repeated (the same request would be answered the same way): the outcome is unknown, and
      // the idempotency layer keeps the key bound to the request, so that the app's retry sends the same key again.
      const { name, metrics } = this.options;
      // The status and the upstream only: the answer may quote the request, and its Location may hold a token.
      this.loggerOf(req).warn(
        { upstream: name, route: req.route, status: res.status, attempt: call.attempts },
        'upstream answered a creation with a redirect, not followed; its outcome is unknown and it was not repeated',
      );
      metrics.upstreamOutcomeUnknown.inc({ upstream: name, route: req.route });
      throw new AbortError(new UpstreamOutcomeUnknownError(name, `HTTP ${res.status}`, call.attempts, res.status));
    }
    const code = req.rejectCode?.(res.status) ?? ErrorCode.UPSTREAM_REJECTED;
    throw new AbortError(new UpstreamRejectedError(this.options.name, res.status, res.body, code));
  }

  /**
   * At shutdown, after the drain: a call still in flight is one whose request the drain's deadline cut, so it is
   * given up rather than waited for (its idempotency record, still claimed, lets the app's retry resolve it exactly
   * once: docs/operations.md). Undici's `close` would wait for it, past the deadline of the exit.
   */
  async close(): Promise<void> {
    await this.pool.destroy();
  }
}

/** An upstream's answer as read off the wire: its status, its headers as undici's `request` gives them, its text. */
interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/** A failure after the answer's head had come: its body could not be read. */
class BodyFailure {
  constructor(readonly error: unknown) {}
}

/**
 * One exchange through undici's `dispatch`, read as undici's `request` then `body.text()` read it (the same headers
 * object, the same text: a UTF-8 byte order mark left out) without what those make per call for a caller that
 * wants the whole text: an AsyncResource, a Readable stream for the body, its consumer and its promise. A failure
 * before the head is undici's error as it is; after it, a BodyFailure holding it.
 */
class Exchange implements Dispatcher.DispatchHandler {
  private status = 0;
  private headers: IncomingHttpHeaders | null = null;
  private readonly chunks: Buffer[] = [];
  private length = 0;
  private abort: ((reason: Error) => void) | null = null;
  /** performance.now() past which the body has taken too long (set when the head has come). */
  private bodyDeadline = 0;

  constructor(
    private readonly resolve: (answer: Answer) => void,
    private readonly reject: (error: unknown) => void,
    private readonly timeoutMs: number,
    private readonly maxBytes: number,
  ) {}

  onConnect(abort: (reason: Error) => void): void {
    this.abort = abort;
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[]): boolean {
    // An informational answer (1xx) is not the answer: `request` passes it to onInfo, which is not given.
    if (statusCode < 200) return true;
    this.status = statusCode;
    this.headers = undiciUtil.parseHeaders(rawHeaders) as IncomingHttpHeaders;
    this.bodyDeadline = performance.now() + this.timeoutMs;
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.length += chunk.length;
    // Not gathered past the bound: an answer of any length would otherwise be held in memory whole.
    if (this.length > this.maxBytes) {
      this.abort?.(codedError('UPSTREAM_ANSWER_TOO_LARGE', `the answer body is longer than ${this.maxBytes} bytes`));
      return false;
    }
    this.chunks.push(chunk);
    // undici's body timeout restarts with every piece: a body that drips never ends on it. Checked as each piece comes
    // (no timer per call): a body cut off here took at most its limit and one of undici's pauses.
    if (performance.now() > this.bodyDeadline) {
      this.abort?.(codedError('UND_ERR_BODY_TIMEOUT', 'the answer body took longer than the upstream timeout'));
      return false;
    }
    return true;
  }

  onComplete(): void {
    const { chunks, length } = this;
    let text = '';
    if (chunks.length > 0 && length > 0) {
      const buffer = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length);
      const bom = buffer.length > 2 && buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf;
      text = buffer.toString('utf8', bom ? 3 : 0);
    }
    this.resolve({ status: this.status, headers: this.headers!, text });
  }

  onError(error: Error): void {
    this.reject(this.headers === null ? error : new BodyFailure(error));
  }
}

/** An error that carries `code`, as undici's and the system's do. */
function codedError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

/**
 * The code of a failure before the answer's head: the system's (ECONNREFUSED, ENOTFOUND), undici's (UND_ERR_…), or
 * llhttp's for an answer that is not HTTP (HPE_…). Only the code reaches the answer, never the driver's sentence.
 */
function failureCode(failure: unknown): string {
  const { code, name } = (failure ?? {}) as { code?: unknown; name?: unknown };
  if (typeof code === 'string') return code;
  return name === 'HTTPParserError' ? PARSER_FAILURE : 'ERROR';
}

/**
 * The credentials among the headers of a request: each value of a header SECRET_KEY names (but the idempotency key,
 * which the app knows), whole and without its scheme (`Bearer <token>`: the token as well).
 */
function credentialsIn(headers: Record<string, string>): string[] {
  const found: string[] = [];
  for (const name in headers) {
    const value = headers[name];
    if (!value || !holdsCredential(name)) continue;
    found.push(value);
    const credential = /^[A-Za-z][\w.+-]*\s+(\S.*)$/.exec(value)?.[1];
    // A credential so short it would be found by chance in any text is masked only with its scheme.
    if (credential && credential.length >= 6) found.push(credential);
  }
  return found;
}

/** Header names already asked of `holdsCredential`: a client sends the same few on every call. Bounded. */
const credentialHeaders = new Map<string, boolean>();

/** Whether a header of this name holds a credential: SECRET_KEY names it, and it is not the idempotency key. */
function holdsCredential(name: string): boolean {
  let holds = credentialHeaders.get(name);
  if (holds === undefined) {
    holds = SECRET_KEY.test(name) && !/^idempotency-key$/i.test(name);
    if (credentialHeaders.size < 256) credentialHeaders.set(name, holds);
  }
  return holds;
}

/** Whether `headers` carry an Idempotency-Key (in any letter case): the request is a creation. */
function carriesIdempotencyKey(headers: Record<string, string> | undefined): boolean {
  for (const h in headers) if (/^idempotency-key$/i.test(h)) return true;
  return false;
}

/** Whether `headers` name a content type in any letter case. */
function hasContentType(headers: Record<string, string>): boolean {
  for (const h in headers) if (h.toLowerCase() === 'content-type') return true;
  return false;
}

function parseBody(text: string, contentType: string | string[] | undefined): unknown {
  if (!text) return null;
  const type = Array.isArray(contentType) ? contentType[0] : contentType;
  if (type?.includes('json') || /^[[{]/.test(text.trimStart())) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text) as unknown;
    } catch {
      return text;
    }
    // A body cannot nest deeper than half its length: most answers are not even looked into.
    return text.length > 2 * MAX_ANSWER_DEPTH && nestsDeeper(parsed, MAX_ANSWER_DEPTH)
      ? cutBelow(parsed, MAX_ANSWER_DEPTH)
      : parsed;
  }
  return text;
}

/**
 * Deepest nesting of arrays and objects kept of an answer. JSON.parse reads any depth, but what reads an answer after
 * it (the secret scrubbers, the masks, the store's JSON.stringify) walks it recursively: an answer nested thousands of
 * levels deep would overflow the stack there, after the upstream acted. No answer the gateway reads nests so deep.
 */
const MAX_ANSWER_DEPTH = 64;
/** What stands in an answer for a value nested deeper than MAX_ANSWER_DEPTH. */
const CUT = `(nested deeper than ${MAX_ANSWER_DEPTH} levels: not kept)`;

/** Whether `value` nests arrays and objects deeper than `max`. Iterative: a deep value cannot overflow the stack. */
function nestsDeeper(value: unknown, max: number): boolean {
  if (value === null || typeof value !== 'object') return false;
  const containers: object[] = [value];
  const depths: number[] = [1];
  while (containers.length > 0) {
    const container = containers.pop()!;
    const depth = depths.pop()!;
    for (const key in container) {
      const child = (container as Record<string, unknown>)[key];
      if (child === null || typeof child !== 'object') continue;
      if (depth === max) return true;
      containers.push(child);
      depths.push(depth + 1);
    }
  }
  return false;
}

/** `value` with each array or object below `levels` levels replaced by CUT (recursive, at most `levels` deep). */
function cutBelow(value: unknown, levels: number): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (levels === 0) return CUT;
  if (Array.isArray(value)) return value.map((item: unknown) => cutBelow(item, levels - 1));
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    // Defined, not assigned: a member named `__proto__` stays a member, as JSON.parse made it.
    Object.defineProperty(out, key, {
      value: cutBelow(item, levels - 1),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

/** Retry-After as delta-seconds or an HTTP date (RFC 9110 §10.2.3), in milliseconds. */
export function retryAfterMs(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const date = Date.parse(v);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}
