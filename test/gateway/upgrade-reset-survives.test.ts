// A WebSocket upgrade the gateway refuses (a path other than /graphql: 404) whose client then resets the connection
// (TCP RST) must not end the process: Node takes its own 'error' listener off a socket it hands to 'upgrade', and an
// ECONNRESET with no listener is an uncaught exception. A real process, so that such an end is seen as one.
import net from 'node:net';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { tempDataDir } from '../helpers/gateway.js';
import { gatewayProcesses } from '../helpers/process.js';

const spawnGateway = gatewayProcesses();

/** Sends an upgrade request for `path`, reads the first bytes of the answer, then resets the connection. */
async function upgradeThenReset(url: string, path: string): Promise<string> {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(
    `GET ${path} HTTP/1.1\r\nHost: ${hostname}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
      'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
  );
  const answer = await new Promise<string>((resolve) => socket.once('data', (d: Buffer) => resolve(String(d))));
  // The gateway has answered and half-closed; it still reads, and the reset reaches it as ECONNRESET.
  socket.resetAndDestroy();
  await new Promise((resolve) => socket.once('close', resolve));
  return answer;
}

describe('a refused WebSocket upgrade whose client resets the connection', () => {
  it('is answered 404, and the gateway goes on serving', async () => {
    const gateway = await spawnGateway({ DATA_DIR: tempDataDir() });
    for (let i = 0; i < 3; i++) {
      expect(await upgradeThenReset(gateway.url, '/not-graphql')).toMatch(/^HTTP\/1\.1 404 /);
      // The reset was read before this request, sent on a new connection after it: a process it ended answers none.
      const res = await request(`${gateway.url}/healthz`).catch((err: unknown) => {
        throw new Error(`${String(err)}; the gateway wrote:\n${gateway.output().slice(-2000)}`);
      });
      expect(res.statusCode, gateway.output()).toBe(200);
      await res.body.dump();
    }
    expect(gateway.child.exitCode, gateway.output()).toBeNull();
    expect(gateway.output()).not.toContain('ECONNRESET');
  });
});
