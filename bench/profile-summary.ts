/**
 * Summarises a V8 .cpuprofile (from `npm run bench -- --profile`): self time by function and by package,
 * and inclusive time of the gateway's own source files.
 *
 * Usage: npx tsx bench/profile-summary.ts bench/profiles/<file>.cpuprofile [top=30] [--from S] [--to S] [--timeline]
 *   --from/--to  only the samples between these seconds after the profile's start (e.g. one scenario's window,
 *                leaving start-up out); --timeline prints the busy share per second first, to find the window.
 */
import fs from 'node:fs';
import { parseArgs } from 'node:util';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const { positionals, values: opts } = parseArgs({
  allowPositionals: true,
  options: { from: { type: 'string' }, to: { type: 'string' }, timeline: { type: 'boolean', default: false } },
});
const [file, topArg] = positionals;
if (!file) {
  process.stderr.write(
    'usage: tsx bench/profile-summary.ts <file.cpuprofile> [top] [--from S] [--to S] [--timeline]\n',
  );
  process.exit(2);
}
const top = Number(topArg ?? 30);
const fromUs = Number(opts.from ?? 0) * 1e6;
const toUs = opts.to === undefined ? Infinity : Number(opts.to) * 1e6;
const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

// Percentages are of busy time: idle samples (waiting for I/O) are left out.
const selfUs = new Map<number, number>();
let idleUs = 0;
const perSecond: Array<{ busy: number; all: number }> = [];
let at = 0;
profile.samples.forEach((id, i) => {
  const us = profile.timeDeltas[i] ?? 0;
  at += us;
  const idle = byId.get(id)!.callFrame.functionName === '(idle)';
  const s = (perSecond[Math.floor(at / 1e6)] ??= { busy: 0, all: 0 });
  s.all += us;
  if (!idle) s.busy += us;
  if (at < fromUs || at > toUs) return;
  if (idle) idleUs += us;
  else selfUs.set(id, (selfUs.get(id) ?? 0) + us);
});
if (opts.timeline) {
  process.stdout.write('busy share per second since the profile started\n');
  perSecond.forEach(
    (s, i) =>
      s &&
      process.stdout.write(
        `${String(i).padStart(4)} s ${'#'.repeat(Math.round((s.busy / (s.all || 1)) * 40)).padEnd(40)} ${((s.busy / (s.all || 1)) * 100).toFixed(0)}%\n`,
      ),
  );
}
const total = [...selfUs.values()].reduce((a, b) => a + b, 0);

function where(url: string): string {
  if (!url) return '(native/V8)';
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1]!;
  if (url.startsWith('node:')) return url;
  const src = /\/(src|bench)\/(.*)$/.exec(url);
  return src ? `${src[1]}/${src[2]}` : url;
}

const fnSelf = new Map<string, number>();
const pkgSelf = new Map<string, number>();
const fileIncl = new Map<string, number>();
const pkgIncl = new Map<string, number>();
for (const [id, us] of selfUs) {
  const n = byId.get(id)!;
  const w = where(n.callFrame.url);
  const key = `${n.callFrame.functionName || '(anonymous)'} ${w}:${n.callFrame.lineNumber + 1}`;
  fnSelf.set(key, (fnSelf.get(key) ?? 0) + us);
  const pkg = w.startsWith('src/') ? w : w.split(':')[0]!;
  pkgSelf.set(pkg, (pkgSelf.get(pkg) ?? 0) + us);
  // Inclusive time per gateway source file and per package: each counted once per stack.
  const seen = new Set<string>();
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const f = where(byId.get(cur)!.callFrame.url);
    const p = f.startsWith('src/') ? f : f.split(':')[0]!;
    if (!seen.has(p)) {
      seen.add(p);
      (f.startsWith('src/') ? fileIncl : pkgIncl).set(
        p,
        ((f.startsWith('src/') ? fileIncl : pkgIncl).get(p) ?? 0) + us,
      );
    }
  }
}

const pct = (us: number) => `${((us / total) * 100).toFixed(1).padStart(5)}%`;
const print = (title: string, m: Map<string, number>, n: number) => {
  process.stdout.write(`\n${title}\n`);
  for (const [k, us] of [...m].sort((a, b) => b[1] - a[1]).slice(0, n)) process.stdout.write(`${pct(us)}  ${k}\n`);
};
process.stdout.write(
  `${file}: ${(total / 1e6).toFixed(2)} s busy, ${(idleUs / 1e6).toFixed(2)} s idle; percentages are of busy time\n`,
);
print('self time by package / file', pkgSelf, 25);
print('self time by function', fnSelf, top);
print('inclusive time by package', pkgIncl, 25);
print('inclusive time by gateway source file', fileIncl, 25);
