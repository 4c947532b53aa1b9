/**
 * What the census experiments (creation-census.ts, intake-census.ts) print from V8's inspector: allocation by file and
 * site (the sampling heap profiler), self time by function and file (the sampling CPU profiler), and every function
 * run at least every other operation with its calls (precise coverage), each per `unit` of work (decisions 088, 094).
 */
import type inspector from 'node:inspector/promises';
import { PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import v8 from 'node:v8';

type Node = Omit<inspector.HeapProfiler.SamplingHeapProfileNode, 'children'> & { id: number; children: Node[] };
export type Profile = { head: Node; samples: Array<{ size: number; nodeId: number }> };

function short(url: string): string {
  const i = url.indexOf('/dist/');
  if (i >= 0) return url.slice(i + 1);
  const j = url.lastIndexOf('/node_modules/');
  if (j >= 0) return url.slice(j + '/node_modules/'.length);
  return url.replace(/^file:\/\/\//, '/');
}

function frame(n: Node): string {
  const f = n.callFrame;
  if (!f.url) return f.functionName || '(native)';
  return `${f.functionName || '(anonymous)'} ${short(f.url)}:${f.lineNumber + 1}`;
}

export function printAllocations(profile: Profile, n: number, interval: number, top: number, unit: string) {
  // Each sample stands for 1 / (1 − e^(−size/interval)) objects of its size (V8's own scaling of selfSize).
  const objectsBySample = new Map<number, number>();
  for (const s of profile.samples) {
    objectsBySample.set(s.nodeId, (objectsBySample.get(s.nodeId) ?? 0) + 1 / (1 - Math.exp(-s.size / interval)));
  }
  const sites = new Map<string, { bytes: number; objects: number }>();
  const byFile = new Map<string, number>();
  let bytes = 0;
  let objects = 0;
  const walk = (node: Node, parents: Node[]) => {
    if (node.selfSize > 0) {
      // The site: the nearest frame with a script (a builtin's allocation is charged to its JavaScript caller), and
      // that frame's caller.
      const chain = [...parents, node].filter((p) => p.callFrame.url);
      const at = chain.at(-1);
      const key = at
        ? `${frame(node) === frame(at) ? '' : `[${frame(node)}] `}${frame(at)} ← ${chain.at(-2) ? frame(chain.at(-2)!) : '?'}`
        : frame(node);
      const o = objectsBySample.get(node.id) ?? 0;
      const s = sites.get(key) ?? { bytes: 0, objects: 0 };
      s.bytes += node.selfSize;
      s.objects += o;
      sites.set(key, s);
      const file = at ? short(at.callFrame.url) : '(native)';
      byFile.set(file, (byFile.get(file) ?? 0) + node.selfSize);
      bytes += node.selfSize;
      objects += o;
    }
    for (const c of node.children) walk(c, [...parents, node]);
  };
  walk(profile.head, []);
  console.log(
    `\nallocation: ${(bytes / n).toFixed(0)} bytes and ${(objects / n).toFixed(0)} objects per ${unit} (sampling every ${interval} bytes)`,
  );
  console.log(`\nby file (bytes per ${unit}):`);
  for (const [f, b] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`  ${(b / n).toFixed(0).padStart(6)}  ${f}`);
  console.log(`\nby site (bytes, objects per ${unit}):`);
  for (const [k, s] of [...sites].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, top)) {
    console.log(`  ${(s.bytes / n).toFixed(0).padStart(6)} ${(s.objects / n).toFixed(1).padStart(6)}  ${k}`);
  }
}

export type CpuProfile = {
  nodes: Array<{ id: number; callFrame: inspector.Runtime.CallFrame }>;
  samples: number[];
  timeDeltas: number[];
};

/** Self time per function (µs per operation, from the samples' time deltas), and per file. */
export function printTime(profile: CpuProfile, n: number, top: number, unit: string) {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const byFunction = new Map<string, number>();
  const byFile = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i + 1] ?? 0;
    const f = byId.get(id)!.callFrame;
    const name = f.url ? `${f.functionName || '(anonymous)'} ${short(f.url)}:${f.lineNumber + 1}` : f.functionName;
    byFunction.set(name, (byFunction.get(name) ?? 0) + us);
    const file = f.url ? short(f.url) : f.functionName;
    byFile.set(file, (byFile.get(file) ?? 0) + us);
    total += us;
  });
  console.log(`\ntime: ${(total / n).toFixed(1)} µs of the main thread's samples per ${unit} (idle included)`);
  console.log(`\nby file (µs per ${unit}):`);
  for (const [f, us] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`  ${(us / n).toFixed(2).padStart(7)}  ${f}`);
  console.log(`\nby function, self time (µs per ${unit}):`);
  for (const [f, us] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`  ${(us / n).toFixed(2).padStart(7)}  ${f}`);
}

