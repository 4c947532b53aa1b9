import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';

import { WebhookErrorCode } from '../../errors.js';
import {
  BodyEncodedError,
  BodyTooLargeError,
  contentType,
  decoderFor,
  invalidInCharset,
  jsonText,
  jsonTextIn,
  readBody,
  unreadableCharset,
  unsupportedCoding,
} from '../respond.js';

/** How a webhook route reads its body: which media types it takes, and its refusals. */
export interface WebhookBodyOptions {
  /** Largest body accepted, in bytes. */
  limit: number;
  /** The media type assumed when Content-Type is absent (none: an absent type is refused like an unsupported one). */
  defaultType?: string;
  /** How a media type is parsed: `json`, a `form` parser, or null when the route refuses it. */
  parserFor(
    type: string,
  ): 'json' | ((text: string) => { ok: true; body: unknown } | { ok: false; description: string }) | null;
  /** The answer to an unsupported media type: its status and description. */
  unsupported: { status: 400 | 415; description: string };
  /**
   * A declared type `parserFor` refuses: refused unread with `unsupported` (the default), or, with `json`, read as JSON
   * all the same and refused with `unsupported` only when it does not parse.
   */
  otherTypes?: 'refuse' | 'json';
}

const REPLACEMENT = '\uFFFD';

/** How many times `part` occurs in `text`. */
function count(text: string, part: string): number {
  let n = 0;
  for (let i = text.indexOf(part); i !== -1; i = text.indexOf(part, i + part.length)) n += 1;
  return n;
}

/**
 * An `application/x-www-form-urlencoded` body as an object of its fields (text). A field given twice is refused:
 * which one counts would be a guess. So is a field whose percent-encoded bytes are not UTF-8 (each would be U+FFFD),
 * and one that holds the NUL character.
 */
export function formFields(
  text: string,
): { ok: true; body: Record<string, string> } | { ok: false; description: string } {
  // A Map, then own fields: assigned to an object, a field named __proto__ would set its prototype, not a field.
  const fields = new Map<string, string>();
  let replaced = 0;
  for (const [name, value] of new URLSearchParams(text)) {
    if (fields.has(name)) return { ok: false, description: `${name} is given more than once` };
    // As in a JSON body (unsoundLeaf): PostgreSQL's text holds no NUL, so it could not be stored or looked up.
    if (value.includes('\u0000') || name.includes('\u0000'))
      return { ok: false, description: 'a form field holds the NUL character (U+0000)' };
    fields.set(name, value);
    if (value.includes(REPLACEMENT) || name.includes(REPLACEMENT)) replaced += count(name + value, REPLACEMENT);
  }
  // Percent-encoded bytes that are not UTF-8 decode to U+FFFD: more of it than the text spells is such bytes.
  if (replaced > count(text, REPLACEMENT) + count(text.toUpperCase(), '%EF%BF%BD'))
    return { ok: false, description: 'a form field is not valid UTF-8 once decoded' };
  return { ok: true, body: Object.fromEntries(fields) };
}

/**
 * Identity callbacks (verification and identification): any JSON media type or form fields; under any other type a
 * body that parses as JSON is taken, and one that does not is a 400.
 */
export const CALLBACK_BODY: Omit<WebhookBodyOptions, 'limit'> = {
  // The spec shows neither the callbacks' payload nor their headers, so nothing says which type a platform declares: a
  // body sent with no Content-Type, or with a type of neither kind (text/plain), is read as JSON, tolerant of what
  // arrives; what does not parse is still a 400.
  defaultType: 'application/json',
  parserFor: (type) =>
    type === 'application/json' || type.endsWith('+json')
      ? 'json'
      : type === 'application/x-www-form-urlencoded'
        ? formFields
        : null,
  unsupported: {
    status: 400,
    description:
      'the body must be JSON (Content-Type: application/json) or form fields (application/x-www-form-urlencoded)',
  },
  otherTypes: 'json',
};

/** Deepest nesting of arrays and objects a webhook body may have. */
export const MAX_WEBHOOK_DEPTH = 64;

/** String.prototype.isWellFormed (ES2024: Node 20 has it, TypeScript's ES2023 library does not). */
const wellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed();

