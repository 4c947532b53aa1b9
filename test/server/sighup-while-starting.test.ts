// A SIGHUP reads the configuration files again (docs/operations.md, Reloading the configuration), also one that comes
// while the gateway still waits for PostgreSQL: it must not end the process, and the files changed meanwhile are read
// once the gateway has started.
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { freePort, startEmbeddedPostgres } from '../../scripts/embedded-postgres.js';
import { gatewayProcesses, type GatewayProcess } from '../helpers/process.js';

const digest = (key: string) => createHash('sha256').update(key).digest('hex');
const appsFile = (keys: string[]) =>
  [
    'apps:',
    '  - name: reader',
    '    scopes: [cloud:read]',
    '    keys:',
    ...keys.map((k) => `      - sha256: ${digest(k)}`),
  ]
    .map((l) => `${l}\n`)
    .join('');

/** Resolves once the output holds `text`; rejects, with what it wrote, if the process ends first. */
const seen = (gw: GatewayProcess, text: string): Promise<void> =>
  new Promise<void>((resolve, reject) => {
    const ended = (code: number | null, signal: NodeJS.Signals | null) =>
      reject(new Error(`the gateway ended (${code ?? signal}) before it logged "${text}":\n${gw.output()}`));
    if (gw.child.exitCode !== null || gw.child.signalCode !== null)
      return ended(gw.child.exitCode, gw.child.signalCode);
    gw.child.once('exit', ended);
    void gw.waitFor(text).then(() => {
      gw.child.off('exit', ended);
      resolve();
    });
  });

const typename = async (url: string, key: string) => {
  const res = await request(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: '{"query":"{ __typename }"}',
  });
  await res.body.dump();
  return res.statusCode;
};

describe('SIGHUP while the gateway starts', () => {
  const start = gatewayProcesses();

  it('a SIGHUP while the gateway waits for PostgreSQL does not end it, and the files are read again once it serves', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sighup-while-starting-'));
    const file = path.join(dir, 'apps.yaml');
    const oldKey = `old-${randomBytes(16).toString('hex')}`;
    const newKey = `new-${randomBytes(16).toString('hex')}`;
    fs.writeFileSync(file, appsFile([oldKey]));
    const port = await freePort();
    const password = randomBytes(12).toString('hex');
    const gw = await start(
      {
        DATABASE_URL: `postgresql://postgres:${password}@127.0.0.1:${port}/postgres`,
        TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
        GATEWAY_APPS_FILE: file,
        LOG_FORMAT: 'json',
      },
      { until: 'listening: not ready' },
    );
    let server: Awaited<ReturnType<typeof startEmbeddedPostgres>> | undefined;
    try {
      await seen(gw, 'PostgreSQL is not reachable: waiting for it, retrying with backoff');
      // The operator rolls a new key out while this replica still waits, and reloads it as every other one.
      fs.writeFileSync(file, appsFile([oldKey, newKey]));
      gw.child.kill('SIGHUP');
      server = await startEmbeddedPostgres({ port, password });
      await seen(gw, 'gateway ready');
      await seen(gw, 'configuration reloaded');
      const reloaded = gw
        .output()
        .split('\n')
        .find((l) => l.includes('configuration reloaded'))!;
      expect(JSON.parse(reloaded)).toMatchObject({ trigger: 'SIGHUP', files: [file] });
      expect(await typename(gw.url, newKey)).toBe(200);
      expect(await typename(gw.url, oldKey)).toBe(200);
      expect(gw.child.exitCode).toBeNull();
    } finally {
      gw.child.kill('SIGKILL');
      await server?.stop();
    }
  }, 120_000);
});
