// Fault injection shared by every sandbox server. A request first waits the added
// latency, then takes the next scripted fault that matches its path; only when the
// script is empty does the random rate apply.
import type { IncomingMessage, ServerResponse } from 'node:http';

import { requestPath, sendJson } from './http.js';

/**
 * - `'503'`, `'500'`, `'429'`: that status with `Retry-After: 1` and an error body.
 * - `'reset'`: the socket is destroyed before anything is processed (no effect upstream).
 * - `'reset-after'`: the request is processed (a resource may be created) and then the
 *   socket is destroyed instead of answering: the "work done, answer lost" case that
 *   idempotency keys exist for.
 * - `'timeout'`: no answer at all; the socket is held for `hangMs` (longer than any
 *   client timeout) and then destroyed.
 * - `'slow'`: the request is processed at once, and its answer is sent only after
 *   `slowMs`: a client whose attempt timeout is shorter gives up on work that was done.
 * - `'500-html'`: 500 with an HTML page (a proxy's error page), nothing processed.
 * - `'ok-not-json'`: the request is processed, and the success status comes with an
 *   HTML body instead of JSON.
 * - `'ok-no-id'`: the request is processed, and the success status comes with a JSON
 *   body that has no id.
 * - `'see-other'`: the request is processed, and a success is answered `303 See Other` instead
 *   ("created, see there"), its `Location` a path of the same sandbox, its body the answer's.
 */
