import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

/**
 * Paths redacted from every log line. Secrets never reach a log: API keys and upstream tokens travel in
 * headers, passwords and tokens in bodies (cloud users, VM users, mobile-ID notifications).
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'headers["idempotency-key"]',
  '*.password',
  '*.*.password',
  '*.access_token',
  '*.id_token',
  '*.accessToken',
  '*.idToken',
  '*.token',
  '*.client_notification_token',
  'password',
  'access_token',
  'id_token',
  'token',
  'credentials',
  '*.credentials',
];

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
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}
