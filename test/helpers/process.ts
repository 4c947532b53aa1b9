import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterEach } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** `node --import tsx src/main.ts` on port 0 of 127.0.0.1, logging at info, with `env` over those defaults. */
function spawnMain(env: Record<string, string>) {
  return spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      // As startTestGateway: a new database each, whose WAL written ahead would only make the suite slower.
      SQLITE_WAL_PREALLOCATE: 'false',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

export interface GatewayProcess {
  child: ChildProcess;
  url: string;
  /** Its start-up log line (JSON). */
  line: string;
  /** Everything it wrote to stdout and stderr. */
  output(): string;
  /** Resolves once its output contains `text` (at once if it already does). */
  waitFor(text: string): Promise<void>;
}

/**
 * For a test file that runs gateways as child processes (to kill them with SIGKILL): returns a `start(env)`
 * that spawns `node --import tsx src/main.ts` on port 0 and resolves with its URL from the start-up line (or from
 * the first JSON line with a `url` that contains `until`).
 * Children still running after a test are killed. Call it at the top level of the file.
 */
export function gatewayProcesses(): (
  env: Record<string, string>,
  options?: { until?: string },
) => Promise<GatewayProcess> {
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  });
  return async (env, options = {}) => {
    const until = options.until ?? 'gateway ready';
    const child = spawnMain(env);
    children.push(child);
    let out = '';
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    const line = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`gateway did not start:\n${out}`)), 50_000);
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        for (const line of out.split('\n')) {
          if (!line.includes(until)) continue;
          clearTimeout(timer);
          resolve(line);
        }
      });
      child.once('exit', (code, signal) =>
        reject(new Error(`gateway exited (${code ?? signal}) before it was ready:\n${out}`)),
      );
    });
    const waitFor = (text: string) =>
      new Promise<void>((resolve) => {
        if (out.includes(text)) return resolve();
        const check = () => {
          if (!out.includes(text)) return;
          child.stdout!.off('data', check);
          child.stderr!.off('data', check);
          resolve();
        };
        child.stdout!.on('data', check);
        child.stderr!.on('data', check);
      });
    return { child, url: (JSON.parse(line) as { url: string }).url, line, output: () => out, waitFor };
  };
}

/**
 * Runs `node --import tsx src/main.ts` until its start-up line (then SIGTERM) or its exit, for a test of what start-up
 * says or refuses: everything it wrote, and its exit code.
 */
export function runMainUntilReady(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const child = spawnMain(env);
  let output = '';
  const read = (d: Buffer) => {
    output += d.toString();
    if (output.includes('gateway ready')) child.kill('SIGTERM');
  };
  child.stdout.on('data', read);
  child.stderr.on('data', read);
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, output })));
}
