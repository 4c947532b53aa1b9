import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';

import { createLogger } from '../../src/logger.js';
import { Metrics } from '../../src/metrics.js';
import { createRequestHandler, RequestArrivals } from '../../src/server/http.js';

// The HTTP port counts every request it receives, answered by a route or not: the store's commit window reads the
// count to tell writes from several callers from a lone caller's (docs/decisions/159).
describe("the HTTP port's count of requests received", () => {
  let server: http.Server | undefined;
  afterEach(async () => {
    await new Promise((resolve) => server?.close(resolve));
  });

  it('counts each request as it arrives, whatever its route answers', async () => {
    const arrivals = new RequestArrivals();
    const seen: number[] = [];
    const handler = createRequestHandler({
      routes: [
        {
          method: 'GET',
          path: '/here',
          name: 'here',
          handle: (_req, res) => {
            seen.push(arrivals.count);
            res.end('ok');
          },
        },
      ],
      logger: createLogger({ level: 'silent' }),
      metrics: new Metrics(),
      arrivals,
    });
    server = http.createServer(handler);
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    expect((await fetch(`${url}/here`)).status).toBe(200);
    expect((await fetch(`${url}/nowhere`)).status).toBe(404);
    expect((await fetch(`${url}/here`, { method: 'POST' })).status).toBe(405);
    expect((await fetch(`${url}/here`)).status).toBe(200);
    // Counted before the route runs: the route of the fourth request saw 4.
    expect(seen).toEqual([1, 4]);
    expect(arrivals.count).toBe(4);
  });
});