/**
 * Why a leaf of a body cannot be taken as it is: a lone surrogate, the NUL character (PostgreSQL's text holds none: an
 * identifier with it could not be stored or looked up), or a number JSON cannot hold; null if it can.
 */
function unsoundLeaf(value: unknown): string | null {
  if (typeof value === 'string') {
    if (!wellFormed(value)) return 'a string in the body is not valid Unicode text';
    return value.includes('\u0000') ? 'a string in the body holds the NUL character (U+0000)' : null;
  }
  if (typeof value === 'number' && !Number.isFinite(value)) return 'a number in the body is out of range';
  return null;
}

/**
 * Why a parsed body cannot be taken as it is, or null: it nests arrays and objects deeper than `max`, or one of its
 * strings (a name or a value) holds the NUL character or a lone surrogate (`"\ud800"`: stored as text it would read
 * back as U+FFFD, so two identifiers would be one), or a number is out of what JSON holds (`1e999` parses as Infinity,
 * which JSON cannot write back). Iterative: a deep body cannot overflow the stack.
 */
function unsound(value: unknown, max: number): string | null {
  // Two parallel stacks of the containers still to look into and their depths: no pair allocated per value, and a
  // leaf (most of a body) is never pushed.
  if (value === null || typeof value !== 'object') return unsoundLeaf(value);
  const containers: object[] = [value];
  const depths: number[] = [1];
  while (containers.length) {
    const v = containers.pop()!;
    const depth = depths.pop()!;
    if (depth > max) return `the body nests deeper than ${max} levels`;
    const array = Array.isArray(v);
    for (const key in v) {
      if (!array && !wellFormed(key)) return 'a name in the body is not valid Unicode text';
      const child = (v as Record<string, unknown>)[key];
      if (child === null || typeof child !== 'object') {
        const unsoundChild = unsoundLeaf(child);
        if (unsoundChild !== null) return unsoundChild;
        continue;
      }
      containers.push(child as object);
      depths.push(depth + 1);
    }
  }
  return null;
}

/** Why a body was refused, in the words the mobile-ID quarantine counts them by. */
export type BodyRefusalReason = 'UNSUPPORTED_MEDIA_TYPE' | 'BODY_TOO_LARGE' | 'MALFORMED';

export type WebhookBody =
  | { ok: true; body: unknown; type: string }
  | {
      ok: false;
      status: number;
      error: WebhookErrorCode;
      reason: BodyRefusalReason;
      description: string;
      close: boolean;
    };

/** A body that was read but cannot be taken: 400, the connection kept. */
function malformed(description: string): WebhookBody {
  return {
    ok: false,
    status: 400,
    error: WebhookErrorCode.INVALID_REQUEST,
    reason: 'MALFORMED',
    description,
    close: false,
  };
}

/**
 * The answer to a type the route does not take: refused unread (`close`), or, read as JSON under `otherTypes: 'json'`,
 * a body that is not JSON, which gets the same answer.
 */
function unsupportedType(options: WebhookBodyOptions, close: boolean): WebhookBody {
  return {
    ok: false,
    status: options.unsupported.status,
    error: WebhookErrorCode.INVALID_REQUEST,
    reason: 'UNSUPPORTED_MEDIA_TYPE',
    description: options.unsupported.description,
    close,
  };
}

/**
 * A form body's text, read in a declared charset, as the UTF-8 form text `formFields` reads: its percent-encoded bytes
 * are bytes of that charset (as a browser writes a form submitted in it), which URLSearchParams would read as UTF-8.
 * Each run of them is decoded in the charset and encoded again as UTF-8; `&`, `=`, `+` and `%` among them stay encoded,
 * so no field is split or joined. Throws (TypeError) on bytes invalid in the charset.
 */
function utf8FormText(text: string, decoder: TextDecoder): string {
  if (!text.includes('%')) return text;
  return text.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) =>
    encodeURIComponent(decoder.decode(Buffer.from(run.replaceAll('%', ''), 'hex'))),
  );
}

/**
 * The one reader of webhook bodies (mobile-ID notifications, verification and identification callbacks): the media type
 * and a declared charset are checked before a byte is read, the size is bounded (early, from Content-Length), and the
 * body is parsed. A refusal says what to answer; `close` asks to drop the connection when the body was left unread.
 */
