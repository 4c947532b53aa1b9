// SIGHUP reloads the configuration files of a running gateway process (docs/decisions/057): a real signal sent to a
// real child process (`node src/main.ts`), which keeps running and answers with the files as read then.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { tempDataDir } from '../helpers/gateway.js';
import { gatewayProcesses, type GatewayProcess } from '../helpers/process.js';

const OLD_KEY = 'shop-key-old-0123456789abcdef';
const NEW_KEY = 'shop-key-new-0123456789abcdef';
const digest = (key: string) => createHash('sha256').update(key).digest('hex');
const appsFile = (key: string) =>
  `apps:\n  - name: shop\n    scopes: [cloud:read]\n    keys:\n      - sha256: ${digest(key)}\n`;

const start = gatewayProcesses();

async function status(gw: GatewayProcess, key: string): Promise<number> {
  const res = await request(`${gw.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ query: '{ __typename }' }),
  });
  await res.body.dump();
  return res.statusCode;
}

/** Sends SIGHUP and resolves once the process has logged `text` (each test's process logs it once). */
async function hangUp(gw: GatewayProcess, text: string): Promise<void> {
  expect(gw.output()).not.toContain(text);
  const exited = new Promise<never>((_, reject) =>
    gw.child.once('exit', (code, signal) =>
      reject(new Error(`the gateway ended (${code ?? signal}) on SIGHUP:\n${gw.output()}`)),
    ),
  );
  gw.child.kill('SIGHUP');
  await Promise.race([gw.waitFor(text), exited]);
}

describe('SIGHUP', () => {
  it('a key digest rotated in the apps file and SIGHUP: the old key is refused and the new one admitted, and the process keeps running', async () => {
    const dir = tempDataDir('sighup-');
    const file = path.join(dir, 'apps.yaml');
    fs.writeFileSync(file, appsFile(OLD_KEY));
    const gw = await start({ DATA_DIR: dir, GATEWAY_APPS_FILE: file });
    expect(await status(gw, OLD_KEY)).toBe(200);
    expect(await status(gw, NEW_KEY)).toBe(401);

    fs.writeFileSync(file, appsFile(NEW_KEY));
    await hangUp(gw, 'configuration reloaded');
    expect(gw.child.exitCode).toBeNull();
    expect(await status(gw, OLD_KEY)).toBe(401);
    expect(await status(gw, NEW_KEY)).toBe(200);
  }, 60_000);

  it('a broken apps file and SIGHUP change nothing: the refusal is logged with the file and line, and counted', async () => {
    const dir = tempDataDir('sighup-');
    const file = path.join(dir, 'apps.yaml');
    fs.writeFileSync(file, appsFile(OLD_KEY));
    const gw = await start({ DATA_DIR: dir, GATEWAY_APPS_FILE: file });

    fs.writeFileSync(
      file,
      `apps:\n  - name: shop\n    scopes: [cloud:read]\n    keys:\n      - sha256: not-a-digest\n`,
    );
    await hangUp(gw, 'configuration reload refused');
    const line = gw
      .output()
      .split('\n')
      .find((l) => l.includes('configuration reload refused'))!;
    expect(JSON.parse(line)).toMatchObject({ trigger: 'SIGHUP', variable: 'GATEWAY_APPS_FILE', file, line: 5 });
    expect(line).not.toContain(OLD_KEY);
    expect(gw.child.exitCode).toBeNull();
    expect(await status(gw, OLD_KEY)).toBe(200);
    const metrics = await (await request(`${gw.url}/metrics`)).body.text();
    expect(metrics).toMatch(/^gateway_config_reloads_total\{result="failed"\} 1$/m);
    expect(metrics).not.toMatch(/^gateway_config_reloads_total\{result="ok"\} [1-9]/m);
  }, 60_000);
});
