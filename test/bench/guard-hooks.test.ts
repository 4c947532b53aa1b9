// The guard's planted slowdown (bench/lib/guard-hooks.ts) must spend the CPU a request asks for, or its test flags
// a tree that costs far more than 5 % more and proves nothing about 5 %. A server with the hook loaded answers
// requests that ask for 3 ms each, and requests that ask for nothing; the difference of its CPU is the plant's.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const HOOKS = pathToFileURL(path.resolve(import.meta.dirname, '../../bench/lib/guard-hooks.ts')).href;
const SERVER = `
const http = require('node:http');
const server = http.createServer((req, res) => {
  const used = process.cpuUsage();
  res.end(req.url === '/cpu' ? String(used.user + used.system) : '');
});
server.listen(0, '127.0.0.1', () => console.log('PORT ' + server.address().port));
`;

let child: ChildProcess | undefined;
afterEach(() => {
  child?.kill('SIGKILL');
  child = undefined;
});

async function start(): Promise<string> {
  child = spawn(process.execPath, ['--import', 'tsx', '--import', HOOKS, '-e', SERVER], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<string>((resolve, reject) => {
    let out = '';
    child!.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /PORT (\d+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child!.once('exit', (code) => reject(new Error(`the server exited (${code}) before listening`)));
  });
  return `http://127.0.0.1:${port}`;
}

/** The server's CPU in µs, as it reads its own (every thread). */
async function cpu(origin: string): Promise<number> {
  return Number(await (await fetch(`${origin}/cpu`)).text());
}

async function requests(origin: string, count: number, headers: Record<string, string>): Promise<void> {
  for (let i = 0; i < count; i++) await (await fetch(origin, { headers })).text();
}

describe('the guard’s planted slowdown', () => {
  it('spends the CPU each request asks for, within a fifth', async () => {
    const origin = await start();
    await requests(origin, 20, {}); // the server's first requests warm it up
    await requests(origin, 1, { 'x-guard-calibrate': '1' });
    const COUNT = 20;
    const BURN_US = 3000;
    // Five batches, and the median of what each planted: a moment the host takes the core from the server is
    // counted as its CPU (this machine reports no steal time), and it can fall in one batch, not in most.
    const shares: number[] = [];
    for (let batch = 0; batch < 5; batch++) {
      const t0 = await cpu(origin);
      await requests(origin, COUNT, { 'x-guard-burn-us': String(BURN_US) });
      const t1 = await cpu(origin);
      await requests(origin, COUNT, {});
      const t2 = await cpu(origin);
      shares.push((t1 - t0 - (t2 - t1)) / (COUNT * BURN_US));
    }
    const share = shares.sort((a, b) => a - b)[2]!;
    expect(share, shares.join(' ')).toBeGreaterThan(0.8);
    expect(share, shares.join(' ')).toBeLessThan(1.2);
  });
});
