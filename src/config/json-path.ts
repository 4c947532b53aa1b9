/**
 * The exact place of a field in an upstream's JSON, for the shapes a spec does not show (docs/contract.md, "Shapes a
 * spec does not show"): a dot path such as `data.uuid`, where a numeric segment indexes an array (`items.0.id`).
 * An operator names it in a variable (CLOUD_CREATED_ID_PATH, …) when the upstream answers in a shape the
 * gateway's list of guesses does not cover.
 */
export interface JsonPath {
  /** As the operator wrote it, for messages and the start-up line. */
  readonly text: string;
  readonly segments: readonly string[];
}

const MAX_SEGMENTS = 32;
const SEGMENT = /^[^.\s]+$/;

/** The path of `text`, or a message saying why it is not one (the configuration refuses it at start-up). */
export function parseJsonPath(text: string): JsonPath | string {
  const t = text.trim();
  if (t === '') return 'must be a dot path such as data.uuid (a numeric segment indexes an array: items.0.id)';
  const segments = t.split('.');
  if (segments.length > MAX_SEGMENTS) return `must have at most ${MAX_SEGMENTS} segments`;
  const bad = segments.findIndex((s) => !SEGMENT.test(s));
  if (bad >= 0) {
    return `${JSON.stringify(t)} is not a dot path: segment ${bad + 1} is ${segments[bad] === '' ? 'empty' : 'not a plain name'} (write it like data.uuid or items.0.id)`;
  }
  return { text: t, segments };
}

/** The value at `path` in `body`; undefined when a segment is missing, or indexes what is not an array or object. */
export function readJsonPath(body: unknown, path: JsonPath): unknown {
  let at: unknown = body;
  for (const segment of path.segments) {
    if (Array.isArray(at)) {
      if (!/^\d+$/.test(segment)) return undefined;
      at = at[Number(segment)];
    } else if (at !== null && typeof at === 'object') {
      if (!Object.hasOwn(at, segment)) return undefined;
      at = (at as Record<string, unknown>)[segment];
    } else {
      return undefined;
    }
  }
  return at;
}

/** The longest id an upstream's answer may give. */
export const MAX_ANSWER_ID_LENGTH = 1024;

/** A control character or a lone surrogate: PostgreSQL refuses NUL in text, and UTF-8 has no surrogate to store. */
const UNSTORABLE = /[\u0000-\u001f\u007f]|\p{Cs}/u;

/**
 * An id as an upstream's answer gives it: a string of 1 to MAX_ANSWER_ID_LENGTH characters that every store keeps as
 * given (no control character, no lone surrogate), or an integer JSON holds exactly (at most 2^53 - 1) written as a
 * string; else null, an answer whose id cannot be read.
 */
export function answerId(v: unknown): string | null {
  if (typeof v === 'string') return v !== '' && v.length <= MAX_ANSWER_ID_LENGTH && !UNSTORABLE.test(v) ? v : null;
  // An integer beyond 2^53 was rounded by JSON.parse (two ids would be one), and a fraction is no id.
  if (typeof v === 'number' && Number.isSafeInteger(v)) return String(v);
  return null;
}

/** The id at `path` (`answerId`), else null. */
export function readIdAt(body: unknown, path: JsonPath): string | null {
  return answerId(readJsonPath(body, path));
}

/** A copy of `body` (an object) with `value` at `path`, creating objects on the way (a request field the spec names no place for). */
export function withValueAt(body: Record<string, unknown>, path: JsonPath, value: unknown): Record<string, unknown> {
  const [head, ...rest] = path.segments;
  if (rest.length === 0) return { ...body, [head!]: value };
  const inner = body[head!];
  const nested =
    inner !== null && typeof inner === 'object' && !Array.isArray(inner) ? (inner as Record<string, unknown>) : {};
  return { ...body, [head!]: withValueAt(nested, { text: rest.join('.'), segments: rest }, value) };
}

/**
 * The exact JSON paths an operator configured for the shapes the specs do not show (null: the gateway's documented
 * guesses). One variable each, declared in src/config/index.ts.
 */
export interface ShapePaths {
  /** CLOUD_CREATED_ID_PATH: the created id in a project or service creation answer. */
  readonly cloudCreatedId: JsonPath | null;
  /** CLOUD_TOKEN_PATH: the token in the answer of POST /iam/v2/tokens. */
  readonly cloudToken: JsonPath | null;
  /** CLOUD_IP_ADDRESS_PATH: the IPv4 address in an IP address creation answer. */
  readonly cloudIpAddress: JsonPath | null;
  /** VERIFICATION_EXTERNAL_ID_PATH: the verification's id in a registration answer. */
  readonly verificationExternalId: JsonPath | null;
  /** VERIFICATION_RESULTS_PATH: the list (or id-keyed object) of results in a results answer. */
  readonly verificationResults: JsonPath | null;
  /** VERIFICATION_CALLBACK_URL_PATH: where a registration request carries the callbackUrl. */
  readonly verificationCallbackUrl: JsonPath | null;
}
