import { pino, symbols, type DestinationStream, type Logger } from 'pino';

import { shownUrl } from './errors.js';

export type { Logger };

/**
 * Names of keys whose values are secrets, wherever they are: the one list. Each log line has them redacted at any
 * depth (`redacted`); in a cloud request they are what a plan shows masked and what is masked where an upstream quotes
 * it (src/cloud/wire.ts maskSecrets, secretsOf). API keys and upstream tokens travel in headers, passwords and tokens
 * in bodies (cloud users, VM users, mobile-ID notifications, the cloud credentials). Compared without regard to case,
 * so `accessToken` is `access_token`'s camelCase.
 */
export const SECRET_KEY = new RegExp(
  `^(?:${[
    'password',
    'passwd',
    'passphrase',
    'secret',
    'client_?secret',
    'private_?key',
    'token',
    '(?:access|id|refresh|client_?notification)_?token',
    'authorization',
    'proxy-authorization',
    'cookie',
    'set-cookie',
    'credentials',
    '(?:x-)?api[-_]?key',
    'idempotency-key',
  ].join('|')})$`,
  'i',
);

const CENSOR = '[redacted]';
const CIRCULAR = '[Circular]';

/**
 * `value` with the value of every key SECRET_KEY names replaced by `[redacted]`, at any depth (pino's redact paths
 * cannot say "any depth"). Copied only along the way to a redacted key, keeping each copy's prototype and property
 * descriptors (an Error stays an Error, with its message and stack); `value` itself when it holds none, which is
 * nearly every line. `within`: the objects being walked, so a cycle ends.
 */
function redacted<T>(value: T, within: object[] = []): T {
  if (value === null || typeof value !== 'object' || ArrayBuffer.isView(value)) return value;
  // What pino writes for a cycle too; the object itself would be the original, secrets and all.
  if (within.includes(value)) return CIRCULAR as T;
  within.push(value);
  let changed: [string, unknown][] | null = null;
  for (const [k, v] of Object.entries(value)) {
    const next = SECRET_KEY.test(k) && v !== undefined && v !== null ? CENSOR : redacted(v, within);
    if (next !== v) (changed ??= []).push([k, next]);
  }
  if (value instanceof Error) {
    // What the log's error serializer writes besides the enumerable fields: an AggregateError's `errors` (own, not
    // enumerable), as `aggregateErrors`.
    const d = Object.getOwnPropertyDescriptor(value, 'errors');
    if (d && !d.enumerable && 'value' in d) {
      const next = redacted(d.value as unknown, within);
      if (next !== d.value) (changed ??= []).push(['errors', next]);
    }
    // A URL that did not parse is quoted whole on the error (`input`), a password written into it too.
    const input = (value as { code?: unknown; input?: unknown }).input;
    if ((value as { code?: unknown }).code === 'ERR_INVALID_URL' && typeof input === 'string') {
      const shown = shownUrl(input);
      if (shown !== input) (changed ??= []).push(['input', shown]);
    }
  }
  within.pop();
  if (!changed) return value;
  if (Array.isArray(value)) {
    const copy: unknown[] = [...value];
    for (const [k, next] of changed) copy[Number(k)] = next;
    return copy as T;
  }
  const descriptors = Object.getOwnPropertyDescriptors(value) as PropertyDescriptorMap;
  // An own accessor reads the original's state: on Node 26 an error's `stack` is one, and on the copy it reads empty.
  for (const [k, d] of Object.entries(descriptors))
    if (d.get) descriptors[k] = { value: (value as Record<string, unknown>)[k], enumerable: d.enumerable ?? false };
  for (const [k, next] of changed)
    descriptors[k] = {
      value: next,
      enumerable: descriptors[k]?.enumerable ?? true,
      writable: true,
      configurable: true,
    };
  return Object.create(Object.getPrototypeOf(value) as object | null, descriptors) as T;
}

/**
 * The logger of the request a call serves, read only when the call writes a line: the layers under a resolver (the
 * cloud and identity services, the idempotency runner, the upstream client) write a request's lines with it, so that
 * each names the request id. A GraphQL context is one, and makes its child logger on first use: a call that writes
 * nothing (nearly every one) makes none. A layer given none writes with its own logger (a caller with no request).
 */
export interface RequestLog {
  readonly logger: Logger;
}

/** How log lines are written: one JSON object per line, or a compact line for a person at a terminal. */
export type LogFormat = 'json' | 'pretty';

/** `auto` (the default) writes for a person when stdout is a terminal and JSON otherwise (files, pipes, collectors). */
export function resolveLogFormat(setting: 'auto' | LogFormat, stdoutIsTTY: boolean): LogFormat {
  return setting === 'auto' ? (stdoutIsTTY ? 'pretty' : 'json') : setting;
}

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const COLOURS: Record<number, string> = { 10: '90', 20: '90', 30: '32', 40: '33', 50: '31', 60: '35' };
/** Fields every line has, or that say nothing to a person reading a terminal. */
const QUIET = new Set(['level', 'time', 'msg', 'service', 'pid', 'hostname', 'err']);

