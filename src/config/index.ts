import fs from 'node:fs';
import { isIP } from 'node:net';
import path from 'node:path';
import { z } from 'zod';

import { AppsFileError, readAppsFile, type AppFileEntry } from '../auth/apps-file.js';
import { APP_NAME, KEY_LABEL, KEY_LABEL_RULE, parseAppKey, sha256, type AppKey } from '../auth/caller.js';
import { CLAIM_NAME, IssuersFileError, readIssuersFile } from '../auth/issuers-file.js';
import type { JwtAppEntry, JwtAuthConfig, JwtIssuerConfig } from '../auth/jwt-config.js';
import { NOT_A_FILE, NotAFileError, openRegularFile } from '../auth/regular-file.js';
import { LINE_CONTROL } from '../errors.js';
import { PHASES, type Phase } from '../phases.js';
import { CLOUD_SHAPE_MODES, cloudShapeByName, DEFAULT_CLOUD_SHAPE } from '../sandbox/cloud-shapes.js';
import { parseJsonPath, type JsonPath, type ShapePaths } from './json-path.js';
import {
  ConfigError,
  everyUpstreamSandboxed,
  KEY_OPTIONAL_UPSTREAMS,
  resolveUpstreams,
  UPSTREAM_NAMES,
  type UpstreamTable,
} from './upstream-table.js';
import { ALLOCATION_SITE_PRETENURING, HEAP_GROWING_PERCENT } from './v8-heap-flags.js';
import { boolWord } from './values.js';

export type { JwtAppEntry, JwtAuthConfig, JwtIssuerConfig } from '../auth/jwt-config.js';
export { ConfigError, describeUpstreams, everyUpstreamSandboxed } from './upstream-table.js';
export type { ConfiguredNotificationToken, UpstreamTable } from './upstream-table.js';

/**
 * Every environment variable the gateway reads, declared once: the parser below, the start-up error
 * messages and docs/configuration.md (`npm run docs:config`, checked by test/docs-config.test.ts) all come from here.
 * Nothing else in the code base reads process.env.
 */
export interface EnvVar {
  name: string;
  default: string;
  description: string;
  /** True when a reload (SIGHUP, POST /admin/reload) reads it again: the files of docs/decisions/057. */
  reloadable: boolean;
}

/** Variables whose value may be a secret: never echoed in a configuration error (nor kept in a ConfigMap). */
export const SECRET_VARS: ReadonlySet<string> = new Set([
  'OTEL_EXPORTER_OTLP_HEADERS',
  'TOKEN_ENCRYPTION_KEY',
  'CLOUD_API_CREDENTIALS',
  'CLOUD_API_TOKEN',
  'VERIFICATION_API_TOKEN',
  'IDENTIFICATION_API_TOKEN',
  'IDENTIFICATION_PRODLIKE_API_TOKEN',
  'GATEWAY_API_KEYS',
  'OPERATOR_API_KEYS',
  'MOBILEID_NOTIFICATION_TOKENS',
  'DATABASE_URL',
  'APOLLO_KEY',
]);

const DURATION = /^(\d+)(ms|s|m|h|d)?$/;
const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** Parses `90s`, `30m`, `24h`, `7d`, `250ms` or a bare number of milliseconds. */
export function parseDuration(text: string): number | undefined {
  const m = DURATION.exec(text.trim());
  if (!m) return undefined;
  return Number(m[1]) * UNIT_MS[(m[2] ?? 'ms') as keyof typeof UNIT_MS];
}

/** A 256-bit key written as 64 hex digits or as (url-safe) base64; undefined when it is neither. */
export function decodeKey(text: string): Buffer | undefined {
  const t = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(t)
    ? Buffer.from(t, 'hex')
    : /^[A-Za-z0-9+/_-]{43}=?$/.test(t)
      ? Buffer.from(t, 'base64')
      : undefined;
  return key && key.length === 32 ? key : undefined;
}

/** A schema whose value when the variable is unset is its own default, and that default as the reference shows it. */
interface Defaulted<S extends z.ZodType> {
  readonly schema: S;
  readonly shown: string;
}

/** One variable's declaration (see VARS). */
interface Declared<S extends z.ZodType> {
  readonly schema: S;
  readonly shown: string;
  /** True when `shown` is the schema's own default; false when it only says what unset means. */
  readonly derived: boolean;
  readonly description: string;
  readonly reloadable: boolean;
}

/**
 * A variable: a schema with its default (its documented default then comes from it) or, for one without a default, the
 * text that says what unset means (`(unset: SQLite)`); `'reloadable'` when a reload reads it again (docs/decisions/057).
 */
function declare<S extends z.ZodType>(
  part: S | Defaulted<S>,
  description: string,
  unset?: string,
  reload?: 'reloadable',
): Declared<S> {
  const reloadable = reload === 'reloadable';
  if ('shown' in part) return { schema: part.schema, shown: part.shown, derived: true, description, reloadable };
  if (unset === undefined) throw new Error('a variable without a default needs the text that says what unset means');
  return { schema: part, shown: unset, derived: false, description, reloadable };
}

const optionalString = z
  .string()
  .transform((s) => s.trim())
  .optional()
  .transform((s) => (s ? s : undefined));
/**
 * A token the gateway sends as `Authorization: Bearer <token>` (the specs' ACCESS_TOKEN, a JWT for the cloud and the
 * verification interface): the token alone, the blanks around it dropped. An RFC 6750 bearer token holds no blank, so
 * a value with one inside, such as the token written after its scheme as a curl line shows it ("Bearer eyJ…"), would
 * go out as a header no upstream takes (`Bearer Bearer eyJ…`), and every call would fail as unauthenticated.
 */
