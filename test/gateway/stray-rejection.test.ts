import path from 'node:path';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { tempDataDir } from '../helpers/gateway.js';
import { gatewayProcesses } from '../helpers/process.js';

const spawnGateway = gatewayProcesses();
const STRAY = path.resolve(import.meta.dirname, '../helpers/stray-rejection.mjs');

describe('a promise rejected with nothing to handle it (src/main.ts)', () => {
  it('is logged once, masked, and the gateway goes on serving', async () => {
    const gateway = await spawnGateway({
      DATA_DIR: tempDataDir(),
      NODE_OPTIONS: `--import=${STRAY}`,
      STRAY_REJECTION_ON_SIGUSR2: '1',
    });
    gateway.child.kill('SIGUSR2');
    await gateway.waitFor('stray-rejection-marker');
    // Node's default would have ended the process at the rejection: the gateway answers after it.
    const res = await request(`${gateway.url}/healthz`);
    expect(res.statusCode, await res.body.text()).toBe(200);
    expect(gateway.child.exitCode).toBeNull();
    const lines = gateway
      .output()
      .split('\n')
      .filter((l) => l.includes('stray-rejection-marker'));
    expect(lines, gateway.output()).toHaveLength(1);
    const line = JSON.parse(lines[0]!) as { level: number; err: { message: string; token: unknown } };
    expect(line.level).toBe(50);
    expect(line.err.message).toBe('stray-rejection-marker secret-internal-detail');
    expect(line.err.token).toBe('[redacted]');
    expect(gateway.output()).not.toContain('stray-token-value');
  });
});
