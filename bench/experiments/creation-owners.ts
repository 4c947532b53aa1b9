/**
 * Whose code a durable creation's main-thread CPU is spent for (docs/decisions/110): reads `perf script` text of
 * creation-cpu-where.ts's `--perf` run and gives each of the gateway's main-thread samples (the thread with the most
 * samples) to the innermost gateway function on its stack (`dist/src/…`, graphql-jit's compiled query), what that
 * function calls included: a statement's SQLite work goes to whoever ran it, `res.end`'s write to the response. A
 * sample with no gateway frame goes to the outermost library frame (`[lib] …`: node's HTTP parser, undici's socket
 * callbacks, the microtask loop's own work) or, with no JavaScript on its stack, to `[native]` (the event loop, its
 * system calls). With the creations' count and µs per creation it prints µs per creation; `--within NAME` lists what
 * the samples of one owner did (the frames just below it, `--depth` of them).
 *
 *   npx tsx bench/experiments/creation-cpu-where.ts --rounds 4 --perf /tmp/creation.data
 *   perf script -i /tmp/creation.data -F tid,ip,sym > /tmp/creation.txt
 *   npx tsx bench/experiments/creation-owners.ts /tmp/creation.txt [--top 60] [--within send] [--depth 2]
 *     [--creations 12000 --hz 2000]
 *
 * Functions perf cannot see are counted in whoever they were inlined into (V8's optimizing compiler inlines small
 * ones), so read an owner as "this function and what it inlined".
 */
import { parseArgs } from 'node:util';

import { readPerfScript } from '../lib/perf-script.js';

const { values: cli, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    top: { type: 'string', default: '60' },
    within: { type: 'string' },
    depth: { type: 'string', default: '1' },
    creations: { type: 'string' },
    hz: { type: 'string', default: '2000' },
  },
});
const [file] = positionals;
if (!file) throw new Error('usage: creation-owners.ts SCRIPT.txt [--top 60] [--within NAME] [--creations N --hz 2000]');

const samples = readPerfScript(file).map((s) => ({ tid: String(s.tid), frames: s.frames }));

const perThread = new Map<string, number>();
for (const s of samples) perThread.set(s.tid, (perThread.get(s.tid) ?? 0) + 1);
const main = [...perThread].sort((a, b) => b[1] - a[1])[0]![0];
const mains = samples.filter((s) => s.tid === main);

const GATEWAY = /dist\/src\/|dist\/runtime|dist\/execution|ResolverHandler/;
function owner(frames: string[]): { name: string; at: number } {
  const i = frames.findIndex((f) => GATEWAY.test(f));
  if (i >= 0) {
    const m = /JS:[*^~]?(\S*) .*?dist\/(\S+?:\d+):\d+/.exec(frames[i]!);
    return { name: m ? `${m[1] || '(anonymous)'} ${m[2]}` : frames[i]!, at: i };
  }
  let j = -1;
  for (let k = frames.length - 1; k >= 0; k--) {
    if (frames[k]!.startsWith('JS:')) {
      j = k;
      break;
    }
  }
  if (j >= 0) return { name: `[lib] ${frames[j]!.replace(/:\d+:\d+$/, '').replace(/\S*node_modules\//, '')}`, at: j };
  return { name: `[native] ${frames[frames.length - 1] ?? '?'}`, at: frames.length };
}

const counts = new Map<string, number>();
const within = new Map<string, number>();
const depth = Number(cli.depth);
for (const s of mains) {
  const o = owner(s.frames);
  counts.set(o.name, (counts.get(o.name) ?? 0) + 1);
  if (cli.within && o.name.includes(cli.within)) {
    const below = s.frames.slice(Math.max(0, o.at - depth), o.at).map((f) =>
      f
        .replace(/\(.*$/, '')
        .replace(/\S*node_modules\//, '')
        .slice(0, 60),
    );
    const key = below.join(' | ') || '(itself)';
    within.set(key, (within.get(key) ?? 0) + 1);
  }
}

const n = mains.length;
const usPerSample = cli.creations ? 1e6 / Number(cli.hz) / Number(cli.creations) : null;
const line = (count: number, name: string) =>
  `${((100 * count) / n).toFixed(2).padStart(6)} %${usPerSample ? `  ${(count * usPerSample).toFixed(1).padStart(5)} µs` : ''}  ${name}`;
console.log(`${samples.length} samples, the main thread (${main}) ${n}`);
for (const [name, count] of [...counts].sort((a, b) => b[1] - a[1]).slice(0, Number(cli.top))) {
  console.log(line(count, name));
}
if (cli.within) {
  console.log(`\nwithin ${cli.within}:`);
  for (const [name, count] of [...within].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(line(count, name));
}
