import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import * as prettier from 'prettier';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '..');
const CODE = ['src', 'test', 'bench', 'scripts', 'bin'].filter((dir) => fs.existsSync(path.join(root, dir)));

describe('formatting (prettier, config in .prettierrc.json)', () => {
  it('every TypeScript and JavaScript file of the repository is formatted, imports sorted', async () => {
    const prettierBin = path.join(root, 'node_modules', 'prettier', 'bin', 'prettier.cjs');
    const run = await promisify(execFile)(process.execPath, [prettierBin, '--list-different', ...CODE, '*.ts'], {
      cwd: root,
    }).then(
      ({ stdout }) => ({ code: 0, files: stdout }),
      (err: { code?: number; stdout?: string; stderr?: string }) => ({
        code: err.code ?? -1,
        files: `${err.stdout ?? ''}${err.stderr ?? ''}`,
      }),
    );
    // The files listed are those `npx prettier --write .` would change.
    expect(run.files.trim()).toBe('');
    expect(run.code).toBe(0);
    // Every file of the repository, on one core: ~30 s on a quiet machine, four times that beside a loaded suite.
  }, 300_000);

  it('the check can fail: a line past 120 characters and unsorted imports are not formatted', async () => {
    const options = {
      ...(await prettier.resolveConfig(path.join(root, 'src', 'main.ts'))),
      filepath: path.join(root, 'src', 'x.ts'),
    };
    const long = `export const x = [${Array.from({ length: 40 }, (_, i) => `'v${i}'`).join(', ')}];\n`;
    expect(await prettier.check(long, options)).toBe(false);
    const unsorted = "import { b } from './b.js';\nimport fs from 'node:fs';\n\nexport const y = [fs, b];\n";
    expect(await prettier.check(unsorted, options)).toBe(false);
    expect(await prettier.check(await prettier.format(unsorted, options), options)).toBe(true);
  });
});