const bearerToken = optionalString.superRefine((token, ctx) => {
  if (token === undefined || !/\s/.test(token)) return;
  ctx.addIssue({
    code: 'custom',
    message: /^bearer\s/i.test(token)
      ? 'give the token alone, without "Bearer ": the gateway sends Authorization: Bearer <token> itself'
      : 'a bearer token has no blank or line break inside (RFC 6750)',
  });
});
const httpUrl = z
  .string()
  .trim()
  // The URL parser drops a tab or line break inside a URL and encodes other control characters, but the text is used
  // as written: PUBLIC_URL, for one, is the start of every callback address handed to an upstream or an app.
  .refine((u) => !LINE_CONTROL.test(u), 'must not contain control characters (a tab, a line break)')
  .url('must be an absolute URL')
  .refine((u) => /^https?:\/\//i.test(u), 'must be an http(s) URL')
  .transform((u) => u.replace(/\/+$/, ''))
  .optional();
/**
 * An http(s) URL that paths are appended to (PUBLIC_URL, the upstreams' addresses, the OTLP endpoint): a query or a
 * fragment would end up before the path (`https://gw.example/?a=1/webhooks/…`), or be dropped (the upstreams' pools
 * keep the origin and the path), so it is refused rather than sent somewhere else than written.
 */
const baseUrl = httpUrl.refine(
  (u) => u === undefined || !/[?#]/.test(u),
  'must have no query (?) or fragment (#): paths are appended to it',
);
const httpUrlOr = (fallback: string): Defaulted<z.ZodType<string, string | undefined>> => ({
  schema: baseUrl.transform((u) => u ?? fallback),
  shown: fallback,
});
const list = z
  .string()
  .optional()
  .transform((s) =>
    (s ?? '')
      .split(',')
      .map((v) => v.trim())
      .filter(Boolean),
  );
/**
 * A character of a key or token that no request carries in its Authorization header as the variable holds it: Node
 * reads a header's bytes one character each (latin1), and refuses control characters in it.
 */
const UNSENDABLE = /[^\x21-\x7e\x80-\xff]/;
/**
 * A `list` of `name:value` or bare entries (API keys, notification tokens: src/auth/caller.ts parseAppKey). An entry
 * with nothing on one side of its first `:` is refused, never read as a bare value: `shop:` would be the key (or token)
 * `shop:`, which anyone who knows the app's name can guess, and `:k` a key whose app lost its name. So is an entry
 * whose part before its `:` is no app name (`shop/eu:k`, `my shop:k`): read as a bare value, a token meant for one app
 * would be read by every app, and a key would be an app of its own that the app's `k` never matches. So is a value
 * with a blank inside (`Bearer abc`, `shop: tok en`) or a character no header carries (UNSENDABLE): each key and token
 * arrives as `Authorization: Bearer <value>`, which src/auth/keys.ts reads as one run of characters without a blank, so
 * such a value could never authenticate. The message names the entry by its place; the variables hold secrets, so
 * neither it nor parseEnv shows a value.
 */
const namedList = list.transform((entries, ctx) => {
  for (const [i, entry] of entries.entries()) {
    const colon = entry.indexOf(':');
    const parsed = parseAppKey(entry);
    // An entry whose part before its ":" is no app name is refused below, for that.
    const value = colon < 0 || parsed.name !== null ? parsed.key : '';
    const unsendable = /^bearer\s/i.test(value)
      ? 'starts with "Bearer ": give the value alone, as it follows "Authorization: Bearer " in a request'
      : /\s/.test(value)
        ? 'has a blank inside its value, which could never match: a request sends it as Authorization: Bearer <value>, which holds none'
        : UNSENDABLE.test(value)
          ? 'holds a character no request can send in a header as it is written (a control character, or one past U+00FF such as a letter of a non-Latin script), so it could never match'
          : null;
    if (unsendable !== null) {
      ctx.addIssue({ code: 'custom', message: `entry ${i + 1} ${unsendable}` });
      return z.NEVER;
    }
    if (colon < 0) continue;
    const problem =
      colon === 0
        ? 'has no app name before its ":"'
        : colon === entry.length - 1
          ? 'has nothing after its ":"'
          : APP_NAME.test(entry.slice(0, colon))
            ? null
            : 'is refused: the part before its ":" is not an app name (1 to 64 ASCII letters, digits, _ . -)';
    if (problem === null) continue;
    ctx.addIssue({
      code: 'custom',
      message: `entry ${i + 1} ${problem} (write <app name>:<value>, or a bare value without ":")`,
    });
    return z.NEVER;
  }
  return entries;
});
/**
 * MCP_ALLOWED_HOSTS: host names as the MCP SDK compares them, the hostname a URL parser reads from a Host or Origin
 * header (lower case, without the port, IPv6 in brackets, an international name in its xn-- form). An entry that is
 * not its own such hostname (`gw.example:443`, `https://gw`, `fd00::1`, a space) could never match: the endpoint
 * would refuse every request naming it, which is refused here instead, the entry named by its place.
 */
const hostNames = list.transform((entries, ctx) => {
  const names: string[] = [];
  for (const [i, entry] of entries.entries()) {
    const name = entry.toLowerCase();
    let hostname: string | null = null;
    try {
      hostname = new URL(`http://${entry}`).hostname;
    } catch {
      // not a host: refused below
    }
    if (hostname !== name) {
      ctx.addIssue({
        code: 'custom',
        message: `entry ${i + 1} can never match a Host header, which is compared without its port: write a host name or address alone, such as gw.example, 10.0.0.5 or [fd00::1] (no scheme, port, path or space; an international name in its xn-- form)`,
      });
      return z.NEVER;
    }
    names.push(name);
  }
  return names;
});
/** A non-empty text, `fallback` when unset. */
const text = (fallback: string) => ({ schema: z.string().trim().min(1).optional().default(fallback), shown: fallback });
/**
 * HOST: an address (IPv6 without brackets, as listen takes it: `::`) or a host name alone. A value with a scheme, a
 * port, a path, brackets or a blank (`localhost:4000`, `http://0.0.0.0`, `[::]`) names no interface: listen looked it
 * up as a name, and the gateway stopped with `getaddrinfo ENOTFOUND localhost:4000` once its store was open, without
 * naming the variable.
 */
const listenHost = {
  schema: text('0.0.0.0').schema.refine(
    (host) => isIP(host) !== 0 || /^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.?$/.test(host),
    'must be an address or a host name alone, such as 0.0.0.0, 127.0.0.1, :: or gw.internal (IPv6 without brackets; no scheme, port, path or blank: the port is PORT)',
  ),
  shown: '0.0.0.0',
};
/** One of `values`, `fallback` when unset; `normalize` lets any case through. */
const choice = <const V extends readonly [string, ...string[]]>(
  values: V,
  fallback: V[number],
  normalize?: 'upper' | 'lower',
) => {
  const message = `must be ${values.slice(0, -1).join(', ')} or ${values[values.length - 1]}`;
  const base = z.string().trim();
  const cased = normalize === 'upper' ? base.toUpperCase() : normalize === 'lower' ? base.toLowerCase() : base;
  return {
    schema: cased
      .pipe(z.enum(values, message))
      .optional()
      .default(fallback as never),
    shown: fallback,
  };
};
/**
 * A duration from `minMs` to `maxMs`. Every duration has an upper bound: its value goes to a timer (Node fires one set
 * past 2^31-1 ms, ~24.8 days, after 1 ms), to an expiry stored as now + it (past ±8.64e15 ms no Date holds it, and
 * toISOString throws; PostgreSQL's bigint ends sooner than the digits one can write), or to a comparison that a huge
 * value turns into never; each bound is a sane setting's, said in the variable's description.
 */
const duration = (fallback: string, bound: { minMs: number; maxMs: number; message: string }) => ({
  schema: z
    .string()
    .optional()
    .transform((s, ctx) => {
      const ms = parseDuration(s ?? fallback);
      // So many digits that the number is Infinity are no duration either.
      if (ms === undefined || !Number.isFinite(ms)) {
        ctx.addIssue({ code: 'custom', message: 'must be a duration such as 500ms, 30s, 10m, 24h or 7d' });
        return z.NEVER;
      }
      if (ms < bound.minMs || ms > bound.maxMs) {
        ctx.addIssue({ code: 'custom', message: bound.message });
        return z.NEVER;
      }
      return ms;
    }),
  shown: fallback,
});
/** A rate limit: `points` per window of `windowMs`, per API key. */
export interface RateLimit {
  readonly points: number;
  readonly windowMs: number;
}

const rateLimit = {
  schema: z
    .string()
    .optional()
    .transform((s, ctx): RateLimit | null => {
      const text = (s ?? 'off').trim().toLowerCase();
      if (text === 'off') return null;
      const m = /^(\d+)\s*\/\s*(\S+)$/.exec(text);
      const points = m ? Number(m[1]) : NaN;
      const windowMs = m ? parseDuration(m[2]!) : undefined;
      if (
        !Number.isSafeInteger(points) ||
        points < 1 ||
        windowMs === undefined ||
        windowMs < 1000 ||
        windowMs > 86_400_000
      ) {
        ctx.addIssue({
          code: 'custom',
          message: 'must be off, or <points>/<window> with points >= 1 and a window from 1s to 24h, such as 20/1m',
        });
        return z.NEVER;
      }
      return { points, windowMs };
    }),
  shown: 'off',
};
/** A JSON path of a shape the spec does not show (src/config/json-path.ts); unset means the documented guesses. */
const jsonPath = z
  .string()
  .optional()
  .transform((s, ctx): JsonPath | null => {
    if (s === undefined || s.trim() === '') return null;
    const path = parseJsonPath(s);
    if (typeof path === 'string') {
      ctx.addIssue({ code: 'custom', message: path });
      return z.NEVER;
    }
    return path;
  });
const int = (fallback: number, min: number, max: number) => ({
  schema: z
    .string()
    .optional()
    .transform((s, ctx) => {
      // Decimal digits only: Number() would take 0x50 as 80 and 1e3 as 1000.
      const v = s === undefined || s.trim() === '' ? fallback : /^\s*-?\d+\s*$/.test(s) ? Number(s) : Number.NaN;
      // -0 compares equal to 0 and would pass as PORT=0; a sign on zero is no integer as written here.
      if (!Number.isInteger(v) || Object.is(v, -0) || v < min || v > max) {
        ctx.addIssue({ code: 'custom', message: `must be an integer from ${min} to ${max}` });
        return z.NEVER;
      }
      return v;
    }),
  shown: String(fallback),
});
/** A number from 0 to 1, in decimal digits with an optional fraction (0, 0.25, 1). */
const ratio = (fallback: number) => ({
  schema: z
    .string()
    .optional()
    .transform((s, ctx) => {
      // As the integers: Number() would take 0x1 as 1, 1e-1 as 0.1 and .5 as 0.5; OpenTelemetry writes 0.25.
      const v = s === undefined || s.trim() === '' ? fallback : /^\s*\d+(\.\d+)?\s*$/.test(s) ? Number(s) : Number.NaN;
      if (!Number.isFinite(v) || v < 0 || v > 1) {
        ctx.addIssue({
          code: 'custom',
          message: 'must be a decimal number from 0 to 1, such as 0.25 (digits with an optional decimal point)',
        });
        return z.NEVER;
      }
      return v;
    }),
  shown: String(fallback),
});
const optionalBool = z
  .string()
  .optional()
  .transform((s, ctx): boolean | undefined => {
    const v = boolWord(s);
    if (v !== null) return v;
    ctx.addIssue({ code: 'custom', message: 'must be true or false' });
    return z.NEVER;
  });
const bool = (fallback: boolean) => ({ schema: optionalBool.transform((v) => v ?? fallback), shown: String(fallback) });

/** The settings of one upstream's breaker (UPSTREAM_CIRCUIT_*; docs/decisions/056). */
export interface BreakerSettings {
  /** False: the upstream has no breaker (every call goes out, as before). */
  readonly enabled: boolean;
  /** The rolling sample: the outcomes of the last this many attempts; the circuit can open once it is full. */
  readonly volume: number;
  /** The circuit opens when more than this share of the sample failed (0 < x < 1). */
  readonly errorThreshold: number;
  /** How long an open circuit refuses before it lets trial calls through. */
  readonly resetTimeoutMs: number;
  /** Half-open: at most this many trial calls at once, and this many successful trials in a row close the circuit. */
  readonly halfOpenAttempts: number;
}

/** The upstreams that each have a circuit breaker (the identification PRODLIKE environment shares identification's settings). */
export const BREAKER_UPSTREAMS = ['cloud', 'cloud-token', 'identification', 'verification', 'rfm'] as const;
export type BreakerUpstream = (typeof BREAKER_UPSTREAMS)[number];

/**
 * A setting per upstream: `<value>` for every upstream, then `<upstream>=<value>` entries that override it, such as
 * `30s,cloud=1m`. `parse` answers the value, or what is wrong with it.
 */
const perUpstream = <T>(fallback: string, parse: (text: string) => T | { error: string }) => ({
  schema: z
    .string()
    .optional()
    .transform((s, ctx): Readonly<Record<BreakerUpstream, T>> => {
      const entries = (s ?? fallback)
        .split(',')
        .map((v) => v.trim())
        .filter(Boolean);
      const fail = (message: string) => {
        ctx.addIssue({ code: 'custom', message });
        return z.NEVER;
      };
      let all: T | undefined;
      const own: Partial<Record<BreakerUpstream, T>> = {};
      for (const [i, entry] of entries.entries()) {
        const eq = entry.indexOf('=');
        const name = eq < 0 ? null : entry.slice(0, eq).trim();
        const value = parse(eq < 0 ? entry : entry.slice(eq + 1).trim());
        if (typeof value === 'object' && value !== null && 'error' in value)
          return fail(`entry ${i + 1}: ${value.error}`);
        if (name === null) {
          if (all !== undefined)
            return fail(
              `entry ${i + 1}: the value for every upstream is given twice; name the upstream it is for (<upstream>=<value>)`,
            );
          all = value;
        } else if (!(BREAKER_UPSTREAMS as readonly string[]).includes(name)) {
          return fail(
            `entry ${i + 1}: ${JSON.stringify(name)} is not an upstream with a breaker (${BREAKER_UPSTREAMS.join(', ')})`,
          );
        } else if (name in own) {
          return fail(`entry ${i + 1}: ${name} is given twice`);
        } else own[name as BreakerUpstream] = value;
      }
      const base = all ?? (parse(fallback) as T);
      return Object.fromEntries(BREAKER_UPSTREAMS.map((u) => [u, own[u] ?? base])) as Record<BreakerUpstream, T>;
    }),
  shown: fallback,
});
/** Any case, as every other word of a choice. */
const switchValue = (t: string): boolean | { error: string } =>
  /^on$/i.test(t) ? true : /^off$/i.test(t) ? false : { error: `${JSON.stringify(t)}: must be on or off` };
const wholeNumber =
  (min: number, max: number) =>
  (t: string): number | { error: string } => {
    const v = Number(t);
    return /^\d+$/.test(t) && v >= min && v <= max
      ? v
      : { error: `${JSON.stringify(t)}: must be an integer from ${min} to ${max}` };
  };
const openShare = (t: string): number | { error: string } => {
  const v = Number(t);
  return /^0?\.\d+$/.test(t) && v > 0 && v < 1
    ? v
    : { error: `${JSON.stringify(t)}: must be a share between 0 and 1, such as 0.5` };
};
/** Up to 1h: so many digits that they make Infinity would keep an opened circuit open for good. */
const breakDuration = (t: string): number | { error: string } => {
  const ms = parseDuration(t);
  return ms !== undefined && ms >= 1000 && ms <= HOUR_MS
    ? ms
    : {
        error: `${JSON.stringify(t.length > 40 ? `${t.slice(0, 40)}…` : t)}: must be a duration of at least 1s and at most 1h, such as 30s or 2m`,
      };
};

/**
 * Every variable, declared once: its schema (with its default, where it has one), the default the reference
 * shows (derived from the schema's own default, or for a variable without one the text that says what unset means),
 * and its description. The parser, the start-up errors, ENV_VARS and docs/configuration.md all come from here
 * (test/config/config.test.ts checks that each shown default is the value the schema gives an unset variable).
 */
const VARS = {
  PORT: declare(int(4000, 0, 65535), 'TCP port for GraphQL over HTTP and WebSocket, the webhooks, health and metrics.'),
  HOST: declare(
    listenHost,
    'Interface to listen on: an address (IPv6 without brackets, such as ::) or a host name; a value with a scheme, a port or a path stops start-up.',
  ),
  PUBLIC_URL: declare(
    baseUrl,
    'Address the upstreams use to reach this gateway (verification callbacks, mobile-ID notification_uri).',
    '(unset: http://127.0.0.1:<port it listens on>, or http://HOST:<port> when HOST names one interface)',
  ),
  DATA_DIR: declare(
    text('./data'),
    'Folder of the embedded SQLite database (gateway.sqlite) when DATABASE_URL is unset. One gateway process per folder: a second one started on it while the first runs is refused (the first holds gateway.lock there until it ends).',
  ),
  DATABASE_URL: declare(
    z
      .string()
      .trim()
      .optional()
      .transform((s) => (s ? s : undefined))
      .refine((s) => s === undefined || /^postgres(ql)?:\/\//.test(s), 'must start with postgres:// or postgresql://')
      .refine(
        (s) => s === undefined || !/^postgres(ql)?:\/\//.test(s) || URL.canParse(s),
        'is not a URL (a port from 1 to 65535, no blanks; a password holding @, :, / or # written %-encoded)',
      )
      // Without a host pg connects to its defaults (PGHOST, else localhost): another database than the one meant.
      // A socket folder given as ?host= is a host.
      .refine((s) => {
        if (s === undefined || !URL.canParse(s)) return true;
        const url = new URL(s);
        return url.hostname !== '' || (url.searchParams.get('host') ?? '') !== '';
      }, 'must name a host (postgres://user@host:5432/db), or a socket folder as ?host=/var/run/postgresql')
      // pg reads these files when it makes its first connection, and a missing one ends the start with a stack trace.
      // So does a folder (pg's read fails with EISDIR, said as "PostgreSQL refused"), and a named pipe or a device,
      // whose read would hold the start for as long as no writer ends it: the one check of every configured file.
      .superRefine((s, ctx) => {
        if (s === undefined || !URL.canParse(s)) return;
        const params = new URL(s).searchParams;
        for (const name of ['sslrootcert', 'sslcert', 'sslkey']) {
          const file = params.get(name);
          if (file === null || file === '') continue;
          try {
            fs.closeSync(openRegularFile(file));
          } catch (err) {
            if (err instanceof NotAFileError) {
              ctx.addIssue({
                code: 'custom',
                message: `its ${name} file ${file} ${NOT_A_FILE}: name the PEM file itself`,
              });
              return;
            }
            const code = (err as { code?: string }).code ?? 'unreadable';
            ctx.addIssue({ code: 'custom', message: `its ${name} file ${file} cannot be read (${code})` });
            return;
          }
        }
      }),
    'PostgreSQL connection string; when set, the store, idempotency records and event log live there.',
    '(unset: SQLite)',
  ),
  DATABASE_MIGRATIONS: declare(
    choice(['apply', 'wait'], 'apply', 'lower'),
    "apply: the gateway applies the database migrations it lacks at start-up (replicas starting together take turns). wait: it applies none and waits, alive but not ready (/readyz 503), until `node dist/src/main.js migrate` (run once per release, e.g. as a Kubernetes Job) has brought the database to its release's schema; so that a rolling update migrates once, before the new pods serve.",
  ),
  SQLITE_SYNCHRONOUS: declare(
    choice(['FULL', 'NORMAL'], 'FULL', 'upper'),
    'SQLite (WAL) durability: FULL makes every commit survive power loss before it is acknowledged; NORMAL survives a crash of the process but may lose the last commits on power loss. Ignored with DATABASE_URL.',
  ),
  SQLITE_COMMIT_WINDOW_MS: declare(
    int(1, 0, 50),
    "SQLite: how long, in milliseconds, the first write of a group waits for more writes before their one COMMIT (and, with FULL, their one fdatasync). It waits only when no sync is in flight and writes have lately come from more than one caller at a time (within the last eight windows, a write came while another's sync was in flight, or an HTTP request arrived while a group was open). A steady trickle of writes from many callers then shares commits and syncs, as a burst does: less CPU per write at the same rate, however fast the disk syncs. A lone caller's writes, one after another, and a write after a quiet spell commit at the end of their turn of the event loop. A write is still on disk before it is acknowledged; while writes come from many callers, each acknowledgement can come up to this much later (docs/decisions/062, 113, 159). 0: every group commits at the end of its turn, as before 113. Ignored with DATABASE_URL.",
  ),
  STORE_PG_NAMED_STATEMENTS: declare(
    bool(true),
    "PostgreSQL: true: a statement the gateway sends again and again (from its third use, up to 128 texts) goes as a named statement, parsed once per pooled connection and then only bound and executed, rather than parsed, analysed and planned on every call (the log's insert, the replicas' reads, the NOTIFY: docs/decisions/104). Same statements, same parameters, same results. Should a migration change the columns a named statement returns while it runs (a rolling upgrade), the statement fails once and nothing is named from then on. false: every statement unnamed, as before; an off switch, not a tuning knob. Ignored without DATABASE_URL.",
  ),
  SQLITE_CLAIM_WITHOUT_SYNC: declare(
    bool(true),
    "SQLite with FULL: true: the claim of a fresh idempotency key is taken once committed (every request sees it) and the upstream call starts without waiting for the claim's WAL sync; the completion's sync covers it, and nothing is answered before that sync. A claim lost to a power loss only lets the retry send the same upstream key again (the cloud upstream replays it); a retry with the same key but a different request is then not refused as IDEMPOTENCY_KEY_REUSED (docs/decisions/078). false: the claim waits for its own sync; an off switch, not a tuning knob. Ignored with DATABASE_URL and with SQLITE_SYNCHRONOUS=NORMAL.",
  ),
  SQLITE_CHECKPOINT_INTERVAL_MS: declare(
    int(500, 10, 60_000),
    'SQLite: the least time, in milliseconds, between two checkpoints of the WAL into the database file (a worker thread copies each page written since the last one, then syncs the file); the writes of an interval are copied when it ends, even when no write follows (docs/decisions/137). Longer: a page rewritten many times is copied once, less CPU per write; the WAL restarts after the same SQLITE_WAL_RESTART_FRAMES either way (docs/decisions/033). Ignored with DATABASE_URL.',
  ),
  SQLITE_CHECKPOINT_SYNC: declare(
    bool(true),
    "SQLite: true: after each checkpoint that copied pages of the WAL into the database file, the checkpoint worker syncs that file (fdatasync), so that the pages never pile up unsynced in the kernel's cache; the WAL restart's pause (SQLITE_WAL_RESTART_FRAMES) then waits only for its own few pages (~5 ms instead of ~50 and more at 1,500 creations a second). false: SQLite syncs the file only when a checkpoint copies the whole WAL, that is in the restart's pause, which then writes out every page copied since the last restart (docs/decisions/136). Ignored with DATABASE_URL.",
  ),
  SQLITE_CHECKPOINT_NICE: declare(
    int(10, 0, 19),
    "SQLite, on Linux: how many nice steps below the event loop's thread the checkpoint worker's thread runs (its copies of the WAL into the database file and the file's sync), up to nice 19. When both want the same core, the event loop runs first and the copy takes the idle moments: a copy of ~20 ms of CPU every SQLITE_CHECKPOINT_INTERVAL_MS otherwise shares the core with the requests while it runs (docs/decisions/139). The worker still gets a share of a busy core (~10 % at 10), and the whole core while the WAL restart's pause holds the writes. 0: the event loop's priority. Elsewhere, or where the system refuses it, the worker keeps the event loop's priority. Ignored with DATABASE_URL.",
  ),
  SQLITE_WAL_READ_AHEAD_MB: declare(
    int(32, 0, 1_024),
    "SQLite: as each checkpoint begins, the checkpoint worker reads into the kernel's file cache the parts of the WAL within this many MiB ahead of where the writer goes next that have lain unused for 30 s (docs/decisions/145). SQLite writes each WAL frame as a 24-byte header and a page, so no write covers a whole page of the cache, and a write to a page the cache has dropped (a host that reclaims idle memory, a container at its memory limit, a WAL written ahead at start and reached a minute later) first reads it from the disk, one read at a time, on the event loop. Where the writer passes often, nothing is read. 0: the WAL is not read ahead. Ignored with DATABASE_URL.",
  ),
  SQLITE_CACHE_KIB: declare(
    int(4_096, 256, 1_048_576),
    "SQLite: the page cache of the gateway's database connection, in KiB (`PRAGMA cache_size`; better-sqlite3's own default is 16,000 KiB). A page split leaves the cache's largest page number far beyond the database's last page, and the COMMIT after it then visits every cached page, ~100 µs with 16 MB cached: a smaller cache makes that visit cheaper, and a page the cache no longer holds is read from the operating system's file cache (docs/decisions/118). Larger: fewer such reads for a large ledger read at random. Ignored with DATABASE_URL.",
  ),
  SQLITE_WAL_RESTART_FRAMES: declare(
    int(65_536, 1_024, 1_048_576),
    "SQLite: the WAL's size, in frames of one 4 KiB page, from which it is restarted from its beginning: new write transactions wait (reads go on) while one last checkpoint copies the few frames left and syncs the database file, a pause of a few milliseconds up to ~20 under load (docs/decisions/107). Larger: that pause comes less often (under a steady load, once per this many frames written), but the WAL file takes up to this many 4 KiB pages on disk (65,536: 256 MiB; it is not truncated after a restart) and a restart after a crash reads it all back. 16,384 (64 MiB) was the size before. Ignored with DATABASE_URL.",
  ),
  SQLITE_WAL_PREALLOCATE: declare(
    bool(true),
    "SQLite: true: when the gateway opens its database and no WAL exists (a new database; SQLite deletes the WAL at a clean stop, and the gateway then keeps its file as gateway.sqlite-wal.kept, its header zeroed, to link it in again at the next start), it first writes the WAL at the size it reaches under load (SQLITE_WAL_RESTART_FRAMES and an eighth more: ~300 MB by default) as zeros and syncs it, before SQLite writes a frame; SQLite ignores a WAL whose header is not its own, writes its frames over the zeros, and the WAL's syncs then write into blocks that exist. A WAL that grows makes its syncs allocate blocks: on ext4 the first ~10 s of creations at full load after a start ran at half the rate of the next (docs/decisions/141). The write delays the gateway's start: it listens once the store is open (~3 s later on the bench machine's disk) and takes at once the disk space the WAL takes under load. An existing WAL is never touched. false: the WAL grows as SQLite writes it, as before, and a kept file is removed; an off switch. Ignored with DATABASE_URL.",
  ),
  CLOUD_API_URL: declare(baseUrl, 'Base URL of the cloud provisioning API.', '(unset: see SANDBOX_UPSTREAMS)'),
  CLOUD_API_TOKEN: declare(
    bearerToken,
    'Service-account token for the cloud API (the authorization step is then skipped): the token alone, sent as Authorization: Bearer <token>; a value with a blank inside ("Bearer eyJ…") stops start-up.',
    '(unset)',
  ),
  CLOUD_API_CREDENTIALS: declare(
    z
      .string()
      .optional()
      .transform((s, ctx) => {
        if (!s || !s.trim()) return undefined;
        try {
          const v: unknown = JSON.parse(s);
          if (v && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
        } catch {
          // fall through to the issue below
        }
        ctx.addIssue({
          code: 'custom',
          message: 'must be a JSON object (it is sent as the body of POST /iam/v2/tokens)',
        });
        return z.NEVER;
      }),
    'JSON object sent to POST /iam/v2/tokens to obtain a cloud token; used when CLOUD_API_TOKEN is unset.',
    '(unset)',
  ),
  CLOUD_CREATED_ID_PATH: declare(
    jsonPath,
    "JSON path of the created id in the cloud API's creation answers (the spec does not show them), as a dot path where a numeric segment indexes an array, e.g. data.uuid or items.0.id. Set, it replaces the guesses. A 2xx whose id cannot be read is kept, not lost: UPSTREAM_ANSWER_INCOMPLETE, and a retry with the same key reads the kept answer again with this path (docs/decisions/042).",
    '(unset: guesses id, serviceId, data.id, metadata.id)',
  ),
  CLOUD_TOKEN_PATH: declare(
    jsonPath,
    'JSON path of the token in the answer of POST /iam/v2/tokens (its field is not shown), e.g. iamToken or data.token.value. Set, it replaces the guesses.',
    '(unset: guesses access_token, accessToken, token, id_token, also under data)',
  ),
  CLOUD_IP_ADDRESS_PATH: declare(
    jsonPath,
    'JSON path of the public IPv4 address in an IP address creation answer (not shown; a private address there is not read), e.g. addresses.0.ip. Set, it replaces the guesses (IpAddress.address and the white_host of a provisioning).',
    '(unset: guesses address, ip, ipAddress, ip_address, publicIp, public_ip, also under data, spec, status)',
  ),
  VERIFICATION_API_URL: declare(baseUrl, 'Base URL of the verification interface.', '(unset: see SANDBOX_UPSTREAMS)'),
  VERIFICATION_API_TOKEN: declare(
    bearerToken,
    'JWT bearer token for the verification interface (and the rfm check beside it); required when VERIFICATION_API_URL is set. The token alone: a value with a blank inside ("Bearer eyJ…") stops start-up.',
    '(unset)',
  ),
  IDENTIFICATION_API_URL: declare(
    baseUrl,
    'Base URL of the identification interface (environment PRODUCTION).',
    '(unset: see SANDBOX_UPSTREAMS)',
  ),
  IDENTIFICATION_PRODLIKE_API_URL: declare(
    baseUrl,
    'Base URL of the pre-production-like identification interface (environment PRODLIKE).',
    '(unset: PRODLIKE refused, or simulated with identification)',
  ),
  IDENTIFICATION_API_TOKEN: declare(
    bearerToken,
    'Bearer token for the identification interface; required when IDENTIFICATION_API_URL is set. The token alone: a value with a blank inside ("Bearer …") stops start-up.',
    '(unset)',
  ),
  IDENTIFICATION_PRODLIKE_API_TOKEN: declare(
    bearerToken,
    'Bearer token for the pre-production-like identification interface (environment PRODLIKE). Unset: the production token IDENTIFICATION_API_TOKEN is sent there too.',
    '(unset: IDENTIFICATION_API_TOKEN)',
  ),
  RFM_API_URL: declare(
    baseUrl,
    'Base URL of the rfm list check (POST /api/v1/rfm/is-in-catalog). Unset: the verification interface, where the spec lists the check (under /api/v1), with VERIFICATION_API_TOKEN.',
    '(unset: VERIFICATION_API_URL)',
  ),
  VERIFICATION_EXTERNAL_ID_PATH: declare(
    jsonPath,
    "JSON path of the verification's id in a registration answer (not shown), read when the app gave no externalId. Set, it replaces the guesses; a 2xx without a readable id is kept as UPSTREAM_ANSWER_INCOMPLETE and read again with this path on a retry with the same key.",
    '(unset: guesses verificationExternalId, externalId, id, also under data, verification, result)',
  ),
  VERIFICATION_RESULTS_PATH: declare(
    jsonPath,
    'JSON path of the list of results (or the object keyed by id) in the answer of POST /api/v2/verifications/results (not shown), e.g. payload.entries. Set, it replaces the guesses. An answer with no list there (nor under the guesses) makes each id asked UPSTREAM_ANSWER_INCOMPLETE, and logs a warning naming this variable.',
    '(unset: a bare list, or guesses results, items, data, verifications)',
  ),
  VERIFICATION_CALLBACK_URL_PATH: declare(
    jsonPath,
    'Where a verification registration request carries the callbackUrl (the spec names no field), as a dot path, e.g. callback.url.',
    '(unset: callbackUrl)',
  ),
  MOBILEID_NOTIFICATION_TOKENS: declare(
    namedList,
    "Comma-separated client_notification_token values accepted on POST /webhooks/mobile-id. `<app>:<token>` binds a token to a named app (of GATEWAY_API_KEYS, OPERATOR_API_KEYS, GATEWAY_APPS_FILE, or a JWT app of AUTH_APPS or AUTH_ISSUERS; only that app reads its results); a bare token's results are readable by every app that knows the auth_req_id (prefer issueMobileIdNotificationToken per app); an entry with nothing before or after its first `:`, or whose token holds a blank (`Bearer abc`: give the token alone) or a character no header carries (a control character, or one past U+00FF), stops start-up.",
    '(unset)',
  ),
  MOBILEID_JWKS_URL: declare(
    httpUrl,
    'JWKS of the mobile identity service: when set, every id_token signature is verified (iss and aud are compared when present and MOBILEID_ISSUER / MOBILEID_CLIENT_ID are set).',
    '(unset)',
  ),
  MOBILEID_JWKS_FILE: declare(
    optionalString,
    "A JWKS as a local JSON file, instead of MOBILEID_JWKS_URL; read at start and again on a reload (SIGHUP, POST /admin/reload). At most 1 MiB: a larger file is refused unparsed. A file with no key the gateway can verify signatures with is refused naming each key's kid and why; a key it cannot verify with beside usable ones is passed over with one warning (see JWKS files above).",
    '(unset)',
    'reloadable',
  ),
  TRUSTED_DOCUMENTS_RELOAD_REUSE: declare(
    bool(true),
    "true: a reload parses and validates only the manifest's new or changed documents, and takes the others as the running configuration checked them (the same text against the same schema: the same verdict). false: a reload checks every document again; an off switch, not a tuning knob.",
  ),
  MOBILEID_ISSUER: declare(
    optionalString,
    'Expected iss of mobile-ID id_tokens, compared when a token carries iss (unset: iss is reported NOT_CHECKED).',
    '(unset)',
  ),
  MOBILEID_CLIENT_ID: declare(
    optionalString,
    'Expected aud of mobile-ID id_tokens, compared when a token carries aud (unset: aud is reported NOT_CHECKED).',
    '(unset)',
  ),
  TOKEN_ENCRYPTION_KEY: declare(
    optionalString.refine(
      (s) => s === undefined || decodeKey(s) !== undefined,
      'must be 32 bytes as base64 (44 characters) or as 64 hex digits, e.g. the output of `openssl rand -base64 32`',
    ),
    '32 random bytes (base64 or 64 hex digits): the gateway secret that seals stored mobile-ID tokens, rfm answers and identification links (SEAL_KEPT_CIPHER) and keys request fingerprints, callback tokens and the sandbox notification token. Unset: a key file generated in DATA_DIR on first start (keep it apart from the database in production). Replicas sharing DATABASE_URL need the same key.',
    '(unset: DATA_DIR/token-encryption.key)',
  ),
  SEAL_KEPT_CIPHER: declare(
    bool(true),
    'true: what is stored sealed is sealed as AES-256-CTR then HMAC-SHA256 (encrypt-then-MAC, each under its own key derived from TOKEN_ENCRYPTION_KEY, the cipher and the HMAC kept for the process; values start `ctr1.`); false: as AES-256-GCM, a cipher made per value (`gcm1.`). Both are read either way. A gateway older than this setting reads only `gcm1.`: set false on every replica before a rolling upgrade of several replicas, or before going back to such a version (docs/decisions/163); an off switch, not a tuning knob.',
  ),
  MOBILEID_PENDING_MAX_PER_APP: declare(
    int(1000, 1, 1_000_000),
    'Most mobile-ID notifications of one owner (the app whose issued or bound token carried them; a bare configured token is one owner) that may wait pending verification (the JWKS unreachable, or a kid it lacks). One more is refused (429, quarantined as PENDING_LIMIT, counted in gateway_mobile_id_rejections_total{reason="PENDING_LIMIT"}) instead of acknowledged.',
  ),
  MOBILEID_PLAIN_CHECKS: declare(
    bool(true),
    'true: a mobile-ID notification whose every field is as the wire shape takes it is checked by plain code, and only one that is not (or that holds a jwks_uri) goes through the zod schemas, which decide and word every refusal; the notification taken is the same object either way (docs/decisions/158). false: the zod schemas check every notification; an off switch, not a tuning knob.',
  ),
  MOBILEID_STRICT_ID_TOKEN: declare(
    bool(false),
    'true: full CIBA strictness, an id_token without iss, aud, exp, the urn:openid:params:jwt:claim:auth_req_id claim or at_hash, or an encrypted one, is refused (400). false: such a notification is accepted and the result reports each absent claim in idTokenChecks. Needs a JWKS (or the sandbox).',
  ),
  GATEWAY_API_KEYS: declare(
    namedList,
    "Comma-separated keys that apps send as Authorization: Bearer <key>, each `name:key` (the app's name in metrics and logs; several keys of one name are one app, for rotation) or a bare key (without `:`); an entry with nothing before or after its first `:` (`shop:`), no app name before it, or a blank (`Bearer abc`: give the key alone) or a character no header carries (a control character, or one past U+00FF) inside its key stops start-up, as does a key listed twice (here or in OPERATOR_API_KEYS) or an app named in both variables. Each holds every scope but `operator`, `cloud:approve` and `identity:approve`; for fewer, use GATEWAY_APPS_FILE. With neither set (nor OPERATOR_API_KEYS, nor a JWKS for JWTs) the API is open, which is allowed only when every upstream is sandboxed.",
    '(unset: open, or JWTs only)',
  ),
  GATEWAY_APPS_FILE: declare(
    optionalString,
    'A JSON or YAML file of apps, each with its name, its scopes and the SHA-256 of each of its keys (never the keys): see docs/apps-and-security.md. Its apps are accepted beside those of GATEWAY_API_KEYS; a bad file stops start-up naming the line. Read again on a reload (SIGHUP, POST /admin/reload): a bad file then keeps the running apps.',
    '(unset)',
    'reloadable',
  ),
  OPERATOR_API_KEYS: declare(
    namedList,
    "Comma-separated keys of operators (`name:key` or bare, as in GATEWAY_API_KEYS): each works as an API key with every scope, `operator` included (every app's refused notifications in mobileIdRejections, the list of apps). Needs GATEWAY_API_KEYS, GATEWAY_APPS_FILE or a JWKS; in open sandbox mode everyone is the operator.",
    '(unset: none)',
  ),
  AUTH_JWKS_URL: declare(
    httpUrl,
    'JWKS of the identity provider whose JWTs apps may send as Authorization: Bearer <JWT> (beside API keys): fetched at start, cached, fetched again when older than AUTH_JWKS_REFRESH_INTERVAL or on a token with an unknown kid, at most once per interval; keys already fetched keep working while it is down. Needs AUTH_ISSUER and AUTH_AUDIENCE.',
    '(unset: no JWTs)',
  ),
  AUTH_JWKS_FILE: declare(
    optionalString,
    "The identity provider's JWKS as a local JSON file, instead of AUTH_JWKS_URL (read at start and again on a reload: SIGHUP, POST /admin/reload). At most 1 MiB: a larger file is refused unparsed. A file with no key the gateway can verify signatures with is refused naming each key's kid and why; a key it cannot verify with beside usable ones is passed over with one warning (see JWKS files above).",
    '(unset)',
    'reloadable',
  ),
  AUTH_ISSUER: declare(
    optionalString,
    "The iss every JWT must carry (the identity provider's issuer URL); required with a JWKS.",
    '(unset)',
  ),
  AUTH_AUDIENCE: declare(
    list,
    "Comma-separated audiences: a JWT's aud must contain one of them; required with a JWKS.",
    '(unset)',
  ),
  AUTH_APP_CLAIM: declare(
    optionalString.refine(
      (s) => s === undefined || /^[A-Za-z0-9_.:/-]{1,128}$/.test(s),
      'must be a claim name (letters, digits, _ . : / -)',
    ),
    'The JWT claim that names the app (the owner of what it creates, its metrics label, its rate-limit bucket): a JWT of app `shop` is the same app as the API key `shop:<key>`.',
    '(unset: the first present of azp, client_id, sub)',
  ),
  AUTH_SCOPE_PREFIX: declare(
    z
      .string()
      .optional()
      .refine((s) => s === undefined || /^\S+$/.test(s), 'must not hold spaces'),
    "Only JWT scopes (the claims of AUTH_SCOPE_CLAIMS) that start with this prefix are read, the prefix removed: with `gateway:`, `gateway:cloud:read` grants cloud:read. Scopes that are not the gateway's are ignored.",
    '(unset: no prefix)',
  ),
  AUTH_SCOPE_CLAIMS: declare(
    {
      schema: z
        .string()
        .optional()
        .transform((s, ctx) => {
          const names = (s ?? 'scope,scp')
            .split(',')
            .map((v) => v.trim())
            .filter(Boolean);
          if (names.length === 0 || names.some((n) => !CLAIM_NAME.test(n))) {
            ctx.addIssue({
              code: 'custom',
              message: 'must be claim names separated by commas (letters, digits, _ . : / -)',
            });
            return z.NEVER;
          }
          return names;
        }),
      shown: 'scope,scp',
    },
    'Comma-separated JWT claims the scopes are read from, each a space-separated string or an array of strings: `roles` reads the app roles of a Microsoft Entra ID client-credential token (`scope,scp,roles` reads all three). An entry of AUTH_ISSUERS may name its own.',
  ),
  AUTH_ISSUERS: declare(
    optionalString,
    'A JSON or YAML file of several identity providers, each with its issuer, JWKS (jwksUrl, or jwksFile of at most 1 MiB, read as AUTH_JWKS_FILE is), audience, app claim, scope claims and apps (see docs/apps-and-security.md); a token is checked against the entry of its own iss only. Instead of AUTH_JWKS_URL, AUTH_ISSUER, AUTH_AUDIENCE, AUTH_APP_CLAIM, AUTH_APPS and AUTH_OPERATOR_APPS; read again on a reload (SIGHUP, POST /admin/reload).',
    '(unset: one provider from the AUTH_* variables, or none)',
    'reloadable',
  ),
  AUTH_APPS: declare(
    list,
    'Required with a JWKS: the JWT apps accepted, comma-separated, as the app claim (AUTH_APP_CLAIM) names them: `shop` (the app shop), `<client id>=<name>` (a client id, such as a UUID, taken as the app <name>), or `*` (any claim value that is an app name, 1 to 64 ASCII letters, digits, `_`, `.`, `-`). Any other token is refused. A JWT never takes the name of an app configured with keys (GATEWAY_API_KEYS, OPERATOR_API_KEYS, GATEWAY_APPS_FILE) unless an entry says they are one app: `shop=shop` (then it reads what the key shop:<key> created and shares its budgets).',
    '(unset: no JWT is accepted; required with AUTH_JWKS_URL or AUTH_JWKS_FILE)',
  ),
  AUTH_OPERATOR_APPS: declare(
    list,
    "Comma-separated JWT apps (names as AUTH_APPS gives them) whose tokens may grant the `operator` scope; every other token's `operator` is ignored. Each must be an app AUTH_APPS accepts.",
    '(unset: no JWT grants operator)',
  ),
  AUTH_JWKS_REFRESH_INTERVAL: declare(
    duration('1m', { minMs: 1000, maxMs: DAY_MS, message: 'must be from 1s to 24h' }),
    'The JWKS is fetched at most once per this interval, whatever asks for it (an unknown kid, or keys older than this); from 1s to 24h, so that keys the provider rotates in are fetched within a day.',
  ),
  AUTH_JWT_CACHE_SIZE: declare(
    int(10_000, 0, 1_000_000),
    'How many verified JWTs the gateway remembers (by their SHA-256, never in clear), each until its exp or until the JWKS is fetched again, so that a token sent with every request is verified once, not every time (260–800 µs each). 0 verifies every request (the off switch; decision 049).',
  ),
  IDEMPOTENCY_RETENTION: declare(
    duration('24h', {
      minMs: 1000,
      maxMs: 365 * DAY_MS,
      message: 'must be from 1s to 365d (0 would expire every record as it is written, and a retry would run again)',
    }),
    "How long idempotency records are kept (e.g. 90s, 30m, 24h, 7d, or milliseconds), from 1s to 365d: this long after its call ended (its answer stored, or its key kept bound to its request), and for as long as the call still runs. An agent's plan may be approved and executed for 24h, or for this long if shorter: a plan run again after an unknown outcome replays from these records what an earlier run completed, instead of sending it again.",
  ),
  EVENT_RETENTION: declare(
    duration('7d', {
      minMs: 1000,
      maxMs: 365 * DAY_MS,
      message: 'must be from 1s to 365d (0 would expire every event as it is written, and every cursor with it)',
    }),
    'How long webhook events are kept in the event log (and refused notifications in the quarantine), from 1s to 365d.',
  ),
  EVENT_NOTIFY_GROUPED: declare(
    bool(true),
    "PostgreSQL replicas: true: the NOTIFYs of events a replica publishes while its previous NOTIFY is in flight go out together once it is done, in one statement and one transaction (one commit, one turn of PostgreSQL's NOTIFY lock), each still its own notice; an event's webhook is answered once its NOTIFY committed, as before (docs/decisions/083). false: one statement and one transaction per event; an off switch, not a tuning knob. Ignored without DATABASE_URL.",
  ),
  EVENT_ORDER_PROBE_GROUPED: declare(
    bool(true),
    'PostgreSQL replicas: true: the events a replica publishes while its previous order probe is in flight (the read that checks no lower number holds an event not delivered here yet) share the next probe, one read below the highest of them that skips their own numbers; those below the lowest number it finds are delivered at once in sequence order, the others after a catch-up, as one probe per event would (docs/decisions/086). false: one probe per event that needs one; an off switch, not a tuning knob. Ignored without DATABASE_URL.',
  ),
  SUBSCRIBER_BUFFER_BYTES: declare(
    int(8 * 1024 * 1024, 1024, 2 ** 40),
    'Most bytes a WebSocket subscriber or an SSE event stream may leave unread: past it the gateway closes the connection (a WebSocket with 1013 and the last cursor of the subscription it could not deliver to; an SSE stream resumes with Last-Event-ID), rather than skip events or buffer without bound. A reserved SSE stream not connected yet is released past this many bytes of results waiting for its GET.',
  ),
  WS_KEEP_ALIVE_SWEEP: declare(
    bool(true),
    "true: the WebSocket keep-alive is one timer that passes over the connections every 6 s, a 24th of them every 250 ms, pinging a connection only when its peer sent nothing since its last visit and terminating one that sent nothing for 12 s after its ping; a connection that sends is never pinged (docs/decisions/090, 098). false: graphql-ws's keep-alive (kept in src/server/ws-protocol.ts), a timer per connection pinging every connection every 12 s. Either way a dead peer is terminated at most 24 s after the last byte it sent; an off switch.",
  ),
  SUBSCRIPTION_COMPILED_SELECTION: declare(
    bool(true),
    "true: a subscription's selection over each event runs as graphql-jit's compiled form of its document (compiled once per document), and graphql-js runs it again whenever the compiled result holds an error, so errors, paths and nulls are graphql-js's; the frames are byte for byte those of graphql-js (docs/decisions/062). false: graphql-js for every event; an off switch, not a tuning knob.",
  ),
  SUBSCRIPTION_COMPILED_SOURCE: declare(
    bool(true),
    "true: a subscription's source event stream is made from a plan kept per document and operation name (its operation, fragments, root field and that field's definition, worked out once), and each subscribe only coerces its variables, reads the field's arguments and calls its `subscribe`, answering as graphql-js does (variables that are built-in scalars or enums and arguments given variables are read by the plan, held equal to graphql-js by test; everything else and every refusal by graphql-js's own functions); an operation whose root is not one field without directives is left to graphql-js (docs/decisions/154). false: graphql-js's createSourceEventStream for every subscribe; an off switch, not a tuning knob.",
  ),
  DELIVERY_CLEAR_FROM_INTAKE: declare(
    bool(true),
    'true: a mobile-ID notification this process has just taken in hands its live subscribers on this process, in memory only, the clear values it sealed (the subject, unknown fields, tokens), so a delivery does not open what the intake sealed a moment before; events read from the log or from another replica are opened as before, and nothing more is stored (docs/decisions/062). false: every delivery opens what it reads; an off switch.',
  ),
  DELIVERY_PAYLOAD_FROM_INTAKE: declare(
    bool(true),
    'true: a mobile-ID notification this process has just stored is published to its subscribers on this process with the payload and meta objects the intake built and stored, not with their stored JSON parsed back; what other replicas and late subscribers read from the log is unchanged (docs/decisions/097). false: the published event carries its stored JSON parsed back, as for every other kind; an off switch, not a tuning knob.',
  ),
  DELIVERY_COMPLETE_WITH_LAST: declare(
    bool(true),
    "true: when a graphql-ws subscription's event stream has ended with the event just delivered (a mobile-ID authentication's one result, a provisioning's terminal state), its `next` and `complete` are written together by the transport and the subscription ends there, without another turn of its iterators; the frames are the same bytes (docs/decisions/089). false: the stream is asked for its end once more and the protocol writes the `complete`; an off switch, not a tuning knob.",
  ),
  DELIVERY_ONE_WRITE: declare(
    bool(true),
    "true: a graphql-ws subscription's `next` (and, with its last result, its `complete`) is framed by the gateway as ws would frame it, into one buffer and one write to the connection's socket; the bytes on the wire are the same (docs/decisions/093). false: each message goes through ws's `send`; an off switch, not a tuning knob.",
  ),
  DELIVERY_DIRECT_WRITE: declare(
    bool(true),
    "true (with DELIVERY_ONE_WRITE): a graphql-ws connection's first result of a turn of the event loop, when nothing is queued on its socket, is written at the turn's end straight to the socket's TCP handle, below Node's stream (Node's own write request, as its stream would make); what else is written to the socket in that turn follows it, and the bytes on the wire are the same (docs/decisions/150). false, or where Node does not offer that write (its permission model): every result goes through the socket's stream; an off switch, not a tuning knob.",
  ),
  LEDGER_CACHE_RECORDS: declare(
    int(10_000, 0, 1_000_000),
    'How many cloud ledger records (projects, networks, subnets, …: shared by every key, and never changed once stored) the gateway keeps in memory once read, about 1.2 KB each, least recently used out: a query takes them by id from memory, and a tree level reads only the ids of its rows (docs/decisions/070). 0 reads every row of every level from the store; the off switch.',
  ),
  UPSTREAM_TIMEOUT: declare(
    duration('10s', {
      minMs: 1,
      maxMs: HOUR_MS,
      message: 'must be more than 0 and at most 1h (0 would leave an upstream attempt without a limit)',
    }),
    'Time limit of one upstream attempt (headers and body), more than 0 and at most 1h.',
  ),
  UPSTREAM_MAX_ANSWER_BYTES: declare(
    int(16 * 1024 * 1024, 1024, 256 * 1024 * 1024),
    'Largest upstream answer body the gateway reads, in bytes. A longer one is cut off where it passes this, and the attempt fails as one whose answer could not be read (UPSTREAM_ANSWER_TOO_LARGE): retried on the cloud API under the same key, UPSTREAM_OUTCOME_UNKNOWN on an identity endpoint.',
  ),
  UPSTREAM_RETRY_BUDGET: declare(
    duration('20s', { minMs: 0, maxMs: HOUR_MS, message: 'must be at most 1h' }),
    "Total time an upstream call may spend retrying transient failures before UPSTREAM_UNAVAILABLE, at most 1h (an upstream's Retry-After is waited within it).",
  ),
  UPSTREAM_MAX_RETRIES: declare(int(4, 0, 20), 'Most retries of one upstream call after its first attempt.'),
  UPSTREAM_CIRCUIT_BREAKER: declare(
    perUpstream('on', switchValue),
    `A circuit breaker per upstream (${BREAKER_UPSTREAMS.join(', ')}): on or off, for every upstream and then per upstream, such as on,rfm=off. An open circuit answers UPSTREAM_UNAVAILABLE at once, with retryAfter and sent: false (docs/decisions/056).`,
  ),
  UPSTREAM_CIRCUIT_VOLUME: declare(
    perUpstream('5', wholeNumber(1, 1000)),
    'Breaker: how many of the last attempts to an upstream the rolling sample holds; the circuit can open once it is full. Per upstream like UPSTREAM_CIRCUIT_BREAKER (10,cloud=20).',
  ),
  UPSTREAM_CIRCUIT_ERROR_THRESHOLD: declare(
    perUpstream('0.5', openShare),
    'Breaker: the circuit opens when more than this share of the sample failed (a transport error, 502, 503 or 504, or a timeout while the upstream answered no other attempt; a 429 is not counted). Per upstream like UPSTREAM_CIRCUIT_BREAKER.',
  ),
  UPSTREAM_CIRCUIT_RESET_TIMEOUT: declare(
    perUpstream('30s', breakDuration),
    'Breaker: how long an open circuit refuses at once before it lets trial calls through (half-open), from 1s to 1h. Per upstream like UPSTREAM_CIRCUIT_BREAKER.',
  ),
  UPSTREAM_CIRCUIT_HALF_OPEN_ATTEMPTS: declare(
    perUpstream('10', wholeNumber(1, 1000)),
    'Breaker, half-open: at most this many trial calls at once (others are refused at once), and this many successful trials in a row close the circuit; the first failed trial opens it again. Per upstream like UPSTREAM_CIRCUIT_BREAKER.',
  ),
  IDEMPOTENT_UPSTREAMS: declare(
    list.refine((names) => names.every((n) => (KEY_OPTIONAL_UPSTREAMS as readonly string[]).includes(n)), {
      message: `must list upstreams among ${KEY_OPTIONAL_UPSTREAMS.join(', ')} (the cloud API always honours Idempotency-Key)`,
    }),
    `Comma-separated identity upstreams known to honour Idempotency-Key (${KEY_OPTIONAL_UPSTREAMS.join(', ')}): a request to them whose outcome is unknown (timeout, reset, 5xx other than 503 with Retry-After) is retried automatically, as on the cloud API. Others answer UPSTREAM_OUTCOME_UNKNOWN instead (docs/decisions/011).`,
    '(unset: none)',
  ),
  RATE_LIMIT_CREATIONS: declare(
    rateLimit,
    'Per API key: how many creations (mutations that call an upstream, each field one point) per window, as <points>/<window> such as 20/1m; off for no limit. Shared by replicas on PostgreSQL.',
  ),
  RATE_LIMIT_READS: declare(
    rateLimit,
    'Per API key: how many other operations (queries, subscriptions, mutations that call no upstream) per window, as <points>/<window> such as 600/1m; off for no limit.',
  ),
  APP_EVENTS_PER_MINUTE: declare(
    int(3000, 0, 100_000_000),
    "Per app and replica: most webhook events (mobile-ID notifications on its tokens, verification and identification callbacks to its addresses) stored per minute; past it they are refused with 429, nothing stored, and counted in gateway_app_storage_refused_total. 0: no limit. A configured token shared by every app is not an app's.",
  ),
  APP_EVENT_BYTES_PER_MINUTE: declare(
    int(16 * 1024 * 1024, 0, 2 ** 40),
    'Per app and replica: most bytes of webhook events (their stored JSON) stored per minute, like APP_EVENTS_PER_MINUTE. 0: no limit.',
  ),
  APP_EVENTS_STORED: declare(
    int(1_000_000, 0, 2 ** 40),
    'Per app: most webhook events stored at once (they are kept for EVENT_RETENTION), like APP_EVENTS_PER_MINUTE. 0: no limit.',
  ),
  APP_EVENT_BYTES_STORED: declare(
    int(1024 * 1024 * 1024, 0, 2 ** 50),
    'Per app: most bytes of webhook events stored at once, like APP_EVENTS_STORED. 0: no limit.',
  ),
  APP_NOTIFICATION_TOKENS: declare(
    int(10_000, 0, 100_000_000),
    'Per app: most live (unexpired) notification tokens issued by issueMobileIdNotificationToken; past it the mutation is RATE_LIMITED and nothing is stored. 0: no limit.',
  ),
  APP_NOTIFICATION_TOKENS_PER_MINUTE: declare(
    int(600, 0, 100_000_000),
    'Per app and replica: most notification tokens issued per minute, like APP_NOTIFICATION_TOKENS. 0: no limit.',
  ),
  APP_CALLBACK_ADDRESSES: declare(
    int(1_000, 0, 100_000_000),
    'Per app: most identification callback addresses (workflows it created identifications of); past it createIdentification of a new workflow is RATE_LIMITED before any upstream call. 0: no limit.',
  ),
  CALLBACK_BODY_KEPT_BYTES: declare(
    int(8192, 1024, 1024 * 1024),
    "Most bytes of a verification or identification callback body's JSON kept in the event log (the route reads up to 1 MiB); a larger body is kept as its id, status and event kind with _truncated { bytes, keptBytes }.",
  ),
  APP_CALLBACK_ADDRESSES_PER_MINUTE: declare(
    int(60, 0, 100_000_000),
    'Per app and replica: most new identification callback addresses per minute, like APP_CALLBACK_ADDRESSES. 0: no limit.',
  ),
  APP_LIVE_SUBSCRIPTIONS: declare(
    int(100_000, 0, 100_000_000),
    "Per app and replica: most live subscriptions at once, over every streaming transport together (graphql-ws, SSE, MCP's subscriptions/listen and waiting wait_for_events); past it a new one is refused with RATE_LIMITED (extensions.bound subscriptions:live, limit), and the app's others go on. Callers with no app (an open gateway) share one count. 0: no limit.",
  ),
  IDEMPOTENCY_TAKEOVER: declare(
    duration('10s', {
      minMs: 300,
      maxMs: 7 * 86_400_000,
      message: 'must be from 300ms to 7d (a live call renews its lease every third of it, on a timer)',
    }),
    "How long the idempotency key of a call whose replica crashed stays locked before a call with the same key (on any replica) takes it over. A live call renews its lease every third of this, so a slow call is never taken over; a composite provisioning, and an agent's plan being executed, show they are alive the same way, and one left running by a crashed replica is resumed, or is UNKNOWN and run again, after this long (docs/decisions/012).",
  ),
  IDEMPOTENCY_WAIT: declare(
    duration('5s', { minMs: 0, maxMs: HOUR_MS, message: 'must be at most 1h' }),
    'How long a request waits for an in-flight request with the same idempotency key before IDEMPOTENCY_KEY_IN_USE, at most 1h.',
  ),
  IDEMPOTENCY_REPLAY_FROM_LEDGER: declare(
    bool(true),
    "true: the idempotency record of a creation keeps only the id of the resource it created; a replay (the same request with the same key) reads the resource from the ledger, where it was written with the key's completion or before it and never changes. A creation then writes its spec and the upstream's answer once instead of twice (they stood in both tables): a tenth fewer WAL pages and less CPU per creation (docs/decisions/143). Only for the cloud's creations, whose ids are the upstream's answer to the call; the identity service keeps copies. Records kept as copies (before this setting, or with it off) are replayed as they are; a gateway of an earlier release cannot replay a record kept as an id, so before rolling back run with false for IDEMPOTENCY_RETENTION. false: the record keeps a copy of the resource, as before; an off switch, not a tuning knob.",
  ),
  VERIFICATION_RESULTS_BATCH_SIZE: declare(
    int(100, 1, 10_000),
    'Most verification ids in one POST /api/v2/verifications/results.',
  ),
  // Unset: decided once the upstreams are known (on only while every upstream is sandboxed).
  GRAPHQL_INTROSPECTION: declare(
    optionalBool,
    'Introspection and the GraphiQL page, over HTTP, WebSocket and SSE alike; false turns both off. With a real upstream they are off unless set to true (as Apollo Server does in production).',
    '(true while every upstream is sandboxed, else false)',
  ),
  SANDBOX_UPSTREAMS: declare(
    list.refine((names) => names.every((n) => (UPSTREAM_NAMES as readonly string[]).includes(n)), {
      message: `must list upstreams among ${UPSTREAM_NAMES.join(', ')}`,
    }),
    `Comma-separated upstreams the embedded simulator serves while others are real: ${UPSTREAM_NAMES.join(', ')}. Without it, an upstream left unconfigured beside real ones stops start-up, naming the variable to set.`,
    '(unset: all, only when no upstream is configured)',
  ),
  GRAPHQL_MAX_ALIASES: declare(
    int(15, 0, 10_000),
    'Most aliases in one GraphQL operation (HTTP and WebSocket); more is refused before anything runs.',
  ),
  GRAPHQL_MAX_DEPTH: declare(
    int(6, 1, 1_000),
    'Deepest field nesting of one operation (introspection below __schema is not counted).',
  ),
  GRAPHQL_MAX_TOKENS: declare(int(1000, 1, 1_000_000), 'Most lexical tokens in one GraphQL document.'),
  GRAPHQL_MAX_DIRECTIVES: declare(int(50, 0, 10_000), 'Most directives in one operation.'),
  GRAPHQL_MAX_COST: declare(
    int(5000, 1, 100_000_000),
    'Highest estimated cost of one operation (GraphQL Armor cost: objects 2, scalars 1, each list multiplied by its size estimate), plus one point per element of every list in its arguments and variables.',
  ),
  PROVISIONING_MAX_TOPICS: declare(
    int(100, 1, 10_000),
    'Most topics in one provisionKafkaCluster or planKafkaCluster; more is BAD_USER_INPUT before any work.',
  ),
  PROVISIONING_MAX_USERS: declare(
    int(50, 1, 10_000),
    'Most users (Kafka users, or VM users) in one composite provisioning or plan; more is BAD_USER_INPUT before any work. ACLs, group ACLs and SSH keys are at most 50 per user.',
  ),
  PROVISIONING_MAX_CONCURRENT_PLANS: declare(
    int(2, 1, 1_000),
    'Per app: most planKafkaCluster and planVirtualMachine of one app worked out at once; one more is refused at once with RATE_LIMITED (extensions.limit names this variable), before any work. The plans in flight of every app take turns of a few milliseconds on the event loop.',
  ),
  GRAPHQL_LIST_SIZE_ESTIMATE: declare(
    int(5, 1, 100_000),
    'Size assumed for a list field in the cost estimate when neither a `first` argument nor a list argument bounds it.',
  ),
  GRAPHQL_COST_FORMULA: declare(
    bool(true),
    "true: an operation's cost (GRAPHQL_MAX_COST) is worked out once per document as a formula, and a request only reads the sizes of its variables' lists. false: every request walks its document with GraphQL Armor's rule instead, which gives the same verdicts and costs more (docs/decisions/049); an off switch, not a tuning knob.",
  ),
  GRAPHQL_COMPILED_MUTATIONS: declare(
    bool(true),
    "true: on POST /graphql's direct path, a mutation of one root field that is a cloud creation (createProject, createNetwork, createSubnet, createIpAddress, createKafkaCluster, createKafkaTopic, createKafkaUser, createVirtualMachine), without a directive on it, runs as graphql-jit's compiled form of its document once graphql-js accepts its variables; the root field's outcome is kept on the request, and when the compiled answer holds an error graphql-js runs the operation again answering the root field from what was kept, so no creation runs twice and errors, paths and nulls are graphql-js's (docs/decisions/087, 099). false: graphql-js for every mutation; an off switch, not a tuning knob.",
  ),
  GRAPHQL_VARIABLES_CHECK: declare(
    bool(true),
    "true: before a compiled form of the direct path runs (GRAPHQL_COMPILED_MUTATIONS, the store-only queries), its variables are checked by a check made once per operation that gives graphql-js's verdict (accepted or not) without graphql-js's coercion; variables the check refuses go to graphql-js, which decides and words the errors (docs/decisions/099). false: graphql-js's getVariableValues before every compiled run; an off switch, not a tuning knob.",
  ),
  GRAPHQL_MAX_BODY_BYTES: declare(
    int(102_400, 1024, 100 * 1024 * 1024),
    'Largest GraphQL request body over HTTP, and largest WebSocket message, in bytes.',
  ),
  SANDBOX_FAULT_RATE: declare(
    ratio(0),
    'Share of sandbox upstream requests that fail (5xx, 429, reset, timeout), a decimal number from 0 to 1 such as 0.1.',
  ),
  SANDBOX_LATENCY_MS: declare(int(0, 0, 60_000), 'Latency added to every sandbox upstream response, in milliseconds.'),
  SANDBOX_CLOUD_SHAPE: declare(
    {
      schema: z
        .string()
        .trim()
        .optional()

        .default(DEFAULT_CLOUD_SHAPE.name)
        .refine((s) => s === 'random' || cloudShapeByName(s) !== undefined, {
          message:
            "must be random or <id>+<token>+<address>: id one of id, serviceId, data.id, metadata.id (or, beyond the gateway's guesses, uuid, resource.uuid, items.0.id); " +
            'token one of access_token, accessToken, token (or iamToken, auth.iamToken); address one of address, ipAddress, ip_address, ip, publicIp, absent (or externalAddress, addresses.0.ip)',
        }),
      shown: DEFAULT_CLOUD_SHAPE.name,
    },
    `Where the cloud sandbox puts the created id, the token field and an IP's address in its answers (the spec shows none of them): \`<id>+<token>+<address>\` with id one of id, serviceId, data.id, metadata.id; token one of access_token, accessToken, token; address one of address, ipAddress, ip_address, ip, publicIp, absent (e.g. ${CLOUD_SHAPE_MODES[1]!.name}); or \`random\`, printed at start-up with its seed. Beyond the gateway's guesses, to exercise the *_PATH variables: id uuid, resource.uuid or items.0.id; token iamToken or auth.iamToken; address externalAddress or addresses.0.ip (e.g. uuid+iamToken+addresses.0.ip).`,
  ),
  SANDBOX_CLOUD_SHAPE_SEED: declare(
    z
      .string()
      .optional()
      .transform((s, ctx) => {
        if (s === undefined || s.trim() === '') return undefined;
        // Decimal digits only, as the integers: Number() would take 0x10 as 16 and 1e3 as 1000.
        const v = /^\s*\d+\s*$/.test(s) ? Number(s) : Number.NaN;
        if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) {
          ctx.addIssue({ code: 'custom', message: 'must be an integer from 0 to 4294967295' });
          return z.NEVER;
        }
        return v;
      }),
    "Seed of SANDBOX_CLOUD_SHAPE=random, to repeat a run's shape.",
    '(unset: a new seed each start)',
  ),
  SANDBOX_CALLBACK_DELAY_MS: declare(
    int(1500, 0, 600_000),
    'Delay before the sandbox verification service calls back.',
  ),
  TRUSTED_DOCUMENTS: declare(
    choice(['off', 'allow', 'enforce'], 'off', 'lower'),
    "Trusted documents: off; allow (operations by documentId or persisted-query hash from the manifest, and any other document); enforce (only the manifest's documents run, plus introspection when GRAPHQL_INTROSPECTION is on).",
  ),
  TRUSTED_DOCUMENTS_MANIFEST: declare(
    optionalString,
    'Path of the manifest, { "<documentId>": "<document>" } as GraphQL Code Generator\'s client preset writes persisted-documents.json; read at start-up and again on a reload (SIGHUP, POST /admin/reload), required unless TRUSTED_DOCUMENTS is off. At most 32 MiB (some 70,000 documents): a larger file is refused unparsed.',
    '(unset)',
    'reloadable',
  ),
  MCP_MUTATIONS: declare(
    choice(['none', 'approve', 'all'], 'none', 'lower'),
    "What agents may change over MCP (POST /mcp): none (reads and plans only), approve (every mutation that reaches an upstream, creations, provisionings and identity checks alike, only plans, and runs once its plan is approved: by another app or person holding its approve scope through approvePlan or GET /approvals, or with MCP_APPROVAL=elicitation also by the agent's user through the MCP client) or all (mutation tools run at once; for trusted automation, warned at start-up).",
  ),
  MCP_EXECUTE: declare(
    bool(false),
    'true: MCP offers a read-only `execute` tool (any query, never a mutation) to apps holding the operator scope.',
  ),
  MCP_TOOLSETS: declare(
    optionalString,
    'Named MCP endpoints, each with its own tools: `name=tool,tool;name2=*` publishes /mcp/name and /mcp/name2 (tool names as tools/list shows them; * is every tool). /mcp always serves every tool.',
    '(unset: /mcp only)',
  ),
  MCP_ALLOWED_HOSTS: declare(
    hostNames,
    'Comma-separated host names that /mcp answers besides localhost, 127.0.0.1, [::1], HOST and the host of PUBLIC_URL: a name or address alone, any case (gw.example, 10.0.0.5, [fd00::1]; no scheme, port or path; an international name in its xn-- form); the Host and Origin headers of every MCP request must name one of them, compared without their port (DNS rebinding). An entry no header could match stops start-up.',
    '(unset)',
  ),
  MCP_APPROVAL: declare(
    choice(['elicitation', 'approver'], 'approver', 'lower'),
    "Who approves an agent's plan under MCP_MUTATIONS=approve (docs/decisions/068): approver (only another principal holding the plan's approve scope, through approvePlan or GET /approvals; the agent's client is shown the plan and the link) or elicitation (also the agent's user, through their MCP client's form: an approval is then the client's word, and a client that auto-accepts approves its own plans).",
  ),
  MCP_APPROVAL_TTL: declare(
    duration('15m', {
      minMs: 1000,
      maxMs: DAY_MS,
      message: 'must be from 1s to 24h (a plan may be approved and executed only within 24h of being made)',
    }),
    "How long an approval of an agent's plan stays valid, from 1s to 24h (a plan's longest lifetime; IDEMPOTENCY_RETENTION, if shorter, is its lifetime, and an approval never runs a plan past it); a plan not executed by then needs approving again.",
  ),
  OTEL_SDK_DISABLED: declare(
    bool(false),
    'OpenTelemetry: true turns tracing off whatever the other OTEL_* variables say.',
  ),
  OTEL_TRACES_EXPORTER: declare(
    choice(['none', 'otlp', 'console'], 'none', 'lower'),
    'OpenTelemetry: none (tracing off), otlp (OTLP over HTTP, JSON) or console. Tracing is off by default.',
  ),
  OTEL_EXPORTER_OTLP_ENDPOINT: declare(
    httpUrlOr('http://localhost:4318'),
    'OpenTelemetry: base URL of the OTLP/HTTP collector; traces go to <endpoint>/v1/traces.',
  ),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: declare(
    z
      .string()
      .trim()
      .url('must be an absolute URL')
      .refine((u) => /^https?:\/\//i.test(u), 'must be an http(s) URL')
      .optional(),
    'OpenTelemetry: full URL for traces, instead of OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces.',
    '(unset)',
  ),
  OTEL_EXPORTER_OTLP_HEADERS: declare(
    z
      .string()
      .optional()
      .transform((s, ctx) => {
        const headers: Record<string, string> = {};
        /** Each header name (lower case) and the pair that gave it. */
        const pairOf = new Map<string, number>();
        for (const [i, pair] of (s ?? '')
          .split(',')
          .map((p) => p.trim())
          .filter(Boolean)
          .entries()) {
          const eq = pair.indexOf('=');
          const name = eq > 0 ? pair.slice(0, eq).trim() : '';
          if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) {
            // The value may be a secret: the message names the position, never the text.
            ctx.addIssue({
              code: 'custom',
              message: 'must be key=value pairs separated by commas (a pair has no valid header name)',
            });
            return z.NEVER;
          }
          // Header names are case-insensitive: a=1,A=2 kept only the later, whichever was meant.
          const key = name.toLowerCase();
          const first = pairOf.get(key);
          if (first !== undefined) {
            ctx.addIssue({
              code: 'custom',
              message: `pair ${i + 1} names the header of pair ${first} again (${key}; names are compared in any case): give each header once`,
            });
            return z.NEVER;
          }
          pairOf.set(key, i + 1);
          let value: string;
          try {
            value = decodeURIComponent(pair.slice(eq + 1).trim());
          } catch {
            ctx.addIssue({ code: 'custom', message: `the value of ${name} is not valid URL encoding` });
            return z.NEVER;
          }
          // A header value holds no control character but the tab (RFC 9110 §5.5): a decoded %0A would split the
          // header, and Node refuses such a value at every export, which went unseen.
          if (/[\x00-\x08\x0a-\x1f\x7f]/.test(value)) {
            ctx.addIssue({
              code: 'custom',
              message: `pair ${i + 1} (${key}): its value holds a control character (such as %0A or %00), which no header value may`,
            });
            return z.NEVER;
          }
          headers[key] = value;
        }
        return headers;
      }),
    'OpenTelemetry: headers sent to the collector, as key=value pairs separated by commas (values URL-encoded).',
    '(unset)',
  ),
  OTEL_SERVICE_NAME: declare(text('gateway'), 'OpenTelemetry: service.name of every span.'),
  OTEL_TRACES_SAMPLER: declare(
    choice(
      [
        'always_on',
        'always_off',
        'traceidratio',
        'parentbased_always_on',
        'parentbased_always_off',
        'parentbased_traceidratio',
      ],
      'parentbased_always_on',
      'lower',
    ),
    'OpenTelemetry: always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio.',
  ),
  OTEL_TRACES_SAMPLER_ARG: declare(
    ratio(1),
    'OpenTelemetry: the sampling ratio of the traceidratio samplers, a decimal number from 0 to 1 such as 0.25 (digits with an optional decimal point: no exponent, hex or leading dot).',
  ),
  APOLLO_KEY: declare(
    optionalString,
    "Apollo GraphOS API key, read by Apollo Server itself: set, it reports usage to GraphOS, and every POST /graphql goes through Apollo's pipeline (the direct path does not reproduce its reporting plugins; the gateway says so at start-up).",
    '(unset)',
  ),
  APOLLO_SCHEMA_REPORTING: declare(
    // Apollo Server reads the variable itself and acts on `true` alone, exactly: any other word (`yes`, `TRUE`)
    // would turn schema reporting off without a word, so it is refused here rather than read as the others are.
    z
      .string()
      .optional()
      .refine((s) => s === undefined || s === 'true' || s === 'false', {
        message: 'must be true or false (exactly: Apollo Server reads it itself and acts on true alone)',
      }),
    "Apollo GraphOS schema reporting, read by Apollo Server itself (true: report the schema, with APOLLO_KEY; exactly true or false). Set, every POST /graphql goes through Apollo's pipeline, as with APOLLO_KEY.",
    '(unset)',
  ),
  NODE_ENV: declare(
    optionalString,
    "Read by libraries, not by the gateway (every Apollo Server default that follows it is set explicitly). Unset, the gateway's start (npm start, dist/src/main.js) makes it production before any library loads, so graphql-js skips its development checks for a second copy of itself (~19 µs of CPU per notification in the realistic mix; docs/decisions/128). Set, it is left as it is.",
    '(unset: production)',
  ),
  V8_HEAP_GROWING_PERCENT: declare(
    int(HEAP_GROWING_PERCENT.fallback, 0, HEAP_GROWING_PERCENT.max),
    "V8's collector, as the gateway's start (npm start, dist/src/main.js) sets it before any library loads: how far, in per cent, the old generation may grow past what a full collection left before the next one (node's --heap-growing-percent). Under load V8's own factor let it grow ~10–20 %, a mark-compact every few seconds, each one on the requests' core; at 300 they came about a third as often, and a creation's p99 at a fixed rate read lower in three trickle runs of four, for up to ~4 times the live heap in memory before a collection (docs/decisions/138). 0: V8's own factor. Not read by a gateway built inside another process.",
  ),
  V8_ALLOCATION_SITE_PRETENURING: declare(
    bool(ALLOCATION_SITE_PRETENURING),
    "V8's collector, as the gateway's start sets it before any library loads: true lets V8 allocate the objects of a site whose objects mostly survive straight into the old generation (node's default); false, the default, keeps every new object young (node's --no-allocation-site-pretenuring), so that dead objects of a request do not keep its other objects alive through the scavenges until the next mark-compact (docs/decisions/116, 138). Not read by a gateway built inside another process.",
  ),
  GATEWAY_TEST_PAUSE_AT: declare(
    z.enum(PHASES, `must be one of ${PHASES.join(', ')}`).optional(),
    `Tests only: the process stops at this phase and waits to be killed (${PHASES.join(', ')}); see docs/decisions/014.`,
    '(unset)',
  ),
  LOG_LEVEL: declare(
    choice(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], 'info', 'lower'),
    'pino log level: fatal, error, warn, info, debug, trace or silent (any case).',
  ),
  LOG_FORMAT: declare(
    choice(['auto', 'json', 'pretty'], 'auto', 'lower'),
    'auto (a compact line per event when stdout is a terminal, JSON otherwise), json (one JSON object per line, for collectors) or pretty; any case.',
  ),
};

export const ENV_VARS: readonly EnvVar[] = Object.entries(VARS).map(([name, v]) => ({
  name,
  default: v.shown,
  description: v.description,
  reloadable: v.reloadable,
}));

const envSchema = z.object(
  Object.fromEntries(Object.entries(VARS).map(([name, v]) => [name, v.schema])) as {
    [K in keyof typeof VARS]: (typeof VARS)[K]['schema'];
  },
);

/** The schema of each variable, and the default its table row shows (tests check the two agree). */
export const DECLARED_VARS: Readonly<
  Record<string, { readonly schema: z.ZodType; readonly shown: string; readonly derived: boolean }>
> = VARS;

type Env = z.infer<typeof envSchema>;

export interface Config {
  readonly port: number;
  readonly host: string;
  /** Explicit PUBLIC_URL; when unset the gateway derives it from the port it listens on. */
  readonly publicUrl: string | undefined;
  readonly dataDir: string;
  readonly databaseUrl: string | undefined;
  /** SQLITE_COMMIT_WINDOW_MS: how long a group of writes waits for more, when many callers write (0: the end of its turn). */
  readonly sqliteCommitWindowMs: number;
  /** SQLITE_CHECKPOINT_INTERVAL_MS: the least time between two WAL checkpoints. */
  readonly sqliteCheckpointIntervalMs: number;
  /** SQLITE_WAL_RESTART_FRAMES: the WAL's size in frames from which writes wait for its restart (docs/decisions/107). */
  readonly sqliteWalRestartFrames: number;
  /** SQLITE_WAL_PREALLOCATE: a missing WAL is written at its full size before SQLite opens it (docs/decisions/141). */
  readonly sqliteWalPreallocate: boolean;
  /** SQLITE_CHECKPOINT_SYNC: the checkpoint worker syncs the database file after each copy (docs/decisions/136). */
  readonly sqliteCheckpointSync: boolean;
  /** SQLITE_CHECKPOINT_NICE: nice steps between the event loop and the checkpoint worker (docs/decisions/139). */
  readonly sqliteCheckpointNice: number;
  /** SQLITE_WAL_READ_AHEAD_MB: how far ahead of the writer the WAL's idle parts are read (docs/decisions/145). */
  readonly sqliteWalReadAheadMb: number;
  /** SQLITE_CACHE_KIB: the page cache of the database connection, in KiB (docs/decisions/118). */
  readonly sqliteCacheKib: number;
  /** STORE_PG_NAMED_STATEMENTS: statements sent again and again go named, parsed once per connection (PostgreSQL). */
  readonly storePgNamedStatements: boolean;
  /** SQLITE_CLAIM_WITHOUT_SYNC: a fresh idempotency claim does not wait for its WAL sync (docs/decisions/078). */
  readonly sqliteClaimWithoutSync: boolean;
  /** SQLITE_SYNCHRONOUS; ignored with DATABASE_URL. */
  readonly sqliteSynchronous: 'FULL' | 'NORMAL';
  /** DATABASE_MIGRATIONS: apply the missing migrations at start-up, or wait for `main.js migrate` to apply them. */
  readonly databaseMigrations: 'apply' | 'wait';
  readonly cloud: {
    readonly url: string | undefined;
    readonly token: string | undefined;
    readonly credentials: Readonly<Record<string, unknown>> | undefined;
  };
  readonly verification: { readonly url: string | undefined; readonly token: string | undefined };
  readonly identification: {
    readonly url: string | undefined;
    readonly prodlikeUrl: string | undefined;
    readonly token: string | undefined;
    /** IDENTIFICATION_PRODLIKE_API_TOKEN; undefined means `token` is used for PRODLIKE too. */
    readonly prodlikeToken: string | undefined;
  };
  readonly rfmUrl: string | undefined;
  readonly mobileId: {
    readonly jwksUrl: string | undefined;
    readonly jwksFile: string | undefined;
    readonly issuer: string | undefined;
    readonly clientId: string | undefined;
    /** MOBILEID_STRICT_ID_TOKEN. */
    readonly strictIdToken: boolean;
    /** MOBILEID_PLAIN_CHECKS: a well-formed notification checked by plain code, zod for the rest. */
    readonly plainChecks: boolean;
    /** MOBILEID_PENDING_MAX_PER_APP. */
    readonly pendingMaxPerApp: number;
  };
  /** TOKEN_ENCRYPTION_KEY as given (decode with `decodeKey`); undefined means a key file in DATA_DIR. */
  readonly tokenEncryptionKey: string | undefined;
  /** SEAL_KEPT_CIPHER: seal as `ctr1` (AES-256-CTR and HMAC-SHA256, ciphers kept) or as `gcm1` (src/secret.ts). */
  readonly sealKeptCipher: boolean;
  /** AUTH_*: apps that sign in with their identity provider's JWTs (src/auth/jwt.ts); null when no JWKS is set. */
  readonly jwtAuth: JwtAuthConfig | null;
  /** GATEWAY_API_KEYS: `name:key` or bare keys (src/auth/caller.ts parseAppKey). */
  readonly apiKeys: readonly AppKey[];
  /** OPERATOR_API_KEYS: also accepted as API keys. */
  readonly operatorKeys: readonly AppKey[];
  /** GATEWAY_APPS_FILE's apps (src/auth/apps-file.ts). */
  readonly appsFile: readonly AppFileEntry[];
  /** GATEWAY_APPS_FILE as an absolute path (a reload reads it again), or undefined. */
  readonly appsFilePath: string | undefined;
  /** No app key of any kind and no JWKS is configured: every caller is the one open caller (sandbox only). */
  readonly open: boolean;
  readonly idempotencyRetentionMs: number;
  readonly idempotencyWaitMs: number;
  /** IDEMPOTENCY_TAKEOVER: the lease of a pending idempotency record, renewed every third of it while its call runs. */
  readonly idempotencyTakeoverMs: number;
  /** IDEMPOTENCY_REPLAY_FROM_LEDGER: a creation's idempotency record keeps its resource's id, not a copy. */
  readonly idempotencyReplayFromLedger: boolean;
  /** PROVISIONING_MAX_TOPICS and PROVISIONING_MAX_USERS. */
  readonly provisioningBounds: { maxTopics: number; maxUsers: number };
  /** PROVISIONING_MAX_CONCURRENT_PLANS: plans of one app worked out at once. */
  readonly maxConcurrentPlans: number;
  /** Per-app bounds on what its credentials can make the gateway store (0: no limit); see src/store/app-storage.ts and docs/decisions/051. */
  readonly storageLimits: {
    readonly events: {
      readonly perMinute: number;
      readonly charsPerMinute: number;
      readonly total: number;
      readonly totalChars: number;
    };
    readonly 'notification-tokens': { readonly perMinute: number; readonly total: number };
    readonly 'callback-addresses': { readonly perMinute: number; readonly total: number };
  };
  /** APP_LIVE_SUBSCRIPTIONS: most live subscriptions of one app on this replica, 0: no limit (src/ratelimit/). */
  readonly liveSubscriptions: number;
  /** CALLBACK_BODY_KEPT_BYTES: most of a callback body's JSON kept (src/identity/callbacks.ts). */
  readonly callbackBodyKeptBytes: number;
  /** Per-API-key limits (null: no limit); see src/ratelimit/ and docs/decisions/023. */
  readonly rateLimits: { readonly creations: RateLimit | null; readonly reads: RateLimit | null };
  readonly eventRetentionMs: number;
  /** PostgreSQL: the NOTIFYs published while one is in flight go out in one statement (EVENT_NOTIFY_GROUPED). */
  readonly eventNotifyGrouped: boolean;
  /** PostgreSQL: the order probes needed while one is in flight go out as one (EVENT_ORDER_PROBE_GROUPED). */
  readonly eventOrderProbeGrouped: boolean;
  /** SUBSCRIBER_BUFFER_BYTES: unsent bytes of a WebSocket subscriber or SSE stream past which it is closed as slow. */
  readonly subscriberBufferBytes: number;
  /** WS_KEEP_ALIVE_SWEEP: the WebSocket keep-alive as one sweep that pings quiet connections only (false: graphql-ws's timers). */
  readonly wsKeepAliveSweep: boolean;
  /** The delivery path's shortcuts (docs/decisions/062), each with its off switch. */
  /** LEDGER_CACHE_RECORDS: cloud ledger records kept in memory once read (0: none; docs/decisions/070). */
  readonly ledgerCacheRecords: number;
  readonly delivery: {
    /** SUBSCRIPTION_COMPILED_SELECTION: a subscription's selection as graphql-jit's compiled form (graphql-js on any error). */
    readonly compiledSelection: boolean;
    /** SUBSCRIPTION_COMPILED_SOURCE: a subscription's source event stream made from a plan per document (graphql-js's otherwise). */
    readonly compiledSource: boolean;
    /** DELIVERY_CLEAR_FROM_INTAKE: a notification's sealed values handed to this process's live subscribers in clear, in memory. */
    readonly clearFromIntake: boolean;
    /** DELIVERY_PAYLOAD_FROM_INTAKE: a notification published with the payload object its intake stored, not parsed back. */
    readonly payloadFromIntake: boolean;
    /** DELIVERY_COMPLETE_WITH_LAST: a graphql-ws subscription's last result written with its `complete`, no further iterator turn. */
    readonly completeWithLast: boolean;
    /** DELIVERY_ONE_WRITE: a graphql-ws subscription's frames for a result built in one buffer, one socket write. */
    readonly oneWrite: boolean;
    /** DELIVERY_DIRECT_WRITE: a connection's first result of a turn written to its socket's TCP handle, below the stream. */
    readonly directWrite: boolean;
  };
  readonly upstream: {
    readonly timeoutMs: number;
    /** UPSTREAM_MAX_ANSWER_BYTES: the longest answer body read. */
    readonly maxAnswerBytes: number;
    readonly retryBudgetMs: number;
    readonly maxRetries: number;
    /** IDEMPOTENT_UPSTREAMS: identity upstreams whose unknown outcomes are retried like the cloud's. */
    readonly idempotent: readonly string[];
    /** UPSTREAM_CIRCUIT_*: each upstream's breaker (src/upstream/breaker.ts). */
    readonly breakers: Readonly<Record<BreakerUpstream, BreakerSettings>>;
  };
  readonly resultsBatchSize: number;
  /** The *_PATH variables: exact JSON paths of the shapes the specs do not show (null: the guesses). */
  readonly shapePaths: ShapePaths;
  readonly introspection: boolean;
  /** GRAPHQL_COMPILED_MUTATIONS: cloud creation mutations of the direct path as graphql-jit's compiled form (decision 099). */
  readonly compiledMutations: boolean;
  /** GRAPHQL_VARIABLES_CHECK: a compiled run's variables checked once per operation's check, graphql-js on refusal (decision 099). */
  readonly variablesCheck: boolean;
  /**
   * The Apollo GraphOS variables that are set (APOLLO_KEY, APOLLO_SCHEMA_REPORTING): Apollo Server reads them itself
   * and installs reporting plugins, which the direct path of POST /graphql does not reproduce.
   */
  readonly apolloReporting: readonly string[];
  /** Abuse limits of GraphQL operations, over HTTP and WebSocket alike (src/execution/limits.ts). */
  readonly graphqlLimits: GraphqlLimitsConfig;
  readonly sandbox: {
    readonly faultRate: number;
    readonly latencyMs: number;
    readonly callbackDelayMs: number;
    /** SANDBOX_CLOUD_SHAPE: a shape name, or `random` (resolved at start with `cloudShapeSeed`). */
    readonly cloudShape: string;
    readonly cloudShapeSeed: number | undefined;
  };
  readonly logLevel: string;
  /** auto, json or pretty (src/logger.ts resolveLogFormat). */
  readonly logFormat: 'auto' | 'json' | 'pretty';
  /** GATEWAY_TEST_PAUSE_AT (tests only, src/phases.ts). */
  readonly testPauseAt: Phase | undefined;
  /** TRUSTED_DOCUMENTS; the manifest is read (and checked) by the gateway at start-up. */
  readonly trustedDocuments: {
    readonly mode: 'off' | 'allow' | 'enforce';
    readonly manifest: string | undefined;
    /** TRUSTED_DOCUMENTS_RELOAD_REUSE: a reload takes the running manifest's unchanged documents as they are. */
    readonly reloadReuse: boolean;
  };
  /** MCP_*: the agents' endpoint (src/server/mcp/, docs/decisions/060). */
  readonly mcp: {
    readonly mutations: 'none' | 'approve' | 'all';
    readonly execute: boolean;
    /** MCP_TOOLSETS: each named endpoint's tool names (`*`: every tool); checked against the tools at start-up. */
    readonly toolsets: ReadonlyMap<string, readonly string[]>;
    readonly allowedHosts: readonly string[];
    readonly approvalTtlMs: number;
    /** MCP_APPROVAL: whether the agent's user may approve through the client (elicitation), or only an approver. */
    readonly approval: 'elicitation' | 'approver';
  };
  /** The standard OTEL_* variables; `enabled` is false unless an exporter is chosen and the SDK is not disabled. */
  readonly tracing: {
    readonly enabled: boolean;
    readonly exporter: 'none' | 'otlp' | 'console';
    /** Where OTLP/HTTP traces go. */
    readonly endpoint: string;
    /** OTEL_EXPORTER_OTLP_HEADERS: may hold a collector's token, so it is never logged. */
    readonly headers: Readonly<Record<string, string>>;
    readonly serviceName: string;
    readonly sampler:
      | 'always_on'
      | 'always_off'
      | 'traceidratio'
      | 'parentbased_always_on'
      | 'parentbased_always_off'
      | 'parentbased_traceidratio';
    readonly samplerRatio: number;
  };
  /** The one table of upstreams: for each, a real address with its credentials, or the sandbox. */
  readonly upstreams: UpstreamTable;
  /**
   * What is set but has no effect (ignoredVariables): each the variable's name and why, never its value. Start-up goes
   * on; src/main.ts logs each once as a warning.
   */
  readonly ignored: readonly { readonly variable: string; readonly why: string }[];
}

export interface GraphqlLimitsConfig {
  readonly maxAliases: number;
  readonly maxDepth: number;
  readonly maxTokens: number;
  readonly maxDirectives: number;
  readonly maxCost: number;
  readonly listSizeEstimate: number;
  readonly maxBodyBytes: number;
  /** GRAPHQL_COST_FORMULA: the cost formula per document (true), or the walk per request. */
  readonly costFormula: boolean;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/** Parses the environment with `schema`; throws a ConfigError naming the first bad variable. */
/** Whether a variable is set: an empty one (`FOO=` in a compose file) means unset. */
const isSet = (value: string | undefined): value is string => value !== undefined && value.trim() !== '';

function parseEnv<S extends z.ZodType>(schema: S, env: Readonly<Record<string, string | undefined>>): z.infer<S> {
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => isSet(v)));
  const parsed = schema.safeParse(present);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const variable = String(issue.path[0] ?? 'environment');
    // A bad value of a variable that holds a secret is not repeated: start-up errors end up in logs.
    // Nor the user info of a URL (`https://user:password@host`), up to the last `@`: also when the scheme is missing
    // (`user:password@host`) or the password holds a raw `/`, which a URL parser would not take for user info.
    const shown = SECRET_VARS.has(variable)
      ? '(value not shown: it may hold a secret)'
      : `(got ${JSON.stringify(env[variable]?.replace(/^([a-z][a-z0-9+.-]*:\/\/)?.*@/is, '$1…@') ?? null)})`;
    throw new ConfigError(variable, `${issue.message} ${shown}`);
  }
  return parsed.data;
}

