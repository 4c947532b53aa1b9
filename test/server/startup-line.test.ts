import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { tempDataDir } from '../helpers/gateway.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
});

/** Starts `node --import tsx src/main.ts` on port 0 and resolves with its start-up log line. */
async function startProcess(env: Record<string, string>): Promise<{ url: string; msg: string; line: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start:\n${out}`)), 30_000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      for (const line of out.split('\n')) {
        if (!line.includes('gateway ready')) continue;
        clearTimeout(timer);
        const parsed = JSON.parse(line) as { url: string; msg: string };
        resolve({ url: parsed.url, msg: parsed.msg, line });
      }
    });
    child.once('exit', (code, signal) => reject(new Error(`gateway exited (${code ?? signal}) before it was ready:\n${out}`)));
  });
}

describe('the start-up line', () => {
  it('tells the operator the identification callback route and where to read the address, without printing a token', async () => {
    const { url, msg, line } = await startProcess({ DATA_DIR: tempDataDir() });
    expect(msg).toContain(`identification callbacks POST ${url}/webhooks/identification/<token>`);
    expect(msg).toContain('identificationCallbackUrl(workflowId:');

    const res = await request(`${url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ identificationCallbackUrl(workflowId: "wf-onboarding") }' }),
    });
    const address = ((await res.body.json()) as { data: { identificationCallbackUrl: string } }).data.identificationCallbackUrl;
    expect(address.startsWith(`${url}/webhooks/identification/`)).toBe(true);
    expect(line).not.toContain(address.split('/').at(-1)!);
  });
});