export async function readWebhookBody(req: IncomingMessage, options: WebhookBodyOptions): Promise<WebhookBody> {
  // A coded body (gzip, …) is not what its Content-Type names until decoded, which no webhook does: refused, unread.
  const coding = unsupportedCoding(req);
  if (coding !== null) {
    return {
      ok: false,
      status: 415,
      error: WebhookErrorCode.INVALID_REQUEST,
      reason: 'UNSUPPORTED_MEDIA_TYPE',
      description: new BodyEncodedError(coding).message,
      close: true,
    };
  }
  const header = contentType(req);
  const type = header.type || options.defaultType || '';
  const declared = options.parserFor(type);
  // A type the route does not name, read as JSON: a body that does not parse gets the unsupported type's answer.
  const sniffed = !declared && options.otherTypes === 'json';
  const parser = declared ?? (sniffed ? 'json' : null);
  if (!parser) return unsupportedType(options, true);
  // Nothing to look up for a body that declares no charset (nearly every one): it is read as UTF-8, below.
  const decoder = header.charset === null ? null : decoderFor(header.charset);
  if (decoder === undefined) {
    return {
      ok: false,
      status: 415,
      error: WebhookErrorCode.INVALID_REQUEST,
      reason: 'UNSUPPORTED_MEDIA_TYPE',
      description: unreadableCharset(header.charset!),
      close: true,
    };
  }
  let raw: Buffer;
  try {
    raw = await readBody(req, options.limit);
  } catch (err) {
    if (!(err instanceof BodyTooLargeError)) throw err;
    return {
      ok: false,
      status: 413,
      error: WebhookErrorCode.INVALID_REQUEST,
      reason: 'BODY_TOO_LARGE',
      description: `the body exceeds ${options.limit} bytes`,
      close: true,
    };
  }
  if (decoder !== null) return readInCharset(raw, decoder, header.charset!, parser, type, sniffed, options);
  // Decoded, bytes that are not UTF-8 would each become U+FFFD: two different identifiers could read as one.
  if (!isUtf8(raw)) return sniffed ? unsupportedType(options, false) : malformed('the body is not valid UTF-8 text');
  if (parser === 'json') return parseJson(jsonText(raw), type, sniffed, options);
  const parsed = parser(raw.toString('utf8'));
  return parsed.ok ? { ok: true, body: parsed.body, type } : malformed(parsed.description);
}

/** A JSON body's text, parsed and checked. */
function parseJson(text: string, type: string, sniffed: boolean, options: WebhookBodyOptions): WebhookBody {
  let body: unknown;
  try {
    body = JSON.parse(text) as unknown;
  } catch {
    return sniffed ? unsupportedType(options, false) : malformed('the body is not valid JSON');
  }
  // Everything downstream (canonical JSON, schemas, digests) walks the body recursively, and stores its strings.
  const refusal = unsound(body, MAX_WEBHOOK_DEPTH);
  if (refusal !== null) return malformed(refusal);
  return { ok: true, body, type };
}

/**
 * A body in a declared charset other than UTF-8, read as the same text in UTF-8 would be: the parsed body, and so the
 * event's canonical JSON and digest, are the same, and a repeat in the other charset is a duplicate.
 */
function readInCharset(
  raw: Buffer,
  decoder: TextDecoder,
  charset: string,
  parser: NonNullable<ReturnType<WebhookBodyOptions['parserFor']>>,
  type: string,
  sniffed: boolean,
  options: WebhookBodyOptions,
): WebhookBody {
  const invalid = () => malformed(invalidInCharset(charset));
  let text: string;
  try {
    text = parser === 'json' ? jsonTextIn(raw, decoder) : decoder.decode(raw);
  } catch {
    return invalid();
  }
  if (parser === 'json') return parseJson(text, type, sniffed, options);
  let form: string;
  try {
    form = utf8FormText(text, decoder);
  } catch {
    return invalid();
  }
  const parsed = parser(form);
  return parsed.ok ? { ok: true, body: parsed.body, type } : malformed(parsed.description);
}