/** What `main.js migrate` needs: the database and the log settings, nothing else (no upstream, key or file). */
export interface StoreConfig {
  readonly dataDir: string;
  readonly databaseUrl: string | undefined;
  readonly sqliteSynchronous: 'FULL' | 'NORMAL';
  readonly logLevel: Config['logLevel'];
  readonly logFormat: Config['logFormat'];
}

const storeEnvSchema = envSchema.pick({
  DATA_DIR: true,
  DATABASE_URL: true,
  SQLITE_SYNCHRONOUS: true,
  LOG_LEVEL: true,
  LOG_FORMAT: true,
});

/**
 * The store's settings alone, for `main.js migrate` (a migration Job gets the database's variables and need not be
 * given the gateway's keys, files or upstreams). The same declarations as loadConfig's, so the same errors.
 */
export function loadStoreConfig(env: Readonly<Record<string, string | undefined>> = process.env): StoreConfig {
  const e = parseEnv(storeEnvSchema, env);
  return {
    dataDir: path.resolve(e.DATA_DIR),
    databaseUrl: e.DATABASE_URL,
    sqliteSynchronous: e.SQLITE_SYNCHRONOUS,
    logLevel: e.LOG_LEVEL,
    logFormat: e.LOG_FORMAT,
  };
}

/**
 * Builds the one Config object from the environment. Throws a ConfigError naming the first bad variable,
 * and refuses settings that contradict each other.
 */
