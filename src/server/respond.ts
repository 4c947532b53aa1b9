import type { IncomingMessage, ServerResponse } from 'node:http';
import type { WebhookErrorCode } from '../errors.js';

export class BodyTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`body exceeds ${limit} bytes`);
  }
}

/** Reads a request body, refusing more than `limit` bytes (early, from Content-Length, when it is given). */
export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) throw new BodyTooLargeError(limit);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new BodyTooLargeError(limit);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
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
export function sendOAuthError(res: ServerResponse, status: number, error: WebhookErrorCode, description: string, headers: Record<string, string> = {}): void {
  sendJson(res, status, { error, error_description: description }, headers);
}

export function mediaType(req: IncomingMessage): string {
  return (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
}
