import net from 'node:net';

import { startTestGateway, type TestGateway } from './gateway.js';
import { startPostgres } from './postgres.js';

/**
 * A TCP relay to PostgreSQL on loopback that can go silent: from `silence()` on it forwards nothing and closes
 * nothing (a network partition, a host gone); new connections are accepted and never answered. `restore()` relays
 * new connections again (those open during the silence stay silent: what they carried then is lost).
 */
export function pgRelay(port: number) {
  const sockets = new Set<net.Socket>();
  let silent = false;
  /** What the clients of the connections accepted while silent sent (their start-up messages name their application). */
  const unanswered: string[] = [];
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('error', () => undefined);
    client.on('close', () => sockets.delete(client));
    if (silent) {
      client.on('data', (d) => unanswered.push(d.toString('latin1')));
      return;
    }
    const upstream = net.connect(port, '127.0.0.1');
    sockets.add(upstream);
    upstream.on('error', () => undefined);
    let cut = false;
    client.on('data', (d) => void ((cut ||= silent) || upstream.write(d)));
    upstream.on('data', (d) => void ((cut ||= silent) || client.write(d)));
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => {
      sockets.delete(upstream);
      client.destroy();
    });
  });
  return {
    listening: new Promise<number>((resolve) =>
      server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port)),
    ),
    silence: () => void (silent = true),
    /** Whether a connection opened during a silence, left unanswered, sent `text` (an application_name, say). */
    heldWith: (text: string) => unanswered.some((d) => d.includes(text)),
    restore: () => void (silent = false),
    close() {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

/**
 * A gateway on a fresh database of a real PostgreSQL, reached through a relay that can go silent. `close` cuts the
 * silent connections first, so that the gateway's pool ends, then stops the gateway and PostgreSQL.
 */
export async function gatewayBehindRelay(database: string): Promise<{
  gw: TestGateway;
  link: ReturnType<typeof pgRelay>;
  /** The relay's port, which the gateway's DATABASE_URL names. */
  port: string;
  close(): Promise<void>;
}> {
  const pg = await startPostgres();
  let link: ReturnType<typeof pgRelay> | undefined;
  try {
    const url = new URL(await pg.createDatabase(database));
    link = pgRelay(Number(url.port));
    url.port = String(await link.listening);
    const gw = await startTestGateway({ DATABASE_URL: url.toString() });
    const relay = link;
    return {
      gw,
      link: relay,
      port: url.port,
      async close() {
        relay.close();
        await gw.close();
        await pg.stop();
      },
    };
  } catch (err) {
    link?.close();
    await pg.stop();
    throw err;
  }
}
