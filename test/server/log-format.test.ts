import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

import { createLogger, formatPrettyLine, resolveLogFormat } from '../../src/logger.js';
import { tempDataDir } from '../helpers/gateway.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const running: { pid: number; dataDir: string }[] = [];
// Under `script` the gateway runs in a session of its own, and the hang-up of its terminal when `script` dies is a
// SIGHUP, which the gateway takes as a reload: every process started with a test's DATA_DIR is killed by that mark.
afterEach(() => {
  for (const { pid, dataDir } of running.splice(0)) {
    const marked = fs.readdirSync('/proc').filter((p) => {
      if (!/^\d+$/.test(p)) return false;
      try {
        return fs.readFileSync(`/proc/${p}/environ`, 'utf8').split('\0').includes(`DATA_DIR=${dataDir}`);
      } catch {
        return false;
      }
    });
    for (const p of [pid, ...marked.map(Number)]) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
});

/**
 * Runs the gateway as a person would, and resolves with everything it printed up to and including the line after
 * `gateway ready` (the open-API warning). With `tty`, stdout is a pseudo-terminal made by util-linux `script`.
 */
function startAndRead(env: Record<string, string>, tty: boolean): Promise<string> {
  const gateway = [process.execPath, '--import', 'tsx', 'src/main.ts'];
  const [cmd, args] = tty
    ? ['script', ['-qfec', gateway.map((a) => `'${a}'`).join(' '), '/dev/null']]
    : [gateway[0]!, gateway.slice(1)];
  const dataDir = tempDataDir();
  const child = spawn(cmd as string, args as string[], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.push({ pid: child.pid!, dataDir });
  let out = '';
  return new Promise((resolve, reject) => {
    const onData = (d: Buffer) => {
      out += d.toString();
      if (/the API is open/.test(out)) resolve(out);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => reject(new Error(`gateway exited (${code}) before it was ready:\n${out}`)));
  });
}

describe('log format', () => {
  it('writes for a person at a terminal and JSON everywhere else, unless LOG_FORMAT says otherwise', () => {
    expect(resolveLogFormat('auto', true)).toBe('pretty');
    expect(resolveLogFormat('auto', false)).toBe('json');
    expect(resolveLogFormat('json', true)).toBe('json');
    expect(resolveLogFormat('pretty', false)).toBe('pretty');
  });

  it('prints the start-up line as readable lines, one part each, when stdout is a terminal', async () => {
    if (!fs.existsSync('/usr/bin/script'))
      throw new Error('util-linux `script` is needed to give the gateway a terminal');
    // eslint-disable-next-line no-control-regex
    const out = (await startAndRead({}, true)).replace(/\x1b\[[0-9;]*m/g, '');
    const lines = out.split(/\r?\n/);
    const ready = lines.findIndex((l) => / INFO  gateway ready: GraphiQL http:\/\/127\.0\.0\.1:\d+\/graphql/.test(l));
    expect(ready, out).toBeGreaterThanOrEqual(0);
    expect(lines[ready + 1]).toMatch(/^ +upstreams cloud=sandbox /);
    expect(out).toMatch(/^\d\d:\d\d:\d\d .*WARN.* the API is open/m);
    expect(out).not.toContain('{"level"');
  });

  it('keeps one JSON object per line when stdout is not a terminal', async () => {
    const out = await startAndRead({}, false);
    const ready = out.split('\n').find((l) => l.includes('gateway ready'))!;
    expect(JSON.parse(ready)).toMatchObject({ level: 30, msg: expect.stringMatching(/^gateway ready: /) });
  });

  it('keeps JSON at a terminal with LOG_FORMAT=json', async () => {
    const out = await startAndRead({ LOG_FORMAT: 'json' }, true);
    const ready = out.split(/\r?\n/).find((l) => l.includes('gateway ready'))!;
    expect(JSON.parse(ready)).toMatchObject({ level: 30 });
  });

  it('redacts secrets in readable lines as in JSON ones, and shows an error with its stack', () => {
    const lines: string[] = [];
    const logger = createLogger({
      format: 'pretty',
      destination: { write: (l: string) => void lines.push(formatPrettyLine(l.trimEnd())) },
    });
    logger.error({ token: 'secret-token-value', err: new Error('upstream refused') }, 'token exchange failed');
    const text = lines.join('');
    expect(text).toMatch(/^\d\d:\d\d:\d\d ERROR token exchange failed  token=\[redacted\]\n/);
    expect(text).toContain('    Error: upstream refused\n');
    expect(text).not.toContain('secret-token-value');
  });

  it('passes a line that is not JSON through unchanged', () => {
    expect(formatPrettyLine('plain text')).toBe('plain text\n');
  });
});