export function printCalls(result: inspector.Profiler.ScriptCoverage[], n: number, top: number, unit: string) {
  const rows: Array<{ name: string; per: number; gateway: boolean }> = [];
  for (const script of result) {
    if (!script.url.startsWith('file:') || script.url.includes('/bench/')) continue;
    for (const f of script.functions) {
      const count = f.ranges[0]!.count;
      if (count < n / 2) continue;
      rows.push({
        name: `${f.functionName || '(anonymous)'} ${short(script.url)}`,
        per: count / n,
        gateway: script.url.includes('/dist/src/'),
      });
    }
  }
  for (const gateway of [true, false]) {
    const mine = rows.filter((r) => r.gateway === gateway).sort((a, b) => b.per - a.per);
    const total = mine.reduce((s, r) => s + r.per, 0);
    console.log(
      `\n${gateway ? 'gateway' : 'library'} functions run at least every other ${unit}: ${mine.length}, ${total.toFixed(0)} calls per ${unit}`,
    );
    for (const r of gateway ? mine : mine.slice(0, top)) console.log(`  ${r.per.toFixed(2).padStart(7)}  ${r.name}`);
  }
}

/**
 * What reaches V8's old generation per request (docs/decisions/120): the old space's growth over 20 blocks of `n / 10`
 * requests (`block` runs that many and resolves when they are answered), the median of the blocks in which no
 * mark-compact ran. What is made in the old generation (a tenured site, a hidden class) counts as much as what a
 * scavenge promoted.
 */
export async function printPromotion(block: (count: number) => Promise<void>, n: number, unit: string): Promise<void> {
  let majors = 0;
  let minors = 0;
  const obs = new PerformanceObserver((list) => {
    for (const e of list.getEntries())
      if ((e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind === 1) minors++;
      else majors++;
  });
  obs.observe({ entryTypes: ['gc'] });
  const old = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'old_space')!.space_used_size;
  const growth: number[] = [];
  const size = Math.max(200, Math.round(n / 10));
  const t0 = performance.now();
  for (let b = 0; b < 20; b++) {
    const [m0, o0] = [majors, old()];
    await block(size);
    const grown = old() - o0;
    // The gc entries come a turn later: a mark-compact at the block's end is counted before the block is judged.
    await new Promise((resolve) => setTimeout(resolve, 20));
    if (majors === m0) growth.push(grown / size);
  }
  const seconds = (performance.now() - t0) / 1000;
  obs.disconnect();
  growth.sort((a, b) => a - b);
  console.log(
    `${((20 * size) / seconds).toFixed(0)} ${unit}s/s, a scavenge every ${((seconds * 1000) / minors).toFixed(0)} ms (${((20 * size) / minors).toFixed(0)} ${unit}s)`,
  );
  console.log(
    `old generation: +${growth[growth.length >> 1]?.toFixed(0) ?? '?'} B per ${unit} (median of ${growth.length} blocks of ${size} without a mark-compact; range ${growth[0]?.toFixed(0)}–${growth.at(-1)?.toFixed(0)})`,
  );
}
