// The line logged right before the process exits (`shutdown complete`) is written. pino's destination writes on
// libuv's pool, and a bare `process.exit` dropped a write still waiting there: under load the shutdown's last line was
// lost now and then (a full test run saw it). Here the write waits on purpose (the pool's one thread held in the open
// of a FIFO), so the exit must wait for it, not for luck. (A bare `process.exit` in this case does not lose the line
// but hangs, joining the held thread, so it cannot serve as this test's control.)
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const CHILD = path.resolve(import.meta.dirname, 'helpers/exit-with-pool-busy.mjs');
const LOGGER = path.resolve(import.meta.dirname, '../src/logger.ts');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exit-after-logs-'));

function run(exitWith: 'exitAfterLogs' | 'process.exit'): { status: number | null; lines: string[] } {
  const fifo = path.join(dir, `${exitWith}.fifo`);
  execFileSync('mkfifo', [fifo]);
  const child = spawnSync(process.execPath, ['--import', 'tsx', CHILD], {
    env: { ...process.env, UV_THREADPOOL_SIZE: '1', FIFO: fifo, EXIT_WITH: exitWith, LOGGER_MODULE: LOGGER },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: child.status, lines: child.stdout.split('\n').filter((l) => l.startsWith('{')) };
}

describe('the last line before the exit', () => {
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('is written by exitAfterLogs while the write waits on a busy pool', () => {
    const { status, lines } = run('exitAfterLogs');
    expect(status).toBe(0);
    expect(lines.map((l) => (JSON.parse(l) as { msg: string }).msg)).toEqual(['the last line before the exit']);
  });
});
