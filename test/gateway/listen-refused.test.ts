// A port or an address the gateway cannot listen on stops the start with exit 1 and one line that names the variable
// to change (PORT or HOST) and what to do. It used to print Node's bare `listen EADDRINUSE: address already in use
// 0.0.0.0:4000` followed by a stack trace, which named neither PORT nor a way out: the first thing a newcomer meets
// when something else already serves port 4000. A second gateway on a running one's DATA_DIR is refused the same
// way, its message without a stack trace. Real processes (node src/main.ts).
import net, { type AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';

import { tempDataDir } from '../helpers/gateway.js';
import { gatewayProcesses, runMainUntilReady } from '../helpers/process.js';

const start = gatewayProcesses();
const STACK_LINE = /^\s+at /m;

describe('a start that cannot listen', () => {
  it('a PORT another process listens on: exit 1 naming PORT and HOST, and no stack trace', async () => {
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const { port } = holder.address() as AddressInfo;
    try {
      const { code, output } = await runMainUntilReady({ PORT: String(port), DATA_DIR: tempDataDir() });
      expect(output).toContain(
        `gateway: failed to start: PORT ${port} (HOST 127.0.0.1): another process listens on this port (EADDRINUSE): stop it, or set PORT to a free port\n`,
      );
      expect(output).not.toMatch(STACK_LINE);
      expect(code).toBe(1);
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
  });

  it('a HOST no interface of this machine has: exit 1 naming HOST, and no stack trace', async () => {
    // 192.0.2.1 is TEST-NET-1 (RFC 5737): documentation only, never an address of this machine.
    const { code, output } = await runMainUntilReady({ HOST: '192.0.2.1', DATA_DIR: tempDataDir() });
    expect(output).toContain('gateway: failed to start: HOST 192.0.2.1: no interface of this machine has this address');
    expect(output).not.toMatch(STACK_LINE);
    expect(code).toBe(1);
  });

  it("a second gateway on a running one's DATA_DIR: exit 1 naming DATA_DIR, and no stack trace", async () => {
    const dataDir = tempDataDir();
    const first = await start({ DATA_DIR: dataDir });
    const { code, output } = await runMainUntilReady({ DATA_DIR: dataDir });
    expect(output).toContain(`gateway: failed to start: DATA_DIR (${dataDir}): in use by another gateway process`);
    expect(output).not.toMatch(STACK_LINE);
    expect(code).toBe(1);
    expect((await fetch(`${first.url}/readyz`)).status).toBe(200);
  });
});
