// SIGTERM while the gateway still starts (waiting for PostgreSQL): a shutdown as docs/operations.md describes it, not
// the signal's default action (no line, status 143). The wait stops, what the start opened is closed (its port), one
// line says so, and the process exits 0.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { freePort } from '../../scripts/embedded-postgres.js';
import { gatewayProcesses, type GatewayProcess } from '../helpers/process.js';

/**
 * The process's end, once its output is read to the end: `close`, not `exit`, which may come before the last lines
 * written to the pipes have been read.
 */
function exited(p: GatewayProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) => p.child.once('close', (code, signal) => resolve({ code, signal })));
}

describe('SIGTERM while the gateway starts', () => {
  const start = gatewayProcesses();

  it('stops the wait for PostgreSQL, logs it, closes the port and exits 0', async () => {
    // Nothing listens on the port: the gateway waits for its database, retrying with backoff.
    const port = await freePort();
    const gw = await start(
      {
        DATABASE_URL: `postgresql://postgres:${randomBytes(12).toString('hex')}@127.0.0.1:${port}/postgres`,
        TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
        LOG_FORMAT: 'json',
      },
      { until: 'listening: not ready' },
    );
    await gw.waitFor('PostgreSQL is not reachable: waiting for it, retrying with backoff');
    const ended = exited(gw);
    gw.child.kill('SIGTERM');
    expect(await ended, gw.output()).toEqual({ code: 0, signal: null });

    const lines = gw
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg: string; signal?: string });
    expect(lines.filter((l) => l.signal === 'SIGTERM')).toEqual([
      expect.objectContaining({ msg: 'shutting down during the start: it stops, and what it opened is closed' }),
    ]);
    expect(lines.at(-1)).toMatchObject({ msg: 'shutdown complete' });
    expect(gw.output()).not.toContain('failed to start');
    await expect(fetch(`${gw.url}/healthz`)).rejects.toThrow();
  }, 60_000);
});
