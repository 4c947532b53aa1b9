// Small helpers shared by every sandbox server: a loopback `node:http` server that
// closes for real (keep-alive and hanging sockets included), bounded JSON bodies
// and JSON answers. Nothing here knows about a particular upstream.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export type SandboxRequestHandler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

export interface LoopbackServerOptions {
  /**
   * Called when the handler throws or rejects. Default: answer 500 with
   * `{ "error": "internal_error" }` if nothing was sent yet, else destroy the socket.
   */
  onHandlerError?: (error: unknown, req: IncomingMessage, res: ServerResponse) => void;
}

export interface LoopbackServer {
  /** `http://127.0.0.1:<port>`, no trailing slash. */
  readonly url: string;
  readonly port: number;
  readonly server: Server;
  /**
   * Stops accepting connections and destroys every open socket, idle keep-alive
   * ones and those of requests still being answered (or deliberately hung).
   * Safe to call more than once.
   */
  close(): Promise<void>;
  /**
   * A fault: stops listening and destroys every open socket, so that each new connection is refused (ECONNREFUSED)
   * until `accept`. Nothing in flight is answered.
   */
  refuse(): Promise<void>;
  /** Listens again, on the same port, after `refuse`. */
  accept(): Promise<void>;
}

/** Starts `handler` on 127.0.0.1 with an ephemeral port. */
export async function startLoopbackServer(
  handler: SandboxRequestHandler,
  options: LoopbackServerOptions = {},
): Promise<LoopbackServer> {
  const sockets = new Set<Socket>();
  const onHandlerError = options.onHandlerError ?? defaultHandlerError;

  const server = createServer((req, res) => {
    let outcome: void | Promise<void>;
    try {
      outcome = handler(req, res);
    } catch (error) {
      onHandlerError(error, req, res);
      return;
    }
    if (outcome instanceof Promise) outcome.catch((error: unknown) => onHandlerError(error, req, res));
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;

  const stop = () =>
    new Promise<void>((resolve, reject) => {
      if (!server.listening) resolve();
      else server.close((error) => (error ? reject(error) : resolve()));
      for (const socket of sockets) socket.destroy();
      sockets.clear();
    });
  let closing: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    server,
    close() {
      closing ??= stop();
      return closing;
    },
    refuse: stop,
    accept: () =>
      new Promise<void>((resolve, reject) => {
        if (server.listening || closing) return resolve();
        server.once('error', reject);
        server.listen(port, '127.0.0.1', () => {
          server.off('error', reject);
          resolve();
        });
      }),
  };
}

function defaultHandlerError(_error: unknown, _req: IncomingMessage, res: ServerResponse): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, 500, { error: 'internal_error' });
}

export type BodyErrorReason = 'too_large' | 'malformed_json' | 'aborted';

/** A request body that could not be read, and why. */
export class BodyError extends Error {
  readonly reason: BodyErrorReason;
  constructor(reason: BodyErrorReason, message: string) {
    super(message);
    this.name = 'BodyError';
    this.reason = reason;
  }
}

export const DEFAULT_BODY_LIMIT_BYTES = 1024 * 1024;

/**
 * Reads the whole body, refusing more than `limitBytes`. Past the limit the rest
 * of the body is drained and discarded so that an error answer can still be sent.
 */
export function readRawBody(req: IncomingMessage, limitBytes = DEFAULT_BODY_LIMIT_BYTES): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limitBytes) {
      req.resume();
      reject(new BodyError('too_large', `body exceeds ${limitBytes} bytes`));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    req.on('data', (chunk: Buffer) => {
      if (failed) return;
      size += chunk.length;
      if (size > limitBytes) {
        failed = true;
        chunks.length = 0;
        reject(new BodyError('too_large', `body exceeds ${limitBytes} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    let ended = false;
    req.once('end', () => {
      ended = true;
      if (!failed) resolve(Buffer.concat(chunks));
    });
    const abort = () => {
      if (failed || ended) return;
      failed = true;
      reject(new BodyError('aborted', 'request body was aborted'));
    };
    req.once('error', abort);
    req.once('close', abort);
  });
}

/** An empty body reads as `undefined`; anything else must be valid JSON. */
export function parseJsonBody(raw: Buffer): unknown {
  if (raw.length === 0) return undefined;
  try {
    return JSON.parse(raw.toString('utf8')) as unknown;
  } catch {
    throw new BodyError('malformed_json', 'body is not valid JSON');
  }
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const payload = Buffer.from(JSON.stringify(body) ?? 'null');
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(payload.length),
  });
  res.end(payload);
}

/** First value of a request header (names are case-insensitive). */
export function headerValue(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name.toLowerCase()];
  return Array.isArray(value) ? value[0] : value;
}

/** Request headers with lower-cased names; repeated headers joined with `, `. */
export function flattenHeaders(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    out[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

/** Path of the request without its query string. */
export function requestPath(req: IncomingMessage): string {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

/** True when a `Content-Type` value is `application/json` (parameters such as charset allowed). */
export function isJsonMediaType(value: string | undefined): boolean {
  if (value === undefined) return false;
  return value.split(';')[0]!.trim().toLowerCase() === 'application/json';
}

/**
 * True when an `Accept` value lists `application/json` itself with a non-zero q.
 * Wildcards (`*\/*`) deliberately do not count: the sandboxes check that a client
 * sends the header the spec asks for, not that it happens to accept anything.
 */
export function acceptsJsonExplicitly(value: string | undefined): boolean {
  if (value === undefined) return false;
  return value.split(',').some((range) => {
    const [type, ...params] = range.split(';').map((part) => part.trim().toLowerCase());
    if (type !== 'application/json') return false;
    const q = params.find((p) => p.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}

/** JSON with object keys sorted at every depth: equal values give equal strings. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value)) ?? 'undefined';
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) out[key] = sortKeys((value as Record<string, unknown>)[key]);
    return out;
  }
  return value;
}
