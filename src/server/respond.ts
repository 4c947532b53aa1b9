import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

import { WebhookErrorCode } from '../errors.js';

export class BodyTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`body exceeds ${limit} bytes`);
  }
}

/** A body sent with a Content-Encoding no route decodes (gzip, …): refused unread, 415. */
export class BodyEncodedError extends Error {
  constructor(readonly coding: string) {
    super(`Content-Encoding ${coding} is not supported: send the body unencoded`);
  }
}

/**
 * The Content-Encoding of a request's body, when it is one (gzip, deflate, br, …) and not `identity`; else null. No route
 * decodes a coded body: read as it is, it is not what its Content-Type names, and would be refused as malformed.
 */
export function unsupportedCoding(req: IncomingMessage): string | null {
  const coding = req.headers['content-encoding']?.trim();
  return coding && coding.toLowerCase() !== 'identity' ? coding.slice(0, 64) : null;
}

/**
 * Reads a request body, refusing more than `limit` bytes (early, from Content-Length, when it is given) and, unread, a
 * body with a Content-Encoding (BodyEncodedError).
 */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const coding = unsupportedCoding(req);
  if (coding !== null) return Promise.reject(new BodyEncodedError(coding));
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(new BodyTooLargeError(limit));
  if (req.readableEnded) return Promise.resolve(Buffer.alloc(0));
  // Events, not `for await`: the stream's async iterator costs a promise per chunk and its end-of-stream
  // machinery on every request (bench:guard, decision 049). Over the limit, the rest of the body is not read: the
  // caller answers 413 with `connection: close`.
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        stop();
        req.pause();
        reject(new BodyTooLargeError(limit));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      stop();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (err: Error) => {
      stop();
      reject(err);
    };
    const onClose = () => {
      stop();
      reject(Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

/**
 * A JSON body's text: its bytes read as UTF-8, a leading byte order mark skipped. RFC 8259 §8.1 lets a parser ignore
 * the mark (Windows tools write one), JSON.parse refuses it: every route that parses a JSON body reads it here, so that
 * no route refuses what another takes. One byte compared for a body without the mark.
 */
export function jsonText(raw: Buffer): string {
  return raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf ? raw.toString('utf8', 3) : raw.toString('utf8');
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(text);
}

/** The OAuth-style error body the webhook endpoints answer with: `{ error, error_description }`. */
export function sendOAuthError(
  res: ServerResponse,
  status: number,
  error: WebhookErrorCode,
  description: string,
  headers: Record<string, string> = {},
): void {
  sendJson(res, status, { error, error_description: description }, headers);
}

/**
 * How long a client is told to wait (Retry-After) before it sends again what the port could not take: while the gateway
 * starts, or once the route has closed for the shutdown (the load balancer sends the retry to another replica).
 */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

/**
 * The answer to a request that a route closed for the shutdown no longer takes (a WebSocket upgrade, an SSE stream's
 * reservation): 503 `temporarily_unavailable` with Retry-After, as the port answers while the gateway starts.
 */
export function refuseShuttingDown(res: ServerResponse, headers: Record<string, string> = {}): void {
  sendOAuthError(res, 503, WebhookErrorCode.TEMPORARILY_UNAVAILABLE, 'the gateway is shutting down', {
    ...headers,
    'retry-after': String(UNAVAILABLE_RETRY_AFTER_SECONDS),
  });
}

/** Node's parser refusals, as Node answers them by itself (its status), with what the gateway says of each. */
const UNREAD: Record<string, [status: number, reason: string, description: string]> = {
  HPE_HEADER_OVERFLOW: [431, 'Request Header Fields Too Large', 'the request headers are too large'],
  HPE_CHUNK_EXTENSIONS_OVERFLOW: [413, 'Payload Too Large', 'the chunk extensions are too large'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout', 'the request did not arrive in time'],
};

/**
 * The answer to a request Node's HTTP parser refused (its `clientError`): the status Node would answer, and as every
 * other refusal an OAuth error body and an `X-Request-Id`, then the connection closed. As Node does, nothing is written
 * on a connection that has answered before (a response may be on its way) or can no longer be written.
 */
export function refuseUnreadRequest(err: Error & { code?: string }, socket: Duplex & { bytesWritten?: number }): void {
  if (err.code === 'ECONNRESET' || !socket.writable || (socket.bytesWritten ?? 0) > 0) {
    socket.destroy();
    return;
  }
  const [status, reason, description] = UNREAD[err.code ?? ''] ?? [400, 'Bad Request', 'the request is not valid HTTP'];
  refuseOnSocket(socket, `${status} ${reason}`, WebhookErrorCode.INVALID_REQUEST, description, randomUUID());
}

/**
 * A refusal written on a socket no ServerResponse owns (a request Node's parser refused, an upgrade no route takes),
 * as sendOAuthError writes one: its OAuth error body, no-store, its `X-Request-Id`, and the connection closed.
 */
export function refuseOnSocket(
  socket: Duplex,
  statusLine: string,
  error: WebhookErrorCode,
  description: string,
  requestId: string,
): void {
  const body = JSON.stringify({ error, error_description: description });
  socket.end(
    `HTTP/1.1 ${statusLine}\r\ncontent-type: application/json; charset=utf-8\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\ncache-control: no-store\r\nx-request-id: ${requestId}\r\n` +
      `connection: close\r\n\r\n${body}`,
  );
}

/** A request's Content-Type: its media type and the charset it declares (both lowercase), or null for none. */
export interface ContentType {
  type: string;
  charset: string | null;
}

/** What nearly every client sends, already in the form the general case would give. */
const PLAIN_JSON: ContentType = Object.freeze({ type: 'application/json', charset: null });

/**
 * The Content-Type of a request, split once: its media type and its `charset` parameter (RFC 9110 §8.3: the name in
 * any case, the value a token or a quoted string). An empty charset declares none.
 */
export function contentType(req: IncomingMessage): ContentType {
  const header = req.headers['content-type'];
  if (header === 'application/json') return PLAIN_JSON;
  const parts = (header ?? '').split(';');
  const type = parts[0]!.trim().toLowerCase();
  for (let i = 1; i < parts.length; i++) {
    const part = parts[i]!;
    const eq = part.indexOf('=');
    if (eq === -1 || part.slice(0, eq).trim().toLowerCase() !== 'charset') continue;
    let value = part.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"'))
      value = value.slice(1, -1).replace(/\\(.)/g, '$1');
    return { type, charset: value ? value.toLowerCase() : null };
  }
  return { type, charset: null };
}

/**
 * Declared charsets read as a body that declares none, as UTF-8: US-ASCII is a subset of it (WHATWG reads the label as
 * windows-1252, as browsers do; a body that declares ASCII and holds UTF-8 is read as it was most likely written).
 */
const READ_AS_UTF8 = new Set(['utf-8', 'utf8', 'us-ascii', 'ascii']);

/**
 * The decoder of a declared charset a body is read in rather than UTF-8 (fatal: a byte invalid in it throws, where
 * it would otherwise read as U+FFFD), null when the body is read as UTF-8, or undefined for a label TextDecoder does
 * not know. RFC 8259 §8.1 wants JSON in UTF-8, but a sender that declares another charset says how to read its bytes:
 * every route that reads a body (the webhooks, POST /graphql, /graphql/stream, /mcp) reads it in the charset by this
 * one rule, and refuses the same charsets in the same words (`unreadableCharset`, `invalidInCharset`).
 */
export function decoderFor(charset: string): TextDecoder | null | undefined {
  if (READ_AS_UTF8.has(charset)) return null;
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(charset, { fatal: true });
  } catch {
    return undefined;
  }
  // Another label of UTF-8 (`unicode-1-1-utf-8`): read as one that names it, with the same answers.
  return decoder.encoding === 'utf-8' ? null : decoder;
}

/** A declared charset as an answer names it: quoted, and bounded (it is the sender's text). */
const quoted = (charset: string): string => JSON.stringify(charset.length > 64 ? `${charset.slice(0, 64)}…` : charset);

/** The refusal of a charset `decoderFor` does not know (answered 415, the body unread). */
export const unreadableCharset = (charset: string): string =>
  `the charset ${quoted(charset)} is not one the gateway can read: send the body in UTF-8`;

/** The refusal of bytes invalid in the declared charset (answered 400). */
export const invalidInCharset = (charset: string): string =>
  `the body is not valid text in its declared charset ${quoted(charset)}`;

/**
 * A JSON body's text read with `decoder` (from `decoderFor`; null: `jsonText`'s UTF-8). The decoder drops a UTF-8 or
 * UTF-16 byte order mark; a GB18030 one reads as U+FEFF, dropped as `jsonText` drops UTF-8's. Throws (TypeError) on
 * bytes invalid in the charset.
 */
export function jsonTextIn(raw: Buffer, decoder: TextDecoder | null): string {
  if (decoder === null) return jsonText(raw);
  const text = decoder.decode(raw);
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

/** Why a request body was not read as text: the status to answer, its words, and whether to close the connection. */
export interface BodyRefusal {
  ok: false;
  status: 400 | 413 | 415;
  /** Null for 413: each route words its own limit. */
  message: string | null;
  /** The body was left unread: close the connection rather than drain it. */
  close: boolean;
}

/**
 * A JSON request body of POST /graphql, /graphql/stream or /mcp, read as text in `charset` (its Content-Type's, or null
 * for none: UTF-8), or why it was not: a charset the gateway cannot read (415, unread), a Content-Encoding (415, unread),
 * a body over `limit` (413, the rest unread), bytes invalid in the charset (400). One reader, so the three routes
 * refuse the same bodies in the same words; a body that declares no charset looks nothing up.
 */
export async function readBodyText(
  req: IncomingMessage,
  limit: number,
  charset: string | null,
): Promise<{ ok: true; raw: Buffer; text: string } | BodyRefusal> {
  const decoder = charset === null ? null : decoderFor(charset);
  if (decoder === undefined) return { ok: false, status: 415, message: unreadableCharset(charset!), close: true };
  let raw: Buffer;
  try {
    raw = await readBody(req, limit);
  } catch (err) {
    if (err instanceof BodyEncodedError) return { ok: false, status: 415, message: err.message, close: true };
    if (err instanceof BodyTooLargeError) return { ok: false, status: 413, message: null, close: true };
    throw err;
  }
  try {
    return { ok: true, raw, text: jsonTextIn(raw, decoder) };
  } catch {
    return { ok: false, status: 400, message: invalidInCharset(charset!), close: false };
  }
}
