import net from 'node:net';

/**
 * A TCP relay to PostgreSQL on loopback that can go silent: from `silence()` on it forwards nothing and closes
 * nothing (a network partition, a host gone); new connections are accepted and never answered. `restore()` relays
 * new connections again (those open during the silence stay silent: what they carried then is lost).
 */
export function pgRelay(port: number) {
  const sockets = new Set<net.Socket>();
  let silent = false;
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('error', () => undefined);
    client.on('close', () => sockets.delete(client));
    if (silent) return;
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
    restore: () => void (silent = false),
    close() {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}
