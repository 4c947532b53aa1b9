/**
 * What one WAL sync costs on this machine's disk, and what makes it dearer (docs/decisions/080): writes of `--frames`
 * SQLite WAL frames (24-byte header + 4 KiB page, as SQLite writes them: two pwrites a frame) at the end of what was
 * written before, then an fdatasync through libuv's pool (`fs.fdatasync`, as the gateway's `syncWal` does), one at a
 * time. Variants, rounds interleaved in this one process: `append` (the file grows, as a WAL does in its first
 * generation), `overwrite` (a file already as large, as a WAL does after a restart), `overwrite, fewer frames`, and
 * `overwrite` with the fdatasync made on this thread (what synchronous=FULL does inside the COMMIT).
 * A round's figure is the CPU of every thread of this process (schedstat) per sync, split into this thread and the
 * others; the block layer's requests issued per sync are counted with perf when `--block` is given.
 *
 *   npx tsx bench/experiments/wal-sync-micro.ts [--n 2000] [--rounds 6] [--frames 8] [--few 3] [--dir /tmp] [--block]
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values: cli } = parseArgs({
  options: {
    n: { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '6' },
    frames: { type: 'string', default: '8' },
    few: { type: 'string', default: '3' },
    dir: { type: 'string', default: os.tmpdir() },
    block: { type: 'boolean', default: false },
  },
});
const N = Number(cli.n);
const FRAME = 24 + 4096;
const header = Buffer.alloc(24, 7);
const page = Buffer.alloc(4096, 9);

function cpu(): { main: number; others: number } {
  let main = 0;
  let others = 0;
  for (const task of fs.readdirSync('/proc/self/task')) {
    const ns = Number(fs.readFileSync(`/proc/self/task/${task}/schedstat`, 'utf8').split(' ')[0]);
    if (Number(task) === process.pid) main += ns;
    else others += ns;
  }
  return { main, others };
}

const fdatasync = (fd: number) =>
  new Promise<void>((resolve, reject) => fs.fdatasync(fd, (e) => (e ? reject(e) : resolve())));

interface Variant {
  name: string;
  frames: number;
  file: string;
  fd: number;
  offset: number;
  grow: boolean;
  /** fdatasync on this thread (as SQLite's own FULL does) instead of libuv's pool. */
  inline?: boolean;
}

const dir = fs.mkdtempSync(path.join(cli.dir!, 'wal-sync-'));
const size = N * Number(cli.frames) * FRAME + 32;
function variant(name: string, frames: number, grow: boolean): Variant {
  const file = path.join(dir, name.replace(/\W+/g, '-'));
  const fd = fs.openSync(file, 'w+');
  if (!grow) {
    // Written and synced once, as a WAL's earlier generation left it.
    const chunk = Buffer.alloc(1 << 20, 1);
    for (let at = 0; at < size; at += chunk.length) fs.writeSync(fd, chunk, 0, chunk.length, at);
    fs.fsyncSync(fd);
  }
  return { name, frames, file, fd, offset: 32, grow };
}
const variants = [
  variant('append', Number(cli.frames), true),
  variant('overwrite', Number(cli.frames), false),
  variant('overwrite, fewer frames', Number(cli.few), false),
  { ...variant('overwrite, fdatasync on this thread', Number(cli.frames), false), inline: true },
];

async function round(v: Variant): Promise<{ main: number; others: number }> {
  if (v.grow) {
    fs.ftruncateSync(v.fd, 0);
    fs.fsyncSync(v.fd);
  }
  v.offset = 32;
  const before = cpu();
  for (let i = 0; i < N; i++) {
    for (let f = 0; f < v.frames; f++) {
      fs.writeSync(v.fd, header, 0, 24, v.offset);
      fs.writeSync(v.fd, page, 0, 4096, v.offset + 24);
      v.offset += FRAME;
    }
    if (v.inline) fs.fdatasyncSync(v.fd);
    else await fdatasync(v.fd);
  }
  const after = cpu();
  return { main: (after.main - before.main) / 1e3 / N, others: (after.others - before.others) / 1e3 / N };
}

const results = new Map<string, Array<{ main: number; others: number }>>();
for (let r = 0; r < Number(cli.rounds); r++) {
  const order = r % 2 ? [...variants].reverse() : variants;
  for (const v of order) {
    const x = await round(v);
    (results.get(v.name) ?? results.set(v.name, []).get(v.name)!).push(x);
    console.log(`round ${r} ${v.name}: this thread ${x.main.toFixed(1)} µs, others ${x.others.toFixed(1)} µs per sync`);
  }
}
const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
for (const [name, xs] of results) {
  const total = xs.map((x) => x.main + x.others);
  console.log(
    `${name}: process ${median(total).toFixed(1)} µs per sync (median; range ${Math.min(...total).toFixed(1)}–${Math.max(...total).toFixed(1)}), this thread ${median(xs.map((x) => x.main)).toFixed(1)}, the pool ${median(xs.map((x) => x.others)).toFixed(1)}`,
  );
}
if (cli.block) {
  for (const v of variants) {
    const file = path.join(dir, 'perf.data');
    const perf = spawn('perf', ['record', '-q', '-e', 'block:block_rq_issue', '-a', '-o', file], { stdio: 'ignore' });
    await new Promise((r) => setTimeout(r, 1_500));
    await round(v);
    perf.kill('SIGINT');
    await new Promise((r) => perf.once('exit', r));
    const text = execFileSync('perf', ['script', '-i', file, '-F', 'pid,tid,comm,trace'], {
      maxBuffer: 1 << 28,
      stdio: ['ignore', 'pipe', 'ignore'],
    }).toString();
    const kinds = new Map<string, number>();
    for (const line of text.split('\n')) {
      const m = /\s(\d+)\/(\d+)\s+\d+,\d+\s+(\S+)\s+(\d+)/.exec(line);
      if (!m || Number(m[1]) !== process.pid) continue;
      kinds.set(m[3]!, (kinds.get(m[3]!) ?? 0) + 1 / N);
    }
    console.log(`${v.name}: block requests per sync ${[...kinds].map(([k, c]) => `${k} ${c.toFixed(3)}`).join(', ')}`);
  }
}
for (const v of variants) fs.closeSync(v.fd);
fs.rmSync(dir, { recursive: true, force: true });
