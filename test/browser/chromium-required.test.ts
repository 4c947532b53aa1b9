// CI must never pass without the browser test: with CI set, a missing Chromium fails the browser suite; on a
// developer's machine it is skipped with a message saying how to install it. Runs the real browser test file
// in a child vitest with CHROMIUM_PATH pointing at nothing.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

interface Run {
  code: number;
  output: string;
}

function runBrowserSuite(extraEnv: Record<string, string>): Promise<Run> {
  // The child is a fresh vitest run, not a worker of this one.
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith('VITEST') && name !== 'CI'),
  );
  const args = [path.join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', 'test/browser/graphiql.test.ts'];
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      args,
      { cwd: ROOT, env: { ...env, NO_COLOR: '1', CHROMIUM_PATH: path.join(ROOT, 'no-such-chromium'), ...extraEnv } },
      (err, stdout, stderr) => {
        resolve({
          code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1,
          output: `${stdout}\n${stderr}`,
        });
      },
    );
  });
}

describe('the browser suite when Chromium is missing', () => {
  it('fails with CI set, saying how to install Chromium', async () => {
    const run = await runBrowserSuite({ CI: 'true' });
    expect(run.output).toContain('Cannot run the GraphiQL browser test');
    expect(run.output).toContain('apt-get install chromium');
    expect(run.output).toMatch(/Test Files\s+1 failed/);
    expect(run.output).not.toMatch(/skipped/);
    expect(run.code).not.toBe(0);
  }, 120_000);

  it('is skipped with a message on a developer machine (CI unset)', async () => {
    const run = await runBrowserSuite({});
    expect(run.output).toContain('Skipping the GraphiQL browser test');
    expect(run.output).toContain('apt-get install chromium');
    expect(run.output).toMatch(/Test Files\s+1 skipped/);
    expect(run.code).toBe(0);
  }, 120_000);
});
