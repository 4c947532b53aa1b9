/** What the hand-written bench servers (baseline.ts, durable-baseline.ts) share: node:http and nothing else. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Route = (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void>;

export function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/**
 * Serves `POST <path>` routes on 127.0.0.1 (a free port), prints `READY {"url": ...}` for bench/lib/processes.ts,
 * and on SIGTERM closes the server, runs `onStop` and exits.
 */
export function serveRoutes(routes: Record<string, Route>, onStop: () => void): void {
  const server = http.createServer((req, res) => {
    const handler = routes[req.url ?? ''];
    if (!handler || req.method !== 'POST') {
      sendJson(res, 404, { error: 'not_found' });
      return;
    }
    handler(req, res).catch((err: unknown) => {
      if (!res.headersSent)
        sendJson(res, 500, { errors: [{ message: err instanceof Error ? err.message : String(err) }] });
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 65_000;
  server.listen(0, '127.0.0.1', () => {
    const { port } = server.address() as AddressInfo;
    process.stdout.write(`READY ${JSON.stringify({ url: `http://127.0.0.1:${port}` })}\n`);
  });
  process.on('SIGTERM', () => {
    server.close();
    onStop();
    process.exit(0);
  });
}