export const FAULT_KINDS = [
  '503',
  '500',
  '429',
  'reset',
  'reset-after',
  'timeout',
  'slow',
  '500-html',
  'ok-not-json',
  'ok-no-id',
  'see-other',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** What the random rate picks from by default: the transport faults, none of the malformed answers. */
export const RANDOM_FAULT_KINDS: readonly FaultKind[] = ['503', '500', '429', 'reset', 'reset-after', 'timeout'];

/** An arbitrary error answer, e.g. `{ status: 402, body: {...} }`. */
export interface StatusFault {
  status: number;
  /** `Retry-After` in seconds. Default 1 for 429 and 5xx, none otherwise; `null` omits it. */
  retryAfterSeconds?: number | null;
  /** Default: the injector's `errorBody(status, path)`. */
  body?: unknown;
  headers?: Record<string, string>;
}

/**
 * The request is processed as usual (a resource may be created), then the body of its answer is replaced
 * by `alter(body)`, status unchanged: the "accepted, but the answer is not the one expected" case, e.g. a
 * 202 without `idShort`.
 */
export interface AlteredAnswer {
  alter: (body: unknown) => unknown;
}

export type FaultSpec = FaultKind | StatusFault | AlteredAnswer;

/** Exact path, a RegExp tested against the path, or a predicate. */
export type PathMatcher = string | RegExp | ((path: string, method: string) => boolean);

export interface FaultInjectorOptions {
  /** Probability (0..1) that a request gets a random fault while the script is empty. Default 0. */
  rate?: number;
  /** Added to every request before anything else. Default 0. */
  latencyMs?: number;
  /** Seed of the random choices, for reproducible runs. Default: random. */
  seed?: number;
  /** Faults the random rate picks from, uniformly. Default: `RANDOM_FAULT_KINDS`. */
  randomKinds?: readonly FaultKind[];
  /** How long a `'timeout'` fault holds the socket before destroying it. Default 10 minutes. */
  hangMs?: number;
  /** Body of injected error answers. Default `{ code, domain: 'sandbox', details }`. */
  errorBody?: (status: number, path: string) => unknown;
}

export interface InjectedFault {
  readonly method: string;
  readonly path: string;
  /** `'503'`, `'reset'`, …, `'status:402'` for a `StatusFault`, `'alter'` for an `AlteredAnswer`. */
  readonly fault: string;
  readonly scripted: boolean;
}

export type FaultOutcome =
  /**
   * Handle the request normally; if `resetAfter`, destroy the socket instead of answering; if `alter`, send
   * `alter(body)` instead of the body; `delayAnswerMs` delays the answer; `answerAs` replaces a success answer by a
   * malformed one.
   */
  | {
      readonly action: 'proceed';
      readonly resetAfter: boolean;
      readonly fault?: string;
      readonly alter?: (body: unknown) => unknown;
      readonly delayAnswerMs?: number;
      readonly answerAs?: 'not-json' | 'no-id' | 'see-other';
    }
  /** The injector answered with `status`; the request must not be processed. */
  | { readonly action: 'answered'; readonly fault: string; readonly status: number }
  /** The socket was destroyed, or is being held: the request must not be processed. */
  | { readonly action: 'reset' | 'hung'; readonly fault: string };

interface Scripted {
  readonly match: PathMatcher | undefined;
  readonly fault: FaultSpec;
}

const DEFAULT_HANG_MS = 10 * 60 * 1000;

export class FaultInjector {
  /** Changeable at any time, e.g. `faults.rate = 1`. */
  rate: number;
  latencyMs: number;
  /** Delay of the answer of a `'slow'` fault (30 s unless a test changes it); changeable at any time. */
  slowMs: number;
  /** Every fault injected so far, in order. */
  readonly injected: InjectedFault[] = [];

  readonly #script: Scripted[] = [];
  readonly #random: () => number;
  readonly #randomKinds: readonly FaultKind[];
  readonly #hangMs: number;
  readonly #errorBody: (status: number, path: string) => unknown;
  #held: { gate: Promise<void>; arrive(): void } | undefined;

  constructor(options: FaultInjectorOptions = {}) {
    this.rate = checkRate(options.rate ?? 0);
    this.latencyMs = options.latencyMs ?? 0;
    if (!(this.latencyMs >= 0)) throw new RangeError(`latencyMs must be >= 0, got ${options.latencyMs}`);
    this.#random = mulberry32(options.seed ?? Math.floor(Math.random() * 2 ** 32));
    this.#randomKinds = options.randomKinds ?? RANDOM_FAULT_KINDS;
    this.slowMs = 30_000;
    if (this.#randomKinds.length === 0) throw new RangeError('randomKinds must not be empty');
    this.#hangMs = options.hangMs ?? DEFAULT_HANG_MS;
    this.#errorBody = options.errorBody ?? defaultErrorBody;
  }

  /** The next requests, whatever their path, fail in this order. */
  enqueue(...faults: FaultSpec[]): this {
    for (const fault of faults) this.#script.push({ match: undefined, fault: checkFault(fault) });
    return this;
  }

  /** The next requests whose path matches fail in this order; other requests are not affected. */
  enqueueFor(match: PathMatcher, ...faults: FaultSpec[]): this {
    for (const fault of faults) this.#script.push({ match, fault: checkFault(fault) });
    return this;
  }

  /**
   * Holds every request that arrives from now on, before its latency and fault, until `release()`: a test
   * makes "the upstream is still working on the first request" a state it controls instead of a duration.
   * `arrived()` counts the requests held so far, for the test to wait for.
   */
  hold(): { arrived(): number; release(): void } {
    let open!: () => void;
    let arrived = 0;
    const held = { gate: new Promise<void>((resolve) => (open = resolve)), arrive: () => void arrived++ };
    this.#held = held;
    return {
      arrived: () => arrived,
      release: () => {
        if (this.#held === held) this.#held = undefined;
        open();
      },
    };
  }

  /** Scripted faults not yet used. */
  get pending(): number {
    return this.#script.length;
  }

  /** Drops the scripted faults not yet used (the random rate is unchanged). */
  clear(): void {
    this.#script.length = 0;
  }

  /** Chooses (and consumes) the fault for one request, if any. */
  next(method: string, path: string): { fault: FaultSpec; scripted: boolean } | undefined {
    if (this.#script.length > 0) {
      const index = this.#script.findIndex((s) => matches(s.match, path, method));
      if (index === -1) return undefined;
      const [taken] = this.#script.splice(index, 1);
      return { fault: taken!.fault, scripted: true };
    }
    if (this.rate > 0 && this.#random() < this.rate) {
      const kind = this.#randomKinds[Math.floor(this.#random() * this.#randomKinds.length)]!;
      return { fault: kind, scripted: false };
    }
    return undefined;
  }

  /**
   * Applies latency and the fault chosen for this request. Call it once per request,
   * after reading the body; stop unless the outcome is `proceed`.
   */
  async intercept(req: IncomingMessage, res: ServerResponse): Promise<FaultOutcome> {
    const held = this.#held;
    if (held) {
      held.arrive();
      await held.gate;
    }
    if (this.latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, this.latencyMs));
    const method = req.method ?? 'GET';
    const path = requestPath(req);
    const chosen = this.next(method, path);
    if (chosen === undefined) return { action: 'proceed', resetAfter: false };

    const { fault } = chosen;
    if (typeof fault === 'object' && 'alter' in fault) {
      this.injected.push({ method, path, fault: 'alter', scripted: chosen.scripted });
      return { action: 'proceed', resetAfter: false, fault: 'alter', alter: fault.alter };
    }
    const label = typeof fault === 'string' ? fault : `status:${fault.status}`;
    this.injected.push({ method, path, fault: label, scripted: chosen.scripted });

    if (fault === 'reset') {
      req.socket.destroy();
      return { action: 'reset', fault: label };
    }
    if (fault === 'reset-after') return { action: 'proceed', resetAfter: true, fault: label };
    if (fault === 'slow') return { action: 'proceed', resetAfter: false, fault: label, delayAnswerMs: this.slowMs };
    if (fault === 'ok-not-json') return { action: 'proceed', resetAfter: false, fault: label, answerAs: 'not-json' };
    if (fault === 'ok-no-id') return { action: 'proceed', resetAfter: false, fault: label, answerAs: 'no-id' };
    if (fault === 'see-other') return { action: 'proceed', resetAfter: false, fault: label, answerAs: 'see-other' };
    if (fault === '500-html') {
      const page =
        '<!DOCTYPE html><html><head><title>500 Internal Server Error</title></head><body><h1>Internal Server Error</h1></body></html>';
      res.writeHead(500, { 'content-type': 'text/html; charset=utf-8', 'content-length': Buffer.byteLength(page) });
      res.end(page);
      return { action: 'answered', fault: label, status: 500 };
    }
    if (fault === 'timeout') {
      const socket = req.socket;
      const timer = setTimeout(() => socket.destroy(), this.#hangMs);
      timer.unref();
      socket.once('close', () => clearTimeout(timer));
      return { action: 'hung', fault: label };
    }

    const status = typeof fault === 'string' ? Number(fault) : fault.status;
    const spec: StatusFault = typeof fault === 'string' ? { status } : fault;
    const retryAfter = spec.retryAfterSeconds === undefined ? defaultRetryAfter(status) : spec.retryAfterSeconds;
    const headers: Record<string, string> = { ...spec.headers };
    if (retryAfter !== null) headers['retry-after'] = String(retryAfter);
    sendJson(res, status, spec.body === undefined ? this.#errorBody(status, path) : spec.body, headers);
    return { action: 'answered', fault: label, status };
  }
}

function defaultRetryAfter(status: number): number | null {
  return status === 429 || status >= 500 ? 1 : null;
}

function defaultErrorBody(status: number): unknown {
  return { code: errorCodeForStatus(status), domain: 'sandbox', details: `injected fault: HTTP ${status}` };
}

/** SCREAMING_CASE code of an injected status, used by the default error body. */
export function errorCodeForStatus(status: number): string {
  switch (status) {
    case 429:
      return 'TOO_MANY_REQUESTS';
    case 500:
      return 'INTERNAL_ERROR';
    case 502:
      return 'BAD_GATEWAY';
    case 503:
      return 'SERVICE_UNAVAILABLE';
    case 504:
      return 'GATEWAY_TIMEOUT';
    default:
      return `HTTP_${status}`;
  }
}

function matches(match: PathMatcher | undefined, path: string, method: string): boolean {
  if (match === undefined) return true;
  if (typeof match === 'string') return match === path;
  if (match instanceof RegExp) return match.test(path);
  return match(path, method);
}

function checkRate(rate: number): number {
  if (!(rate >= 0 && rate <= 1)) throw new RangeError(`fault rate must be within 0..1, got ${rate}`);
  return rate;
}

function checkFault(fault: FaultSpec): FaultSpec {
  if (typeof fault === 'string') {
    if (!(FAULT_KINDS as readonly string[]).includes(fault)) {
      throw new RangeError(`unknown fault ${JSON.stringify(fault)}; expected one of ${FAULT_KINDS.join(', ')}`);
    }
    return fault;
  }
  if ('alter' in fault) {
    if (typeof fault.alter !== 'function') throw new RangeError('alter must be a function of the answer body');
    return fault;
  }
  if (!Number.isInteger(fault.status) || fault.status < 100 || fault.status > 599) {
    throw new RangeError(`fault status must be an HTTP status, got ${fault.status}`);
  }
  return fault;
}

// Small seeded PRNG (mulberry32): reproducible fault sequences for a given seed.
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