export function loadConfig(env: Readonly<Record<string, string | undefined>> = process.env): Config {
  const e = parseEnv(envSchema, env);
  const apiKeys = e.GATEWAY_API_KEYS.map(parseAppKey);
  const operatorKeys = e.OPERATOR_API_KEYS.map(parseAppKey);
  checkAppKeys([
    ...apiKeys.map((k, i) => ({ ...k, variable: 'GATEWAY_API_KEYS', entry: i + 1 })),
    ...operatorKeys.map((k, i) => ({ ...k, variable: 'OPERATOR_API_KEYS', entry: i + 1 })),
  ]);
  const appsFile = e.GATEWAY_APPS_FILE ? appsFromFile(e.GATEWAY_APPS_FILE, [...apiKeys, ...operatorKeys]) : [];
  if (e.CLOUD_API_URL && !e.CLOUD_API_TOKEN && !e.CLOUD_API_CREDENTIALS) {
    throw new ConfigError(
      'CLOUD_API_TOKEN',
      'CLOUD_API_URL is set, so CLOUD_API_TOKEN or CLOUD_API_CREDENTIALS is required',
    );
  }
  if (e.CLOUD_API_TOKEN && e.CLOUD_API_CREDENTIALS) {
    throw new ConfigError('CLOUD_API_CREDENTIALS', 'set either CLOUD_API_TOKEN or CLOUD_API_CREDENTIALS, not both');
  }
  if (e.IDENTIFICATION_PRODLIKE_API_URL && !e.IDENTIFICATION_API_URL) {
    throw new ConfigError(
      'IDENTIFICATION_API_URL',
      'IDENTIFICATION_PRODLIKE_API_URL is set, so IDENTIFICATION_API_URL must be set too',
    );
  }
  if (e.DATABASE_MIGRATIONS === 'wait' && !e.DATABASE_URL) {
    throw new ConfigError(
      'DATABASE_MIGRATIONS',
      'wait is for replicas sharing DATABASE_URL (SQLite has one gateway, which applies its migrations itself): set DATABASE_URL, or apply',
    );
  }
  if (e.TRUSTED_DOCUMENTS !== 'off' && !e.TRUSTED_DOCUMENTS_MANIFEST) {
    throw new ConfigError(
      'TRUSTED_DOCUMENTS_MANIFEST',
      `TRUSTED_DOCUMENTS is ${e.TRUSTED_DOCUMENTS}, so the manifest of trusted documents is required`,
    );
  }
  if (e.TRUSTED_DOCUMENTS === 'off' && e.TRUSTED_DOCUMENTS_MANIFEST) {
    throw new ConfigError(
      'TRUSTED_DOCUMENTS',
      'TRUSTED_DOCUMENTS_MANIFEST is set but TRUSTED_DOCUMENTS is off: set allow or enforce, or unset the manifest',
    );
  }
  const appNames = new Set(
    [...apiKeys, ...operatorKeys].flatMap((k) => (k.name === null ? [] : [k.name])).concat(appsFile.map((a) => a.name)),
  );
  const jwtAuth = jwtAuthConfig(e, appNames);
  // A notification token may be bound to an app that signs in only with JWTs: one an issuer lists, or any app name
  // when one accepts `*`.
  const jwtApps = jwtAuth?.issuers.flatMap((i) => i.apps.listed.map((a) => a.app)) ?? [];
  const upstreams = resolveUpstreams(e, {
    names: new Set([...appNames, ...jwtApps]),
    anyName: jwtAuth?.issuers.some((i) => i.apps.any) ?? false,
  });
  const config: Config = {
    port: e.PORT,
    host: e.HOST,
    publicUrl: e.PUBLIC_URL,
    dataDir: path.resolve(e.DATA_DIR),
    databaseUrl: e.DATABASE_URL,
    sqliteSynchronous: e.SQLITE_SYNCHRONOUS,
    sqliteCommitWindowMs: e.SQLITE_COMMIT_WINDOW_MS,
    sqliteCheckpointIntervalMs: e.SQLITE_CHECKPOINT_INTERVAL_MS,
    sqliteWalRestartFrames: e.SQLITE_WAL_RESTART_FRAMES,
    sqliteWalPreallocate: e.SQLITE_WAL_PREALLOCATE,
    sqliteCheckpointSync: e.SQLITE_CHECKPOINT_SYNC,
    sqliteCheckpointNice: e.SQLITE_CHECKPOINT_NICE,
    sqliteWalReadAheadMb: e.SQLITE_WAL_READ_AHEAD_MB,
    sqliteCacheKib: e.SQLITE_CACHE_KIB,
    storePgNamedStatements: e.STORE_PG_NAMED_STATEMENTS,
    sqliteClaimWithoutSync: e.SQLITE_CLAIM_WITHOUT_SYNC,
    databaseMigrations: e.DATABASE_MIGRATIONS,
    cloud: { url: e.CLOUD_API_URL, token: e.CLOUD_API_TOKEN, credentials: e.CLOUD_API_CREDENTIALS },
    verification: { url: e.VERIFICATION_API_URL, token: e.VERIFICATION_API_TOKEN },
    identification: {
      url: e.IDENTIFICATION_API_URL,
      prodlikeUrl: e.IDENTIFICATION_PRODLIKE_API_URL,
      token: e.IDENTIFICATION_API_TOKEN,
      prodlikeToken: e.IDENTIFICATION_PRODLIKE_API_TOKEN,
    },
    rfmUrl: e.RFM_API_URL,
    mobileId: {
      jwksUrl: e.MOBILEID_JWKS_URL,
      jwksFile: e.MOBILEID_JWKS_FILE,
      issuer: e.MOBILEID_ISSUER,
      clientId: e.MOBILEID_CLIENT_ID,
      strictIdToken: e.MOBILEID_STRICT_ID_TOKEN,
      plainChecks: e.MOBILEID_PLAIN_CHECKS,
      pendingMaxPerApp: e.MOBILEID_PENDING_MAX_PER_APP,
    },
    tokenEncryptionKey: e.TOKEN_ENCRYPTION_KEY,
    sealKeptCipher: e.SEAL_KEPT_CIPHER,
    jwtAuth,
    apiKeys,
    operatorKeys,
    appsFile,
    appsFilePath: e.GATEWAY_APPS_FILE ? path.resolve(e.GATEWAY_APPS_FILE) : undefined,
    open: apiKeys.length === 0 && operatorKeys.length === 0 && appsFile.length === 0 && jwtAuth === null,
    idempotencyRetentionMs: e.IDEMPOTENCY_RETENTION,
    idempotencyWaitMs: e.IDEMPOTENCY_WAIT,
    idempotencyTakeoverMs: e.IDEMPOTENCY_TAKEOVER,
    idempotencyReplayFromLedger: e.IDEMPOTENCY_REPLAY_FROM_LEDGER,
    provisioningBounds: { maxTopics: e.PROVISIONING_MAX_TOPICS, maxUsers: e.PROVISIONING_MAX_USERS },
    maxConcurrentPlans: e.PROVISIONING_MAX_CONCURRENT_PLANS,
    rateLimits: { creations: e.RATE_LIMIT_CREATIONS, reads: e.RATE_LIMIT_READS },
    callbackBodyKeptBytes: e.CALLBACK_BODY_KEPT_BYTES,
    liveSubscriptions: e.APP_LIVE_SUBSCRIPTIONS,
    storageLimits: {
      events: {
        perMinute: e.APP_EVENTS_PER_MINUTE,
        charsPerMinute: e.APP_EVENT_BYTES_PER_MINUTE,
        total: e.APP_EVENTS_STORED,
        totalChars: e.APP_EVENT_BYTES_STORED,
      },
      'notification-tokens': { perMinute: e.APP_NOTIFICATION_TOKENS_PER_MINUTE, total: e.APP_NOTIFICATION_TOKENS },
      'callback-addresses': { perMinute: e.APP_CALLBACK_ADDRESSES_PER_MINUTE, total: e.APP_CALLBACK_ADDRESSES },
    },
    eventRetentionMs: e.EVENT_RETENTION,
    eventNotifyGrouped: e.EVENT_NOTIFY_GROUPED,
    eventOrderProbeGrouped: e.EVENT_ORDER_PROBE_GROUPED,
    subscriberBufferBytes: e.SUBSCRIBER_BUFFER_BYTES,
    wsKeepAliveSweep: e.WS_KEEP_ALIVE_SWEEP,
    ledgerCacheRecords: e.LEDGER_CACHE_RECORDS,
    delivery: {
      compiledSelection: e.SUBSCRIPTION_COMPILED_SELECTION,
      compiledSource: e.SUBSCRIPTION_COMPILED_SOURCE,
      clearFromIntake: e.DELIVERY_CLEAR_FROM_INTAKE,
      payloadFromIntake: e.DELIVERY_PAYLOAD_FROM_INTAKE,
      completeWithLast: e.DELIVERY_COMPLETE_WITH_LAST,
      oneWrite: e.DELIVERY_ONE_WRITE,
      directWrite: e.DELIVERY_DIRECT_WRITE,
    },
    upstream: {
      timeoutMs: e.UPSTREAM_TIMEOUT,
      maxAnswerBytes: e.UPSTREAM_MAX_ANSWER_BYTES,
      retryBudgetMs: e.UPSTREAM_RETRY_BUDGET,
      maxRetries: e.UPSTREAM_MAX_RETRIES,
      idempotent: e.IDEMPOTENT_UPSTREAMS,
      breakers: Object.fromEntries(
        BREAKER_UPSTREAMS.map((u) => [
          u,
          {
            enabled: e.UPSTREAM_CIRCUIT_BREAKER[u],
            volume: e.UPSTREAM_CIRCUIT_VOLUME[u],
            errorThreshold: e.UPSTREAM_CIRCUIT_ERROR_THRESHOLD[u],
            resetTimeoutMs: e.UPSTREAM_CIRCUIT_RESET_TIMEOUT[u],
            halfOpenAttempts: e.UPSTREAM_CIRCUIT_HALF_OPEN_ATTEMPTS[u],
          },
        ]),
      ) as Record<BreakerUpstream, BreakerSettings>,
    },
    resultsBatchSize: e.VERIFICATION_RESULTS_BATCH_SIZE,
    shapePaths: {
      cloudCreatedId: e.CLOUD_CREATED_ID_PATH,
      cloudToken: e.CLOUD_TOKEN_PATH,
      cloudIpAddress: e.CLOUD_IP_ADDRESS_PATH,
      verificationExternalId: e.VERIFICATION_EXTERNAL_ID_PATH,
      verificationResults: e.VERIFICATION_RESULTS_PATH,
      verificationCallbackUrl: e.VERIFICATION_CALLBACK_URL_PATH,
    },
    introspection: e.GRAPHQL_INTROSPECTION ?? everyUpstreamSandboxed(upstreams),
    compiledMutations: e.GRAPHQL_COMPILED_MUTATIONS,
    variablesCheck: e.GRAPHQL_VARIABLES_CHECK,
    apolloReporting: (['APOLLO_KEY', 'APOLLO_SCHEMA_REPORTING'] as const).filter((name) => e[name] !== undefined),
    graphqlLimits: {
      maxAliases: e.GRAPHQL_MAX_ALIASES,
      maxDepth: e.GRAPHQL_MAX_DEPTH,
      maxTokens: e.GRAPHQL_MAX_TOKENS,
      maxDirectives: e.GRAPHQL_MAX_DIRECTIVES,
      maxCost: e.GRAPHQL_MAX_COST,
      listSizeEstimate: e.GRAPHQL_LIST_SIZE_ESTIMATE,
      maxBodyBytes: e.GRAPHQL_MAX_BODY_BYTES,
      costFormula: e.GRAPHQL_COST_FORMULA,
    },
    sandbox: {
      faultRate: e.SANDBOX_FAULT_RATE,
      latencyMs: e.SANDBOX_LATENCY_MS,
      callbackDelayMs: e.SANDBOX_CALLBACK_DELAY_MS,
      cloudShape: e.SANDBOX_CLOUD_SHAPE,
      cloudShapeSeed: e.SANDBOX_CLOUD_SHAPE_SEED,
    },
    logLevel: e.LOG_LEVEL,
    logFormat: e.LOG_FORMAT,
    testPauseAt: e.GATEWAY_TEST_PAUSE_AT,
    mcp: {
      mutations: e.MCP_MUTATIONS,
      execute: e.MCP_EXECUTE,
      toolsets: parseToolsets(e.MCP_TOOLSETS),
      allowedHosts: e.MCP_ALLOWED_HOSTS,
      approvalTtlMs: e.MCP_APPROVAL_TTL,
      approval: e.MCP_APPROVAL,
    },
    trustedDocuments: {
      mode: e.TRUSTED_DOCUMENTS,
      manifest: e.TRUSTED_DOCUMENTS_MANIFEST ? path.resolve(e.TRUSTED_DOCUMENTS_MANIFEST) : undefined,
      reloadReuse: e.TRUSTED_DOCUMENTS_RELOAD_REUSE,
    },
    tracing: {
      enabled: !e.OTEL_SDK_DISABLED && e.OTEL_TRACES_EXPORTER !== 'none',
      exporter: e.OTEL_TRACES_EXPORTER,
      endpoint: e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? `${e.OTEL_EXPORTER_OTLP_ENDPOINT}/v1/traces`,
      headers: e.OTEL_EXPORTER_OTLP_HEADERS,
      serviceName: e.OTEL_SERVICE_NAME,
      sampler: e.OTEL_TRACES_SAMPLER,
      samplerRatio: e.OTEL_TRACES_SAMPLER_ARG,
    },
    upstreams,
    ignored: ignoredVariables(e, env),
  };
  if (
    config.operatorKeys.length > 0 &&
    config.apiKeys.length === 0 &&
    config.appsFile.length === 0 &&
    !config.jwtAuth
  ) {
    throw new ConfigError(
      'OPERATOR_API_KEYS',
      'needs GATEWAY_API_KEYS, GATEWAY_APPS_FILE or a JWKS (AUTH_JWKS_URL): without apps the gateway is open and everyone is the operator',
    );
  }
  if (
    config.mobileId.strictIdToken &&
    !config.upstreams.mobileId.sandbox &&
    !config.mobileId.jwksUrl &&
    !config.mobileId.jwksFile
  ) {
    throw new ConfigError(
      'MOBILEID_STRICT_ID_TOKEN',
      'strict id_token checks need a JWKS: set MOBILEID_JWKS_URL or MOBILEID_JWKS_FILE (and MOBILEID_ISSUER and MOBILEID_CLIENT_ID to compare iss and aud)',
    );
  }
  if (config.open && !everyUpstreamSandboxed(config.upstreams)) {
    throw new ConfigError(
      'GATEWAY_API_KEYS',
      'is required when any upstream is real, unless apps sign in with JWTs (AUTH_JWKS_URL) or are listed in GATEWAY_APPS_FILE: an open gateway is allowed only in full sandbox mode',
    );
  }
  sources.set(config, { ...env });
  return deepFreeze(config);
}

