import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { startTestGateway, tempDataDir } from '../helpers/gateway.js';
import { gatewayProcesses } from '../helpers/process.js';

const spawnGateway = gatewayProcesses();
const RECORDER = path.resolve(import.meta.dirname, '../helpers/graphql-mode.mjs');

/** Starts `src/main.ts` with `env` (NODE_ENV unset unless given), stops it, and reads the mode it ran graphql-js in. */
async function modeOf(env: Record<string, string>): Promise<{ nodeEnv: string | null; graphql: string }> {
  const log = path.join(tempDataDir('graphql-mode-'), 'mode.json');
  const gateway = await spawnGateway({
    DATA_DIR: tempDataDir(),
    NODE_OPTIONS: `--import=${RECORDER}`,
    GRAPHQL_MODE_LOG: log,
    ...env,
  });
  const exited = new Promise((resolve) => gateway.child.once('exit', resolve));
  gateway.child.kill('SIGTERM');
  await exited;
  return JSON.parse(fs.readFileSync(log, 'utf8')) as { nodeEnv: string | null; graphql: string };
}

describe('NODE_ENV (src/config/node-env.ts)', () => {
  it('is production when unset, before graphql-js is loaded: its type tests skip the development check', async () => {
    expect(await modeOf({})).toEqual({ nodeEnv: 'production', graphql: 'production' });
  });

  it('is left as it is when set', async () => {
    expect(await modeOf({ NODE_ENV: 'development' })).toEqual({ nodeEnv: 'development', graphql: 'development' });
  });

  it('is imported by src/main.ts before any other module', () => {
    const main = fs.readFileSync(path.resolve(import.meta.dirname, '../../src/main.ts'), 'utf8');
    const imports = [...main.matchAll(/^import\s[^;]*?['"]([^'"]+)['"];/gms)].map((m) => m[1]);
    expect(imports[0]).toBe('./config/node-env.js');
  });
});

describe("Apollo Server's termination signals", () => {
  it('adds no SIGTERM or SIGINT handler in production: the gateway drains on its own', async () => {
    const was = process.env.NODE_ENV;
    const before = { term: process.listenerCount('SIGTERM'), int: process.listenerCount('SIGINT') };
    // Apollo reads NODE_ENV when it is made; under `test` (the suite's) it adds no handler whatever its options say.
    process.env.NODE_ENV = 'production';
    let gw;
    try {
      gw = await startTestGateway();
    } finally {
      process.env.NODE_ENV = was;
    }
    try {
      expect({ term: process.listenerCount('SIGTERM'), int: process.listenerCount('SIGINT') }).toEqual(before);
    } finally {
      await gw.close();
    }
  });
});
