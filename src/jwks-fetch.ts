// The one fetch of a JWKS, for the identity provider of apps' JWTs (src/server/jwt-auth.ts) and for the mobile
// identity service (src/mobile-id/jwks.ts): bounded in time and size, and checked to be a JWKS.
import type { JSONWebKeySet } from 'jose';
import { request } from 'undici';

const JWKS_TIMEOUT_MS = 5_000;
const JWKS_MAX_BYTES = 1024 * 1024;

export async function fetchJwks(url: string): Promise<JSONWebKeySet> {
  const res = await request(url, {
    method: 'GET',
    headers: { accept: 'application/jwk-set+json, application/json' },
    headersTimeout: JWKS_TIMEOUT_MS,
    bodyTimeout: JWKS_TIMEOUT_MS,
  });
  if (res.statusCode !== 200) {
    await res.body.dump();
    throw new Error(`GET ${url} answered ${res.statusCode}`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > JWKS_MAX_BYTES) {
      res.body.destroy();
      throw new Error(`GET ${url} answered more than ${JWKS_MAX_BYTES} bytes`);
    }
    chunks.push(chunk);
  }
  let jwks: unknown;
  try {
    jwks = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new Error(`GET ${url} answered something that is not JSON`);
  }
  if (!jwks || typeof jwks !== 'object' || !Array.isArray((jwks as { keys?: unknown }).keys)) throw new Error(`GET ${url} answered JSON that is not a JWKS (no "keys" array)`);
  return jwks as JSONWebKeySet;
}
