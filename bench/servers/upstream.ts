/**
 * The upstream the mutation scenarios call, in its own process.
 *
 * `stub` (default): a minimal cloud API that does only what a fast upstream must — checks the bearer
 * token, the JSON content type and the Idempotency-Key (a UUID), replays a key it has seen (bounded
 * memory), and answers 201 with the created record; `GET /__stats` counts what it created, replayed and refused
 * and shows the last created request (path, Idempotency-Key, body), for test/bench/peers.test.ts. It costs the shared core as little as possible, so
 * the figures measure the gateway and not the stub.
 *
 * `sandbox`: the project's cloud sandbox in fast mode (no body validation), for comparison.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { LRUCache } from 'lru-cache';

import { SANDBOX_SERVICE_ACCOUNT_TOKEN, startCloudSandbox } from '../../src/sandbox/cloud.js';

const mode = process.argv.includes('--sandbox') ? 'sandbox' : 'stub';
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const AUTH = `Bearer ${SANDBOX_SERVICE_ACCOUNT_TOKEN}`;

function send(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

async function startStub(): Promise<{ url: string }> {
  const replies = new LRUCache<string, string>({ max: 100_000 });
  let created = 0;
  let replayed = 0;
  let refused = 0;
  let last: { path: string; idempotencyKey: string; body: unknown } | null = null;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '/';
      const refuse = (status: number, code: string) => {
        refused += 1;
        send(res, status, { code, domain: 'stub', details: code });
      };
      if (req.method === 'GET' && path === '/__stats') return send(res, 200, { created, replayed, refused, last });
      if (req.method !== 'POST') return refuse(405, 'METHOD_NOT_ALLOWED');
      if (req.headers.authorization !== AUTH) return refuse(401, 'UNAUTHENTICATED');
      if (!(req.headers['content-type'] ?? '').startsWith('application/json'))
        return refuse(415, 'UNSUPPORTED_MEDIA_TYPE');
      const key = req.headers['idempotency-key'];
      if (typeof key !== 'string' || !UUID_RE.test(key)) return refuse(400, 'IDEMPOTENCY_KEY_INVALID');
      const seen = replies.get(key);
      if (seen !== undefined) {
        replayed += 1;
        res.writeHead(201, {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(seen),
          'idempotent-replayed': 'true',
        });
        res.end(seen);
        return;
      }
      let body: Record<string, any>;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, any>;
      } catch {
        return refuse(400, 'MALFORMED_JSON');
      }
      const id = randomUUID();
      const createdAt = new Date().toISOString();
      let record: unknown;
      if (path === '/apis/projects/public/v4/projects') {
        record = { id, name: body.name, description: body.description, createdAt };
      } else if (path === '/ocs/v1/services') {
        record = {
          id,
          kind: body.kind,
          productCode: body.platform?.productCode,
          projectId: body.projectId,
          ...(body.parentBinding ? { parentBinding: body.parentBinding } : {}),
          status: 'CREATING',
          metadata: body.metadata,
          regionCode: body.platform?.regionCode,
          zoneCode: body.zoneCode,
          ...(body.kind === 'ip' ? { address: `203.0.113.${(created % 254) + 1}` } : {}),
          createdAt,
        };
      } else {
        return refuse(404, 'NOT_FOUND');
      }
      created += 1;
      last = { path, idempotencyKey: key, body };
      const text = JSON.stringify(record);
      replies.set(key, text);
      res.writeHead(201, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}` };
}

if (mode === 'sandbox') {
  const sandbox = await startCloudSandbox({ fast: true, maxRecordedRequests: 1_000 });
  process.stdout.write(`READY ${JSON.stringify({ url: sandbox.url, mode })}\n`);
} else {
  const stub = await startStub();
  process.stdout.write(`READY ${JSON.stringify({ url: stub.url, mode })}\n`);
}
process.on('SIGTERM', () => process.exit(0));
