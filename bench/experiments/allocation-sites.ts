/**
 * Reads a sampling heap profile (`.heapprofile`: mix-cpu.ts `--alloc-prof`, or DevTools) and says where the bytes were
 * allocated: by the allocating function (self), by each function on the stacks (inclusive), and by the gateway's source
 * file nearest the allocation. With a notification count, the sizes are per notification. V8 samples about every
 * `samplingInterval` bytes allocated, so the sizes are estimates, good to a few per cent over a window of megabytes.
 *
 *   npx tsx bench/experiments/allocation-sites.ts FILE.heapprofile [--per N] [--top 40]
 */
import fs from 'node:fs';
import { parseArgs } from 'node:util';

interface Frame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface HeapNode {
  callFrame: Frame;
  selfSize: number;
  id: number;
  children: HeapNode[];
}

const { values: cli, positionals } = parseArgs({
  allowPositionals: true,
  options: { per: { type: 'string', default: '1' }, top: { type: 'string', default: '40' } },
});
const file = positionals[0];
if (!file) {
  process.stderr.write('usage: tsx bench/experiments/allocation-sites.ts FILE.heapprofile [--per N] [--top 40]\n');
  process.exit(2);
}
const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as { head: HeapNode };
const per = Number(cli.per);
const top = Number(cli.top);

const name = (f: Frame) =>
  `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/dist\//, '')}:${f.lineNumber + 1}`;
const own = (f: Frame) => /\/dist\/src\//.test(f.url) || /\/src\/.*\.ts$/.test(f.url);

const self = new Map<string, number>();
const inclusive = new Map<string, number>();
const byFile = new Map<string, number>();
let total = 0;
const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v);

function walk(node: HeapNode, stack: Frame[]): void {
  const here = [...stack, node.callFrame];
  if (node.selfSize > 0) {
    total += node.selfSize;
    add(self, name(node.callFrame), node.selfSize);
    for (const k of new Set(here.map(name))) add(inclusive, k, node.selfSize);
    const nearest = [...here].reverse().find(own);
    add(byFile, nearest ? nearest.url.replace(/^.*\/dist\//, '') : '(no gateway frame)', node.selfSize);
  }
  for (const c of node.children) walk(c, here);
}
walk(profile.head, []);

const kb = (b: number) => (b / per / 1024).toFixed(2).padStart(8);
const table = (title: string, m: Map<string, number>) => {
  console.log(`\n${title}`);
  for (const [k, v] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${kb(v)} KiB  ${k}`);
};
console.log(`${kb(total)} KiB allocated${per === 1 ? '' : ` per notification (÷ ${per})`}`);
table('by the gateway file nearest the allocation', byFile);
table('by allocating function (self)', self);
table('by function on the stack (inclusive)', inclusive);
