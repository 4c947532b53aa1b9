import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config/index.js';
import { v8HeapFlags } from '../../src/config/v8-heap-flags.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

/**
 * The growing factor V8 applied at the last full collection of a process that imports src/config/v8-heap.ts first,
 * with `env`, then fills its heap a little and collects twice, as V8's own `--trace-gc-verbose` says it. Node 20's V8
 * ends the line "[HeapController] Limit: old size: … KB, new limit: … KB (factor)" with the factor applied (its
 * "factor … based on" line is the one computed before the flag overrides it); Node 26's V8 drops that suffix and
 * prints the applied factor as "[HeapController] factor 2.5 based on mu=…".
 */
async function growingFactor(env: Record<string, string>): Promise<number> {
  const script = `await import('./src/config/v8-heap.ts');
const kept = []; for (let i = 0; i < 100000; i++) kept.push({ i });
gc(); gc(); console.log(kept.length);`;
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', '--expose-gc', '--trace-gc-verbose', '--input-type=module', '-e', script],
    { cwd: ROOT, env: { ...process.env, V8_HEAP_GROWING_PERCENT: '', ...env }, maxBuffer: 64 * 2 ** 20 },
  );
  const applied = [...stdout.matchAll(/\[HeapController\] Limit: old size: .*\((\d+(?:\.\d+)?)\)$/gm)];
  const factors =
    applied.length > 0 ? applied : [...stdout.matchAll(/\[HeapController\] factor (\d+(?:\.\d+)?) based on/g)];
  expect(factors.length, stdout.slice(-4000)).toBeGreaterThan(0);
  return Number(factors.at(-1)![1]);
}

describe("V8's collector as the gateway's start sets it (src/config/v8-heap.ts)", () => {
  it('asks for a growing heap and no pretenuring by default, and for what the two variables say', () => {
    expect(v8HeapFlags({})).toEqual(['--heap-growing-percent=300', '--no-allocation-site-pretenuring']);
    expect(v8HeapFlags({ V8_HEAP_GROWING_PERCENT: '150', V8_ALLOCATION_SITE_PRETENURING: 'false' })).toEqual([
      '--heap-growing-percent=150',
      '--no-allocation-site-pretenuring',
    ]);
    // 0: V8's own factor; true: V8's pretenuring. With both, nothing is set.
    expect(v8HeapFlags({ V8_HEAP_GROWING_PERCENT: '0', V8_ALLOCATION_SITE_PRETENURING: 'true' })).toEqual([]);
    // What the configuration refuses is not applied (the start then stops on the configuration's message).
    expect(v8HeapFlags({ V8_HEAP_GROWING_PERCENT: 'lots', V8_ALLOCATION_SITE_PRETENURING: 'maybe' })).toEqual([]);
    expect(v8HeapFlags({ V8_HEAP_GROWING_PERCENT: '1001' })).toEqual(['--no-allocation-site-pretenuring']);
  });

  it('sets the factor V8 applies at its full collections (V8 reports it), or leaves V8 its own with 0', async () => {
    expect(await growingFactor({ V8_HEAP_GROWING_PERCENT: '150' })).toBe(2.5);
    expect(await growingFactor({ V8_HEAP_GROWING_PERCENT: '50' })).toBe(1.5);
    const own = await growingFactor({ V8_HEAP_GROWING_PERCENT: '0' });
    expect([1.5, 2.5]).not.toContain(own);
  });

  it('refuses, at the configuration, what is not a whole per cent from 0 to 1,000 or not a boolean', () => {
    expect(loadConfig({})).toBeTruthy();
    for (const bad of ['-1', '1001', '2.5', 'lots'])
      expect(() => loadConfig({ V8_HEAP_GROWING_PERCENT: bad })).toThrow(
        /V8_HEAP_GROWING_PERCENT: must be an integer from 0 to 1000/,
      );
    expect(() => loadConfig({ V8_ALLOCATION_SITE_PRETENURING: 'maybe' })).toThrow(/V8_ALLOCATION_SITE_PRETENURING/);
  });

  it('is imported by src/main.ts right after node-env.ts, before any library', () => {
    const main = fs.readFileSync(path.join(ROOT, 'src/main.ts'), 'utf8');
    const imports = [...main.matchAll(/^import\s[^;]*?['"]([^'"]+)['"];/gms)].map((m) => m[1]);
    expect(imports.slice(0, 2)).toEqual(['./config/node-env.js', './config/v8-heap.js']);
  });
});
