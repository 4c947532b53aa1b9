// CI must never pass without rendering deploy/kubernetes: with CI set, a missing kubectl fails the Kubernetes suite;
// on a developer's machine it is skipped with a message saying how to install it (as the browser suite does without
// Chromium). Runs the real test file in a child vitest with KUBECTL_PATH pointing at nothing.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { KUBECTL_PACKAGE } from '../helpers/kubectl.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

interface Run {
  code: number;
  output: string;
}

function runKubernetesSuite(extraEnv: Record<string, string>): Promise<Run> {
  // The child is a fresh vitest run, not a worker of this one.
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('VITEST') && name !== 'CI'));
  const args = [path.join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', 'test/deploy/kubernetes.test.ts'];
  return new Promise((resolve) => {
    execFile(process.execPath, args, { cwd: ROOT, env: { ...env, NO_COLOR: '1', KUBECTL_PATH: path.join(ROOT, 'no-such-kubectl'), ...extraEnv } }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, output: `${stdout}\n${stderr}` });
    });
  });
}

describe('the Kubernetes suite when kubectl is missing', () => {
  it('fails with CI set, saying how to install kubectl', async () => {
    const run = await runKubernetesSuite({ CI: 'true' });
    expect(run.output).toContain('Cannot run the Kubernetes deployment test');
    expect(run.output).toContain(`apt-get install ${KUBECTL_PACKAGE}`);
    expect(run.output).toMatch(/Test Files\s+1 failed/);
    expect(run.output).not.toMatch(/skipped/);
    expect(run.code).not.toBe(0);
  }, 120_000);

  it('is skipped with a message on a developer machine (CI unset)', async () => {
    const run = await runKubernetesSuite({});
    expect(run.output).toContain('Skipping the Kubernetes deployment test');
    expect(run.output).toContain(`apt-get install ${KUBECTL_PACKAGE}`);
    expect(run.output).toMatch(/Test Files\s+1 skipped/);
    expect(run.code).toBe(0);
  }, 120_000);
});

describe('.ci/run and kubectl', () => {
  it('installs the Debian package that the failure message names, when no kubectl is on PATH', () => {
    const run = readFileSync(path.join(ROOT, '.ci/run'), 'utf8');
    expect(run).toMatch(new RegExp(`apt-get install -y -qq ${KUBECTL_PACKAGE} `));
    expect(run).toContain('command -v kubectl');
  });
});
