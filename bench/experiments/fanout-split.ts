/**
 * Where fan-out's main thread goes, by part (docs/decisions/111): reads the V8 CPU profiles `fanout-ab.ts --profile DIR`
 * wrote (one per measured window of A, 10,000 deliveries each at `--connections 1000 --ids 10`) and gives each
 * non-idle sample to the first part below whose code is on its stack; with a second directory, the bytes allocated
 * per delivery by function from `--heap DIR`'s sampling heap profiles. The first window of each is dropped (a warm-up).
 * V8's sampler adds its own cost to the window, so read the shares, not the µs.
 *
 *   npx tsx bench/experiments/fanout-ab.ts --connections 1000 --ids 10 --rounds 6 --profile P --heap H
 *   npx tsx bench/experiments/fanout-split.ts P [H] [--deliveries 10000]
 */
import fs from 'node:fs';
import { parseArgs } from 'node:util';

const { values: cli, positionals } = parseArgs({
  allowPositionals: true,
  options: { deliveries: { type: 'string', default: '10000' } },
});
const [profiles, heaps] = positionals;
if (!profiles) throw new Error('usage: fanout-split.ts PROFILE_DIR [HEAP_DIR] [--deliveries 10000]');
const deliveries = Number(cli.deliveries);

type Frame = { functionName: string; url: string; lineNumber: number };
type CpuNode = { id: number; callFrame: Frame; children?: number[] };
type HeapNode = { callFrame: Frame; selfSize: number; children: HeapNode[] };

/**
 * A frame's gateway source as `dir/name` without its extension, from `src/…/x.ts` (fanout-ab.ts run on the sources) or
 * `dist/src/…/x.js` (`--a-dist`, a build): the parts below name the same code either way. Undefined outside src/.
 */
const SOURCE_OF = (url: string): string | undefined => /\/src\/(.+)\.[jt]s$/.exec(url)?.[1];

/** The parts, in the order a sample is given to them (the first whose test holds for its stack, leaf first). */
const PARTS: Array<[string, (stack: Frame[]) => boolean]> = [
  ['the write system call (the binding, libuv, write(2))', (s) => s.some((f) => f.functionName === 'writeBuffer')],
  [
    "Node's stream at the tick's uncork (clearBuffer, the WriteWrap, onwrite)",
    (s) => s.some((f) => f.functionName === 'Writable.uncork'),
  ],
  ["Node's Writable.write into the corked socket", (s) => s.some((f) => f.functionName === 'Writable.write')],
  [
    "the sink's own (checks, payload lookup, the frames' buffer)",
    (s) => s.some((f) => SOURCE_OF(f.url) === 'server/ws' && ['write', 'last', 'next'].includes(f.functionName)),
  ],
  ['the result stream and the shared execution', (s) => s.some((f) => f.url.includes('/execution/'))],
  [
    "the bus's publish, the event stream's listener",
    (s) => s.some((f) => ['events/bus', 'events/stream'].includes(SOURCE_OF(f.url) ?? '')),
  ],
  [
    "the intake (HTTP, the webhook, the store; the sender's side)",
    (s) => s.some((f) => /webhooks|mobile-id|\/store\/|_http|server\/http|undici|experiments/.test(f.url)),
  ],
  ["ws.ts's uncork loop, graphql-ws, ws", (s) => s.some((f) => /server\/ws\.[jt]s|graphql-ws|\/ws\/lib/.test(f.url))],
  ['the garbage collector (main thread)', (s) => s[0]!.functionName === '(garbage collector)'],
  ['the rest (the event loop, promise settling, other)', () => true],
];

const files = (dir: string, ext: string) =>
  fs
    .readdirSync(dir)
    .filter((f) => f.endsWith(ext))
    .sort((a, b) => Number(a.match(/\d+/)?.[0]) - Number(b.match(/\d+/)?.[0]))
    .slice(1)
    .map((f) => `${dir}/${f}`);

const cpu = files(profiles, '.cpuprofile');
const byPart = new Map<string, number>();
let total = 0;
for (const file of cpu) {
  const p = JSON.parse(fs.readFileSync(file, 'utf8')) as {
    nodes: CpuNode[];
    samples: number[];
    startTime: number;
    endTime: number;
  };
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const us = (p.endTime - p.startTime) / p.samples.length;
  for (const id of p.samples) {
    const stack: Frame[] = [];
    for (let x: number | undefined = id; x !== undefined; x = parent.get(x)) stack.push(byId.get(x)!.callFrame);
    if (stack[0]!.functionName === '(idle)') continue;
    const part = PARTS.find(([, test]) => test(stack))![0];
    byPart.set(part, (byPart.get(part) ?? 0) + us);
    total += us;
  }
}
const per = (v: number, n: number) => v / n / deliveries;
console.log(
  `${cpu.length} windows: the main thread ${per(total, cpu.length).toFixed(2)} µs per delivery under the sampler`,
);
for (const [part] of PARTS) {
  const v = byPart.get(part) ?? 0;
  console.log(
    `${((100 * v) / total).toFixed(1).padStart(5)} %  ${per(v, cpu.length).toFixed(2).padStart(6)} µs  ${part}`,
  );
}

if (heaps) {
  const heap = files(heaps, '.heapprofile');
  const bytes = new Map<string, number>();
  let all = 0;
  const walk = (n: HeapNode) => {
    const f = n.callFrame;
    const name = `${f.functionName || '(anonymous)'} ${f.url.split('/').slice(-2).join('/')}:${f.lineNumber}`;
    if (n.selfSize > 0) bytes.set(name, (bytes.get(name) ?? 0) + n.selfSize);
    all += n.selfSize;
    for (const c of n.children) walk(c);
  };
  for (const file of heap) walk((JSON.parse(fs.readFileSync(file, 'utf8')) as { head: HeapNode }).head);
  console.log(`\n${heap.length} windows: ${per(all, heap.length).toFixed(1)} B allocated per delivery`);
  for (const [name, v] of [...bytes].sort((a, b) => b[1] - a[1]).slice(0, 20))
    console.log(`${per(v, heap.length).toFixed(1).padStart(7)} B  ${name}`);
}
