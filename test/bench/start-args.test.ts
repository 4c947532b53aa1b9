import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { startNodeArgs } from '../../bench/lib/build.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

const made: string[] = [];
afterAll(() => {
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
});

/** A folder holding only a package.json whose `start` is `start`. */
function checkoutWith(start: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'start-args-'));
  made.push(dir);
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ scripts: { start } }));
  return dir;
}

describe("the bench starts a gateway with its checkout's npm start options (bench/lib/build.ts)", () => {
  it("reads this checkout's: V8's memory reducer off (docs/decisions/146), its young generation kept (147)", () => {
    expect(startNodeArgs(ROOT)).toEqual(['--no-memory-reducer', '--min-semi-space-size=16']);
  });

  it('reads none from a checkout whose npm start names none, and what another names', () => {
    expect(startNodeArgs(checkoutWith('node dist/src/main.js'))).toEqual([]);
    expect(startNodeArgs(checkoutWith('node  --a --b=1 dist/src/main.js '))).toEqual(['--a', '--b=1']);
  });

  it('refuses a start that is not node running the build', () => {
    expect(() => startNodeArgs(checkoutWith('tsx src/main.ts'))).toThrow(/npm start is not/);
    expect(() => startNodeArgs(checkoutWith('node dist/other.js'))).toThrow(/npm start is not/);
  });
});