/** Each upstream's address, and the variables of the credential the gateway sends it instead of the address's own. */
const UPSTREAM_CREDENTIALS = {
  CLOUD_API_URL: 'CLOUD_API_TOKEN or CLOUD_API_CREDENTIALS',
  VERIFICATION_API_URL: 'VERIFICATION_API_TOKEN',
  IDENTIFICATION_API_URL: 'IDENTIFICATION_API_TOKEN',
  IDENTIFICATION_PRODLIKE_API_URL: 'IDENTIFICATION_PRODLIKE_API_TOKEN (unset: IDENTIFICATION_API_TOKEN)',
  RFM_API_URL: 'VERIFICATION_API_TOKEN',
} as const;

/** The variables whose description says they are ignored with (or without) DATABASE_URL: the reference is the rule. */
const namesDescribed = (text: string) =>
  Object.entries(VARS).flatMap(([name, v]) => (v.description.includes(text) ? [name] : []));
const SQLITE_ONLY = namesDescribed('Ignored with DATABASE_URL');
const POSTGRES_ONLY = namesDescribed('Ignored without DATABASE_URL');

/**
 * The variables the operator set that have no effect, and why (never a value: some hold secrets). Not refused: a
 * deployment that set them has always started, and goes on starting.
 */
function ignoredVariables(e: Env, env: Readonly<Record<string, string | undefined>>): Config['ignored'] {
  const ignored: { variable: string; why: string }[] = [];
  // The upstreams' pools are made from the address's origin (scheme, host, port) and requests carry its path: user
  // info in the address goes nowhere (src/upstream/http.ts).
  for (const [variable, credential] of Object.entries(UPSTREAM_CREDENTIALS)) {
    const url = e[variable as keyof typeof UPSTREAM_CREDENTIALS];
    if (url === undefined || !URL.canParse(url)) continue;
    const { username, password } = new URL(url);
    if (username !== '' || password !== '')
      ignored.push({
        variable,
        why: `the user name and password in it are not sent (the upstream is called with the address's scheme, host, port and path only); its credential is ${credential}`,
      });
  }
  const database = e.DATABASE_URL !== undefined;
  for (const variable of database ? SQLITE_ONLY : POSTGRES_ONLY)
    if (isSet(env[variable]))
      ignored.push({
        variable,
        why: database
          ? 'ignored: DATABASE_URL is set, and this is a setting of the embedded SQLite store'
          : 'ignored: DATABASE_URL is unset, and this is a setting of the PostgreSQL store',
      });
  if (!database && e.SQLITE_SYNCHRONOUS === 'NORMAL' && isSet(env.SQLITE_CLAIM_WITHOUT_SYNC))
    ignored.push({
      variable: 'SQLITE_CLAIM_WITHOUT_SYNC',
      why: 'ignored: SQLITE_SYNCHRONOUS is NORMAL, so no idempotency claim waits for a sync',
    });
  return ignored;
}

