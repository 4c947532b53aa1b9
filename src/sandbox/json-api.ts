// The request loop shared by the sandboxes (cloud, identification, verification): record the request, read a
// bounded body, let the fault injector act, route, answer JSON. Errors are `{ code, message }` by default, the cloud sandbox passes its `{ code, domain, details }` (the spec
// does not show an error body; this is the sandbox's choice).
import type { IncomingMessage, ServerResponse } from 'node:http';

import type { FaultInjector } from './faults.js';
import {
  BodyError,
  canonicalJson,
  DEFAULT_BODY_LIMIT_BYTES,
  flattenHeaders,
  parseJsonBody,
  readRawBody,
  requestPath,
  sendJson,
} from './http.js';

export interface RecordedRequest {
  readonly method: string;
  /** Path without the query string. */
  readonly path: string;
  /** Lower-cased names. Kept in memory only; never logged. */
  readonly headers: Readonly<Record<string, string>>;
  /** Parsed JSON; the raw text when it is not JSON; `undefined` when empty. */
  readonly body: unknown;
  /** Status answered; `null` when the connection was reset or hung (or is still being handled). */
  readonly status: number | null;
  /** Injected fault, if any (`'503'`, `'reset'`, `'status:409'`, …). */
  readonly fault?: string;
  /** True when the answer was an idempotent replay of an earlier creation. */
  readonly replayed: boolean;
  readonly receivedAt: Date;
}

export interface ApiAnswer {
  status: number;
  body?: unknown;
  /** Raw text answer (an HTML page) instead of JSON. */
  html?: string;
  headers?: Record<string, string>;
  /** The answer replays an earlier creation (recorded on the request). */
  replayed?: boolean;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface ParsedRequest {
  req: IncomingMessage;
  method: string;
  path: string;
  body: unknown;
  /** True when a body was sent and is not JSON. */
  malformed: boolean;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/**
 * The request loop of every sandbox: record the request, read a bounded body, let the fault injector
 * act, route, answer. `toAnswer` turns an error the route throws into an answer (each sandbox has its
 * own error body); `errorBody` shapes the loop's own 413.
 */
export function createJsonApiHandler(options: {
  faults: FaultInjector;
  route: (request: ParsedRequest) => ApiAnswer | Promise<ApiAnswer>;
  requests: RecordedRequest[];
  bodyLimitBytes?: number;
  maxRecorded?: number;
  errorBody?: (code: string, message: string, path: string) => unknown;
  toAnswer?: (error: unknown, path: string) => ApiAnswer | undefined;
}): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const limit = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  const maxRecorded = options.maxRecorded ?? 10_000;
  const errorBody = options.errorBody ?? ((code: string, message: string) => ({ code, message }));
  return async (req, res) => {
    const path = requestPath(req);
    const entry: Mutable<RecordedRequest> = {
      method: req.method ?? 'GET',
      path,
      headers: flattenHeaders(req),
      body: undefined,
      status: null,
      replayed: false,
      receivedAt: new Date(),
    };
    options.requests.push(entry);
    if (options.requests.length > maxRecorded) options.requests.splice(0, options.requests.length - maxRecorded);

    const answer = (a: ApiAnswer) => {
      entry.status = a.status;
      entry.replayed = a.replayed ?? false;
      if (a.html !== undefined) {
        res.writeHead(a.status, {
          'content-type': 'text/html; charset=utf-8',
          'content-length': Buffer.byteLength(a.html),
          ...a.headers,
        });
        res.end(a.html);
        return;
      }
      sendJson(res, a.status, a.body ?? null, a.headers);
    };

    let raw: Buffer;
    try {
      raw = await readRawBody(req, limit);
    } catch (error) {
      if (error instanceof BodyError && error.reason === 'too_large') {
        res.setHeader('connection', 'close');
        answer({ status: 413, body: errorBody('PAYLOAD_TOO_LARGE', `(body): larger than ${limit} bytes`, path) });
      }
      return;
    }
    let body: unknown;
    let malformed = false;
    try {
      body = parseJsonBody(raw);
    } catch {
      body = raw.toString('utf8');
      malformed = true;
    }
    entry.body = body;

    const outcome = await options.faults.intercept(req, res);
    if (outcome.action !== 'proceed') {
      entry.fault = outcome.fault;
      if (outcome.action === 'answered') entry.status = outcome.status;
      return;
    }
    if (outcome.fault !== undefined) entry.fault = outcome.fault;

    let result: ApiAnswer;
    try {
      result = await options.route({ req, method: entry.method, path, body, malformed });
    } catch (error) {
      const mapped =
        error instanceof ApiError
          ? { status: error.status, body: errorBody(error.code, error.message, path) }
          : options.toAnswer?.(error, path);
      if (!mapped) throw error;
      result = mapped;
    }
    if (outcome.alter && result.html === undefined) result = { ...result, body: outcome.alter(result.body) };
    if (outcome.resetAfter) {
      // The work is done (and remembered under its idempotency key, if any); only the answer is lost.
      req.socket.destroy();
      return;
    }
    if (outcome.answerAs !== undefined && result.status >= 200 && result.status < 300) {
      // The work is done; the answer that says so is unusable (a proxy page, or JSON without the id), or a redirect to
      // where the created resource would be read.
      result =
        outcome.answerAs === 'not-json'
          ? { status: result.status, html: '<!DOCTYPE html><html><body>Created</body></html>' }
          : outcome.answerAs === 'see-other'
            ? { status: 303, headers: { ...result.headers, location: `${path}/see-other` }, body: result.body }
            : { status: result.status, body: { status: 'created' } };
    }
    if (outcome.delayAnswerMs !== undefined) {
      const delay = outcome.delayAnswerMs;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delay);
        timer.unref();
        req.socket.once('close', () => {
          clearTimeout(timer);
          resolve();
        });
      });
      if (req.socket.destroyed) return;
    }
    answer(result);
  };
}

/** `Authorization: Bearer <token>` with a token of `accepted`, else 401. */
export function requireBearer(req: IncomingMessage, accepted: readonly string[]): void {
  const value = req.headers.authorization ?? '';
  const m = /^Bearer\s+(\S+)$/i.exec(value.trim());
  if (!m) throw new ApiError(401, 'UNAUTHORIZED', 'access token absent: send Authorization: Bearer <ACCESS_TOKEN>');
  if (!accepted.includes(m[1]!)) throw new ApiError(401, 'UNAUTHORIZED', 'access token invalid');
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

export function isAbsoluteHttpUrl(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  try {
    const u = new URL(value);
    return u.protocol === 'http:' || u.protocol === 'https:';
  } catch {
    return false;
  }
}

/** Idempotency-Key replay shared by the identity sandboxes: same key and body, same answer; other body, 409. */
export function withIdempotency(
  replays: Map<string, { fingerprint: string; answer: ApiAnswer }>,
  key: string | undefined,
  body: unknown,
  create: (body: unknown) => ApiAnswer,
): ApiAnswer {
  if (key === undefined) return create(body);
  const fingerprint = canonicalJson(body);
  const prior = replays.get(key);
  if (prior) {
    if (prior.fingerprint !== fingerprint)
      throw new ApiError(409, 'IDEMPOTENCY_KEY_CONFLICT', 'Idempotency-Key already used with another request');
    return { ...prior.answer, headers: { 'idempotent-replayed': 'true' } };
  }
  const answer = create(body);
  replays.set(key, { fingerprint, answer });
  return answer;
}
