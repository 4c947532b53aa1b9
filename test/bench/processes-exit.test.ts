// What a benchmark starts (bench/lib/processes.ts `spawnNode`) ends with it: a script that throws, one that calls
// `process.exit` without stopping its processes, and one that `timeout` ends with SIGTERM all leave nothing running.
// A gateway left behind, pinned to the server core, took a share of that core from every later run of the night.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const PROCESSES = pathToFileURL(path.resolve(import.meta.dirname, '../../bench/lib/processes.ts')).href;

/** Dead: gone from /proc, or a zombie nobody has reaped yet. */
function dead(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

/**
 * A script that starts one process through `spawnNode` (a plain node script that says READY and waits), prints its
 * pid, then ends as `how` says. Resolves with that pid once the script has ended.
 */
async function leftBehind(how: 'throw' | 'exit' | 'sigterm'): Promise<number> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'processes-exit-'));
  const waiter = path.join(dir, 'waiter.js');
  fs.writeFileSync(waiter, "console.log('READY {}'); setInterval(() => {}, 1000);\n");
  const script = `
    const { spawnNode } = await import(${JSON.stringify(PROCESSES)});
    const p = await spawnNode('waiter', { script: ${JSON.stringify(waiter)}, cpus: null, readiness: { line: true } });
    console.log('PID ' + p.pid);
    if (${JSON.stringify(how)} === 'throw') throw new Error('planted');
    if (${JSON.stringify(how)} === 'exit') process.exit(0);
    setInterval(() => {}, 1000);
  `;
  const parent = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = once(parent, 'exit');
  let out = '';
  const pid = await new Promise<number>((resolve, reject) => {
    parent.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /PID (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    void exited.then(() => reject(new Error(`the script ended before its process started: ${out}`)));
  });
  // The pid is printed once the process said READY: it ran. A script that waits for the signal is seen to keep it.
  if (how === 'sigterm') {
    expect(dead(pid)).toBe(false);
    parent.kill('SIGTERM');
  }
  await exited;
  fs.rmSync(dir, { recursive: true, force: true });
  return pid;
}

/** Waits until `pid` is dead; the test's own time limit ends a wait for one that never dies. */
async function ended(pid: number): Promise<boolean> {
  while (!dead(pid)) await new Promise((resolve) => setTimeout(resolve, 5));
  return true;
}

describe("a benchmark's processes end with it", () => {
  it.each(['throw', 'exit', 'sigterm'] as const)('when the script ends by %s', async (how) => {
    const pid = await leftBehind(how);
    try {
      expect(await ended(pid)).toBe(true);
    } finally {
      if (!dead(pid)) process.kill(pid, 'SIGKILL');
    }
  });
});