/** The environment each Config was loaded from, so that a reload reads the same variables and the files again. */
const sources = new WeakMap<Config, Readonly<Record<string, string | undefined>>>();

/** MCP_TOOLSETS: `name=tool,tool;name2=*`. */
function parseToolsets(text: string | undefined): Map<string, string[]> {
  const sets = new Map<string, string[]>();
  for (const part of (text ?? '')
    .split(';')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const eq = part.indexOf('=');
    const name = eq > 0 ? part.slice(0, eq).trim() : '';
    if (!/^[a-z0-9][a-z0-9_-]{0,63}$/.test(name))
      throw new ConfigError(
        'MCP_TOOLSETS',
        `each toolset is name=tool,tool with a lower-case name of letters, digits, _ and - (got ${JSON.stringify(part.slice(0, 80))})`,
      );
    if (sets.has(name)) throw new ConfigError('MCP_TOOLSETS', `the toolset ${name} is listed twice`);
    const tools = part
      .slice(eq + 1)
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean);
    if (tools.length === 0) throw new ConfigError('MCP_TOOLSETS', `the toolset ${name} names no tool`);
    sets.set(name, tools);
  }
  return sets;
}

/**
 * The configuration as the files read now give it (GATEWAY_APPS_FILE, AUTH_ISSUERS), from the variables `config` was
 * loaded from: the same checks as at start, so that a file start-up would refuse is refused (a ConfigError naming
 * the variable, the file and the line). The variables themselves do not change in a running process.
 */