/**
 * One JSON line from pino (already redacted) as a person reads it: `HH:MM:SS LEVEL message`, then the scalar
 * fields the message does not already say as `key=value`. A message made of ` | `-separated parts (the start-up
 * line) puts each part on its own indented line; an error's stack follows, indented. A line that is not JSON is
 * passed through unchanged.
 */
export function formatPrettyLine(json: string, colour = false): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const level = typeof o.level === 'number' ? o.level : 30;
  const time =
    typeof o.time === 'string'
      ? o.time.slice(11, 19)
      : typeof o.time === 'number'
        ? new Date(o.time).toISOString().slice(11, 19)
        : '';
  const msg = typeof o.msg === 'string' ? o.msg : '';
  const [first = '', ...rest] = msg.split(' | ');
  const extras: string[] = [];
  for (const [k, v] of Object.entries(o)) {
    if (QUIET.has(k) || v === null || typeof v === 'object') continue;
    const text = String(v);
    if (!msg.includes(text))
      extras.push(`${k}=${typeof v === 'string' && /\s/.test(text) ? JSON.stringify(text) : text}`);
  }
  const name = (LEVELS[level] ?? String(level)).padEnd(5);
  let line = `${time} ${colour ? `\x1b[${COLOURS[level] ?? '0'}m${name}\x1b[0m` : name} ${first}${extras.length ? `  ${extras.join(' ')}` : ''}\n`;
  for (const part of rest) line += `               ${part}\n`;
  const err = o.err as { stack?: unknown; message?: unknown } | undefined;
  if (err && typeof err === 'object') {
    const text =
      typeof err.stack === 'string' ? err.stack : typeof err.message === 'string' ? err.message : JSON.stringify(err);
    line += text
      .split('\n')
      .map((l) => `    ${l}\n`)
      .join('');
  }
  return line;
}

/** A pino destination that writes each line through formatPrettyLine. */
export function prettyDestination(
  out: { write(s: string): unknown } = process.stdout,
  colour = false,
): DestinationStream {
  return { write: (line: string) => void out.write(formatPrettyLine(line.trimEnd(), colour)) };
}

export function createLogger(
  options: { level?: string; destination?: DestinationStream; format?: LogFormat } = {},
): Logger {
  const destination =
    options.destination ??
    (options.format === 'pretty' ? prettyDestination(process.stdout, process.stdout.isTTY === true) : undefined);
  return pino(
    {
      level: options.level ?? 'info',
      base: { service: 'gateway' },
      // On the lines written only: pino calls no formatter for a line below the level.
      formatters: { log: redacted },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}

/** What `exitAfterLogs` needs of a destination: sonic-boom's end, which waits for a write under way. */
interface EndableDestination {
  end(): void;
  once(event: 'close' | 'error', listener: () => void): unknown;
}

/**
 * Ends the process with `code` once the lines logged before are written. pino's own destination (sonic-boom on
 * stdout) writes on libuv's pool; at `exit` it writes what waits in its buffer, but not a write under way there, so
 * the line logged right before `process.exit` (`shutdown complete`) was lost now and then, under load. The destination
 * is ended instead, and the process exits once it closes (stdout itself stays open), or after 5 s if it never does (a
 * reader that stopped reading; the shutdown's own deadline still ends the process first). Any other destination (the
 * pretty one writes to process.stdout, whose writes to a file or pipe are synchronous) exits at once.
 */
export function exitAfterLogs(logger: Logger, code: number): void {
  const stream = (logger as unknown as Record<symbol, unknown>)[symbols.streamSym];
  const endable = (s: unknown): s is EndableDestination =>
    typeof s === 'object' && s !== null && 'end' in s && typeof s.end === 'function' && 'once' in s;
  if (!endable(stream)) process.exit(code);
  const exit = () => process.exit(code);
  setTimeout(exit, 5_000);
  stream.once('close', exit);
  stream.once('error', exit);
  try {
    stream.end();
  } catch {
    exit();
  }
}

/**
 * Logs an unexpected error in full with `fields`. An error the log cannot read (a getter that throws) is logged
 * without it, and a log failing even then throws nothing: the caller's answer to its client must not depend on it.
 */
export function logUnexpected(logger: Logger, err: unknown, fields: Record<string, unknown>, message: string): void {
  try {
    logger.error({ err, ...fields }, message);
  } catch {
    try {
      logger.error(fields, `${message} (the error itself could not be logged)`);
    } catch {
      // Nothing more to do.
    }
  }
}
