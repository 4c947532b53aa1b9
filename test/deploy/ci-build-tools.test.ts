// CI compiles better-sqlite3 from source (its prebuilt binaries come from GitHub, out of reach): a fresh machine must
// get python3, make and g++ and this Node's headers before `npm ci`, or be told what is missing, not fail in node-gyp.
// Runs .ci/build-tools in a child bash whose PATH holds only the programs a test gives it.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'ci-build-tools-'));
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

/** A folder of programs: the ones named, found on this PATH, and `id` answering `uid` for `id -u`. */
function binWith(name: string, programs: string[], uid: number): string {
  const bin = path.join(work, name);
  fs.mkdirSync(bin);
  for (const program of programs) {
    const found = (process.env['PATH'] ?? '')
      .split(path.delimiter)
      .map((dir) => path.join(dir, program))
      .find((file) => fs.existsSync(file));
    if (found) fs.symlinkSync(found, path.join(bin, program));
  }
  fs.writeFileSync(path.join(bin, 'id'), `#!/bin/sh\necho ${uid}\n`, { mode: 0o755 });
  return bin;
}

function sourceBuildTools(bin: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const empty = path.join(work, 'empty-npmrc');
  fs.writeFileSync(empty, '');
  const env: Record<string, string> = {
    PATH: bin,
    HOME: work,
    // No npmrc names a nodedir: the machine's own settings are not what is tested.
    NPM_CONFIG_USERCONFIG: empty,
    NPM_CONFIG_GLOBALCONFIG: empty,
  };
  const script = 'source .ci/build-tools; echo "nodedir=${npm_config_nodedir:-}"';
  return new Promise((resolve) => {
    execFile('/bin/bash', ['-c', script], { cwd: ROOT, env }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, stdout, stderr });
    });
  });
}

const BASICS = ['node', 'npm', 'dirname', 'cat'];

describe('CI on a fresh machine: the tools better-sqlite3 compiles with', () => {
  it('.ci/run checks them before its first npm ci', () => {
    const run = fs.readFileSync(path.join(ROOT, '.ci/run'), 'utf8');
    const sourced = run.search(/^source \.ci\/build-tools$/m);
    expect(sourced, '.ci/run sources .ci/build-tools').toBeGreaterThan(-1);
    expect(sourced).toBeLessThan(run.indexOf('npm ci'));
  });

  it('stops, naming what is missing and how to install it, when a user who cannot install lacks g++', async () => {
    const run = await sourceBuildTools(binWith('no-gxx', [...BASICS, 'python3', 'make'], 1000));
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('g++ missing');
    expect(run.stderr).toContain("apt-get install python3 make g++");
    expect(run.stdout).not.toContain('nodedir=');
  }, 60_000);

  it("with the tools there, points node-gyp at this Node's own headers instead of nodejs.org", async () => {
    const prefix = path.dirname(path.dirname(fs.realpathSync(process.execPath)));
    const run = await sourceBuildTools(binWith('all', [...BASICS, 'python3', 'make', 'g++'], 1000));
    if (!fs.existsSync(path.join(prefix, 'include/node/node.h'))) {
      expect(run.code).toBe(1);
      expect(run.stderr).toContain('npm_config_nodedir is unset');
      return;
    }
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`nodedir=${prefix}\n`);
  }, 60_000);
});