export function reloadConfig(config: Config): Config {
  const env = sources.get(config);
  if (!env)
    throw new Error('this configuration was not loaded from the environment (loadConfig): it cannot be reloaded');
  return loadConfig(env);
}

/** The AUTH_* variables: none, one provider (a JWKS with the issuer and audience its tokens must carry, and the apps accepted), or AUTH_ISSUERS. */
function jwtAuthConfig(
  e: {
    AUTH_JWKS_URL?: string | undefined;
    AUTH_JWKS_FILE?: string | undefined;
    AUTH_ISSUER?: string | undefined;
    AUTH_ISSUERS?: string | undefined;
    AUTH_AUDIENCE: string[];
    AUTH_APP_CLAIM?: string | undefined;
    AUTH_SCOPE_PREFIX?: string | undefined;
    AUTH_SCOPE_CLAIMS: string[];
    AUTH_JWKS_REFRESH_INTERVAL: number;
    AUTH_JWT_CACHE_SIZE: number;
    AUTH_APPS: string[];
    AUTH_OPERATOR_APPS: string[];
  },
  configuredNames: ReadonlySet<string>,
): JwtAuthConfig | null {
  const shared = { refreshIntervalMs: e.AUTH_JWKS_REFRESH_INTERVAL, verifiedCacheSize: e.AUTH_JWT_CACHE_SIZE };
  if (e.AUTH_ISSUERS) {
    for (const name of [
      'AUTH_JWKS_URL',
      'AUTH_JWKS_FILE',
      'AUTH_ISSUER',
      'AUTH_AUDIENCE',
      'AUTH_APP_CLAIM',
      'AUTH_APPS',
      'AUTH_OPERATOR_APPS',
    ] as const) {
      const value = e[name];
      if (value !== undefined && value.length > 0)
        throw new ConfigError(
          name,
          'is set beside AUTH_ISSUERS: with several providers each entry of the file says its own (unset it, or move it into the file)',
        );
    }
    const file = path.resolve(e.AUTH_ISSUERS);
    return { issuersFile: file, issuers: issuersFromFile(file, e, configuredNames), ...shared };
  }
  if (e.AUTH_JWKS_URL && e.AUTH_JWKS_FILE)
    throw new ConfigError('AUTH_JWKS_FILE', 'set either AUTH_JWKS_URL or AUTH_JWKS_FILE, not both');
  if (!e.AUTH_JWKS_URL && !e.AUTH_JWKS_FILE) {
    for (const name of ['AUTH_ISSUER', 'AUTH_AUDIENCE', 'AUTH_APP_CLAIM', 'AUTH_APPS', 'AUTH_OPERATOR_APPS'] as const) {
      const value = e[name];
      if (value !== undefined && value.length > 0)
        throw new ConfigError(name, 'is set but no JWKS is: set AUTH_JWKS_URL (or AUTH_JWKS_FILE) too, or unset it');
    }
    return null;
  }
  // Without both, any token signed by the provider for any of its clients would be accepted (RFC 8725 §3.8, §3.9).
  if (!e.AUTH_ISSUER)
    throw new ConfigError(
      'AUTH_ISSUER',
      'is required with AUTH_JWKS_URL or AUTH_JWKS_FILE: the iss the identity provider writes in its tokens',
    );
  if (e.AUTH_AUDIENCE.length === 0)
    throw new ConfigError(
      'AUTH_AUDIENCE',
      'is required with AUTH_JWKS_URL or AUTH_JWKS_FILE: the aud the identity provider writes in tokens meant for this gateway',
    );
  if (e.AUTH_APPS.length === 0) {
    throw new ConfigError(
      'AUTH_APPS',
      'is required with AUTH_JWKS_URL or AUTH_JWKS_FILE: list the JWT apps accepted (`shop,crm`, `<client id>=<name>`, or `*` for any app name), so that a token of any other client of the identity provider is refused',
    );
  }
  const apps = jwtApps(e.AUTH_APPS, configuredNames, (message) => new ConfigError('AUTH_APPS', message));
  operatorAppsOf(e.AUTH_OPERATOR_APPS, apps, (message) => new ConfigError('AUTH_OPERATOR_APPS', message));
  return {
    issuersFile: null,
    issuers: [
      {
        jwks: e.AUTH_JWKS_URL ? { url: e.AUTH_JWKS_URL } : { file: path.resolve(e.AUTH_JWKS_FILE!) },
        issuer: e.AUTH_ISSUER,
        audience: e.AUTH_AUDIENCE,
        appClaim: e.AUTH_APP_CLAIM ?? null,
        scopePrefix: e.AUTH_SCOPE_PREFIX ?? '',
        scopeClaims: e.AUTH_SCOPE_CLAIMS,
        apps,
        operatorApps: e.AUTH_OPERATOR_APPS,
      },
    ],
    ...shared,
  };
}

