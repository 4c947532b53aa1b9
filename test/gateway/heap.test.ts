import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);

/**
 * A process that applies the gateway's heap settings as main.ts does, then makes a million objects from two
 * allocation sites and keeps them, under --trace-pretenuring-statistics: the lines V8 printed from then on about the
 * feedback it weighs at each scavenge to decide whether a site's objects are made straight in the old generation.
 */
async function pretenuringFeedback(pretenuring: boolean): Promise<string[]> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'heap-settings-'));
  const script = path.join(dir, 'allocate.ts');
  const heap = path.resolve('src/gateway/heap.ts');
  fs.writeFileSync(
    script,
    `import { applyHeapSettings } from ${JSON.stringify(heap)};
applyHeapSettings({ v8AllocationSitePretenuring: ${pretenuring} });
process.stdout.write('applied\\n');
const kept: Array<{ a: number; b: number[] }> = [];
const make = (i: number) => ({ a: i, b: [i, i + 1] });
for (let round = 0; round < 50; round++) for (let i = 0; i < 20_000; i++) kept.push(make(i));
process.stdout.write(\`kept \${kept.length}\\n\`);
`,
  );
  try {
    const { stdout } = await run(process.execPath, ['--trace-pretenuring-statistics', '--import', 'tsx', script], {
      maxBuffer: 64 * 1024 * 1024,
    });
    const lines = stdout.split('\n');
    const applied = lines.indexOf('applied');
    expect(applied).toBeGreaterThanOrEqual(0);
    expect(lines).toContain('kept 1000000');
    return lines.slice(applied).filter((line) => line.includes('pretenuring:'));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe('the heap settings applied at start (docs/decisions/116)', () => {
  it('turn V8 allocation-site pretenuring off by default: V8 weighs no site for it once they are applied', async () => {
    expect(await pretenuringFeedback(false)).toEqual([]);
  }, 60_000);

  it('leave V8 its own pretenuring with V8_ALLOCATION_SITE_PRETENURING=true: the same objects are weighed', async () => {
    expect((await pretenuringFeedback(true)).length).toBeGreaterThan(0);
  }, 60_000);
});
