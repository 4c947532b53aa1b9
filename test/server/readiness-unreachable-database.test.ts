// /readyz while PostgreSQL stops answering without closing its connections (a network partition, a host gone): the
// check answers 503 naming the database, instead of waiting for an answer that never comes.
import net from 'node:net';
import { request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';

/** A TCP relay to PostgreSQL that can go silent: from `silence()` on it forwards nothing, and closes nothing. */
function relay(port: number) {
  const sockets = new Set<net.Socket>();
  let silent = false;
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('error', () => undefined);
    if (silent) return;
    const upstream = net.connect(port, '127.0.0.1');
    sockets.add(upstream);
    upstream.on('error', () => undefined);
    client.on('data', (d) => void (silent || upstream.write(d)));
    upstream.on('data', (d) => void (silent || client.write(d)));
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  return {
    listening: new Promise<number>((resolve) =>
      server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port)),
    ),
    silence: () => void (silent = true),
    close() {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

describe('readiness while the database does not answer', () => {
  let pg: TestPostgres | undefined;
  let gw: TestGateway | undefined;
  let link: ReturnType<typeof relay> | undefined;
  afterAll(async () => {
    // The silent connections are cut first, so that the gateway's pool ends.
    link?.close();
    await gw?.close();
    await pg?.stop();
  });

  it('answers 503 naming the database', async () => {
    pg = await startPostgres();
    const url = new URL(await pg.createDatabase('readyz_silent'));
    link = relay(Number(url.port));
    url.port = String(await link.listening);
    gw = await startTestGateway({ DATABASE_URL: url.toString() });
    const ready = await request(`${gw.url}/readyz`);
    expect(ready.statusCode).toBe(200);
    await ready.body.dump();

    link.silence();
    const res = await request(`${gw.url}/readyz`);
    expect(res.statusCode).toBe(503);
    expect(await res.body.json()).toMatchObject({ status: 'unavailable', store: 'postgres' });
  }, 60_000);
});