/**
 * AUTH_ISSUERS: each entry's apps are checked as AUTH_APPS and AUTH_OPERATOR_APPS are, and an app name is one
 * provider's unless every provider that lists it writes `<claim value>=<name>` (one app signing in through two
 * providers, as during a move from one to the other, is said, not fallen into). A `*` entry never takes a name
 * another provider lists, nor one an entry listed before (src/auth/jwt.ts JwtApps).
 */
function issuersFromFile(
  file: string,
  e: { AUTH_SCOPE_PREFIX?: string | undefined; AUTH_SCOPE_CLAIMS: string[] },
  configuredNames: ReadonlySet<string>,
): JwtIssuerConfig[] {
  let entries;
  try {
    entries = readIssuersFile(file);
  } catch (err) {
    if (err instanceof IssuersFileError) throw ConfigError.ofFile('AUTH_ISSUERS', err);
    throw err;
  }
  const bareBy = new Map<string, string>();
  const listedBy = new Map<string, string>();
  // At most one provider accepts any name: with two, `shopx` of one and `shopx` of the other would be one app (one
  // owner, one budget) whoever signed the token (decision 058).
  let anyBy: string | null = null;
  return entries.map((entry) => {
    const apps = jwtApps(
      entry.apps,
      configuredNames,
      (message, i) =>
        new ConfigError(
          'AUTH_ISSUERS',
          `${file} line ${entry.lineOf('apps', i)}: issuer ${entry.issuer}: apps ${message}`,
          {
            file,
            line: entry.lineOf('apps', i),
          },
        ),
    );
    operatorAppsOf(
      entry.operatorApps,
      apps,
      (message) =>
        new ConfigError(
          'AUTH_ISSUERS',
          `${file} line ${entry.lineOf('operatorApps')}: issuer ${entry.issuer}: operatorApps ${message}`,
          {
            file,
            line: entry.lineOf('operatorApps'),
          },
        ),
    );
    if (apps.any) {
      if (anyBy !== null)
        throw new ConfigError(
          'AUTH_ISSUERS',
          `${file} line ${entry.lineOf('apps')}: issuer ${entry.issuer}: apps * is also accepted by issuer ${anyBy}: two providers that accept any app name would make a name one app whoever's provider signed its tokens; list this provider's apps (a name, or <claim value>=<name>), or accept * at one provider only`,
          { file, line: entry.lineOf('apps') },
        );
      anyBy = entry.issuer;
    }
    for (const app of apps.listed) {
      const other = listedBy.get(app.app);
      if (other !== undefined && other !== entry.issuer && (!app.sameAsConfigured || bareBy.has(app.app))) {
        throw new ConfigError(
          'AUTH_ISSUERS',
          `${file} line ${entry.lineOf('apps')}: issuer ${entry.issuer}: the app ${app.app} is also an app of issuer ${other}: write <claim value>=${app.app} in both entries if it signs in through both, or give it another name here`,
          { file, line: entry.lineOf('apps') },
        );
      }
      listedBy.set(app.app, entry.issuer);
      if (!app.sameAsConfigured) bareBy.set(app.app, entry.issuer);
    }
    return {
      jwks: entry.jwks,
      issuer: entry.issuer,
      audience: entry.audience,
      appClaim: entry.appClaim,
      scopePrefix: entry.scopePrefix ?? e.AUTH_SCOPE_PREFIX ?? '',
      scopeClaims: entry.scopeClaims ?? e.AUTH_SCOPE_CLAIMS,
      apps,
      operatorApps: entry.operatorApps,
    };
  });
}

/** AUTH_OPERATOR_APPS (or an issuer's operatorApps): app names its apps accept. */
function operatorAppsOf(
  names: readonly string[],
  apps: JwtIssuerConfig['apps'],
  fail: (message: string) => ConfigError,
): void {
  const accepted = new Set(apps.listed.map((a) => a.app));
  for (const name of names) {
    if (!APP_NAME.test(name))
      throw fail(
        `${JSON.stringify(name)} is not an app name (1 to 64 ASCII letters, digits, _ . -, starting with a letter or digit)`,
      );
    if (!apps.any && !accepted.has(name)) throw fail(`${name} is not an app AUTH_APPS accepts: list it there too`);
  }
}

/** What a claim value of AUTH_APPS may be: printable ASCII without spaces, `,` or `=` (a client id, a URI). */
const CLAIM_VALUE = /^[!-+\--<>-~]{1,128}$/;

/** AUTH_APPS (or an issuer's apps): `*`, `<name>` or `<claim value>=<name>` entries; a bare entry may not take a configured app's name. */
function jwtApps(
  entries: readonly string[],
  configuredNames: ReadonlySet<string>,
  fail: (message: string, index: number) => ConfigError,
): JwtIssuerConfig['apps'] {
  let any = false;
  const listed: JwtAppEntry[] = [];
  const claims = new Set<string>();
  entries.forEach((entry, i) => {
    if (entry === '*') {
      any = true;
      return;
    }
    const eq = entry.indexOf('=');
    const claim = eq < 0 ? entry : entry.slice(0, eq).trim();
    const app = eq < 0 ? entry : entry.slice(eq + 1).trim();
    if (!APP_NAME.test(app))
      throw fail(
        `entry ${i + 1}: ${JSON.stringify(app)} is not an app name (1 to 64 ASCII letters, digits, _ . -, starting with a letter or digit)${eq < 0 ? '; name a client id with <client id>=<name>' : ''}`,
        i,
      );
    if (!CLAIM_VALUE.test(claim))
      throw fail(
        `entry ${i + 1}: ${JSON.stringify(claim)} is not a claim value (1 to 128 printable ASCII characters, no space, comma or =)`,
        i,
      );
    if (claims.has(claim)) throw fail(`entry ${i + 1}: ${claim} is listed twice`, i);
    if (KEY_LABEL.test(app)) throw fail(`entry ${i + 1}: the app name ${app} is refused: ${KEY_LABEL_RULE}`, i);
    claims.add(claim);
    if (eq < 0 && configuredNames.has(app)) {
      throw fail(
        `entry ${i + 1}: ${app} is also an app configured with keys (GATEWAY_API_KEYS, OPERATOR_API_KEYS or GATEWAY_APPS_FILE): write ${app}=${app} if its JWTs and its keys are one app (one owner, one budget), or give the JWT app another name (${app}=<name>)`,
        i,
      );
    }
    listed.push({ claim, app, sameAsConfigured: eq >= 0 });
  });
  return { any, listed };
}

/**
 * GATEWAY_APPS_FILE's apps. An app is configured in one place: a name or a key digest the file shares with
 * GATEWAY_API_KEYS or OPERATOR_API_KEYS stops start-up (the scopes of such an app would be ambiguous).
 */
function appsFromFile(file: string, keys: readonly AppKey[]): AppFileEntry[] {
  let apps: AppFileEntry[];
  try {
    apps = readAppsFile(file);
  } catch (err) {
    if (err instanceof AppsFileError) throw ConfigError.ofFile('GATEWAY_APPS_FILE', err);
    throw err;
  }
  const envNames = new Set(keys.flatMap((k) => (k.name === null ? [] : [k.name])));
  const envDigests = keys.map((k) => sha256(k.key).toString('hex'));
  for (const app of apps) {
    if (envNames.has(app.name))
      throw new ConfigError(
        'GATEWAY_APPS_FILE',
        `${file}: app ${app.name} is also named in GATEWAY_API_KEYS or OPERATOR_API_KEYS: configure each app in one place`,
      );
    if (app.keyDigests.some((d) => envDigests.includes(d))) {
      throw new ConfigError(
        'GATEWAY_APPS_FILE',
        `${file}: a key digest of app ${app.name} is the digest of a key in GATEWAY_API_KEYS or OPERATOR_API_KEYS: one key is one app`,
      );
    }
  }
  return apps;
}

/**
 * Each key is listed once, in one variable, and each app named with keys is named in one variable; names follow
 * APP_NAME and are not of a bare key's label's form (KEY_LABEL). A key listed twice was taken silently, and a key of
 * both variables was the operator's whatever GATEWAY_API_KEYS said; an app named in both held the operator scope with
 * one of its keys and not the other. The messages name the entries by their places, never a key.
 */
function checkAppKeys(keys: readonly (AppKey & { variable: string; entry: number })[]): void {
  const byKey = new Map<string, { variable: string; entry: number }>();
  const byName = new Map<string, { variable: string; entry: number }>();
  const place = (first: { variable: string; entry: number }, k: { variable: string; entry: number }) =>
    first.variable === k.variable
      ? `entries ${first.entry} and ${k.entry}`
      : `entry ${k.entry} and ${first.variable} entry ${first.entry}`;
  for (const k of keys) {
    if (k.name !== null && KEY_LABEL.test(k.name))
      throw new ConfigError(k.variable, `the app name ${k.name} is refused: ${KEY_LABEL_RULE}; choose another name`);
    const sameKey = byKey.get(k.key);
    if (sameKey !== undefined)
      throw new ConfigError(
        k.variable,
        `${place(sameKey, k)} list the same key: one key is one app, listed once (value not shown: it holds keys)`,
      );
    byKey.set(k.key, k);
    if (k.name === null) continue;
    const sameName = byName.get(k.name);
    if (sameName !== undefined && sameName.variable !== k.variable)
      throw new ConfigError(
        k.variable,
        `${place(sameName, k)} both name the app ${k.name}: an app's keys are in one variable, so that all of them hold the same scopes`,
      );
    byName.set(k.name, k);
  }
}

/** The variables the parser reads (test/readme.test.ts: every NAME=value of the documents' examples is one of them). */
export const PARSED_ENV_VARS: readonly string[] = Object.keys(envSchema.shape);
