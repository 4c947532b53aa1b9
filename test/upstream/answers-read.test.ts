// How an upstream's answer is read off the wire (src/upstream/http.ts, docs/decisions/088): through undici's
// `dispatch`, exactly as undici's `request` and `body.text()` read it (the same status, the same headers object, the
// same text), and a failure before the answer's head told apart from one in its body, as before.
import net from 'node:net';
import * as undici from 'undici';
import undiciUtil from 'undici/lib/core/util.js';
import Pool from 'undici/lib/dispatcher/pool.js';
import { afterEach, describe, expect, it } from 'vitest';

import { createLogger } from '../../src/logger.js';
import { Metrics } from '../../src/metrics.js';
import { UpstreamHttp } from '../../src/upstream/http.js';

/** A server that writes `answer` (raw HTTP, in the pieces given) to every request once its head has come. */
async function rawServer(pieces: (Buffer | string)[], end = true): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    let head = '';
    socket.on('data', async (chunk) => {
      head += chunk.toString('latin1');
      const at = head.indexOf('\r\n\r\n');
      if (at === -1) return;
      const length = Number(/content-length: *(\d+)/i.exec(head.slice(0, at))?.[1] ?? 0);
      if (head.length - at - 4 < length) return;
      head = '';
      for (const piece of pieces) {
        socket.write(piece);
        // Each piece in its own packet.
        await new Promise((resolve) => setImmediate(resolve));
      }
      if (!end) socket.destroy();
    });
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

function upstream(url: string): UpstreamHttp {
  return new UpstreamHttp({
    name: 'cloud',
    baseUrl: url,
    timeoutMs: 5_000,
    retryBudgetMs: 0,
    maxRetries: 0,
    metrics: new Metrics(),
    logger: createLogger({ level: 'silent' }),
  });
}

const closing: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closing.splice(0)) await close();
});

describe("an upstream's answer", () => {
  it("goes through undici's own Pool and header parser, imported from their modules rather than the index", () => {
    // src/upstream/http.ts imports these two alone (the index loads undici's whole API); a release of undici that
    // moved or replaced them fails here, not in production.
    expect(Pool).toBe(undici.Pool);
    expect(undiciUtil.parseHeaders).toBe(undici.util.parseHeaders);
  });

  it("is read as undici's request reads it: repeated headers, a byte order mark, a body in pieces", async () => {
    const body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"id":"ünïcode-1","list":[1,2]}')]);
    const server = await rawServer([
      'HTTP/1.1 201 Created\r\n',
      'Content-Type: application/json\r\nX-Seen: a\r\nx-seen: b\r\nSet-Cookie: one=1\r\nSet-Cookie: two=2\r\n',
      `Content-Length: ${body.length}\r\n\r\n`,
      body.subarray(0, 7),
      body.subarray(7),
    ]);
    closing.push(server.close);
    const http = upstream(server.url);
    closing.push(() => http.close());

    const ours = await http.request({ method: 'POST', path: '/things', route: 'POST /things', body: { a: 1 } });
    const theirs = await undici.request(`${server.url}/things`, { method: 'POST', body: '{"a":1}' });
    const text = await theirs.body.text();

    expect(ours.status).toBe(theirs.statusCode);
    expect(ours.headers).toEqual(theirs.headers);
    expect(ours.headers['x-seen']).toEqual(['a', 'b']);
    expect(ours.body).toEqual(JSON.parse(text));
    expect(ours.body).toEqual({ id: 'ünïcode-1', list: [1, 2] });
  });

  it('is the text as it came when it is not JSON, and null when empty', async () => {
    const text = await rawServer(['HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello']);
    const empty = await rawServer(['HTTP/1.1 204 No Content\r\n\r\n']);
    closing.push(text.close, empty.close);
    const a = upstream(text.url);
    const b = upstream(empty.url);
    closing.push(
      () => a.close(),
      () => b.close(),
    );
    expect((await a.request({ method: 'GET', path: '/', route: 'GET /' })).body).toBe('hello');
    expect((await b.request({ method: 'GET', path: '/', route: 'GET /' })).body).toBeNull();
  });

  it('that breaks off in its body is a failure after it was sent (the socket error), not a refusal', async () => {
    const server = await rawServer(['HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\n{"id":'], false);
    closing.push(server.close);
    const http = upstream(server.url);
    closing.push(() => http.close());
    const failure = await http.request({ method: 'POST', path: '/', route: 'POST /', body: {} }).catch((e) => e);
    expect(failure.extensions).toMatchObject({ code: 'UPSTREAM_UNAVAILABLE', upstream: 'cloud', attempts: 1 });
    expect(failure.message).toMatch(/UND_ERR_SOCKET/);
    const metrics = await (http as unknown as { options: { metrics: Metrics } }).options.metrics.registry.metrics();
    expect(metrics).toMatch(/gateway_upstream_request_duration_seconds_count\{[^}]*status="UND_ERR_SOCKET"\} 1/);
  });

  it('that never comes because nobody listens is a failure before anything was sent', async () => {
    const server = await rawServer([]);
    const url = server.url;
    await server.close();
    const http = upstream(url);
    closing.push(() => http.close());
    const failure = await http.request({ method: 'POST', path: '/', route: 'POST /', body: {} }).catch((e) => e);
    expect(failure.extensions).toMatchObject({ code: 'UPSTREAM_UNAVAILABLE', upstream: 'cloud', attempts: 1 });
    expect(failure.message).toMatch(/ECONNREFUSED/);
  });
});
