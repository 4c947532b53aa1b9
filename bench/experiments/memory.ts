/**
 * `npx tsx bench/experiments/memory.ts`: does anything in the gateway grow per request? Starts the gateway as `npm run bench`
 * does (its own process, over the upstream stub), with the inspector open, on SQLite and on an embedded
 * PostgreSQL. For each kind of request it sends a warm-up (caches fill), then two windows of N requests; after
 * each, two full garbage collections and the heap figures of the gateway's main isolate. Growth per request in
 * the second window is what stays after the caches are full: a leak, unless it is a bounded cache still filling.
 * With --census, a heap snapshot after each window names the kinds of object whose count grew.
 *
 * Options:
 *   --db sqlite,postgres   which stores (default both)
 *   --kinds a,b            which kinds (default all: mutation, query, notification, ws, ws-cancel, sse, sse-cancel)
 *   -n <count>             requests per window (default 2000)
 *   --warmup <count>       requests before the first window (default 500)
 *   --census               heap snapshots: the object kinds that grew in the second window
 *   --breakdown <count>    also: what the process's RSS is made of after <count> requests of the mix (default 0: skip)
 */
import fs from 'node:fs';
import { parseArgs } from 'node:util';

import { censusGrowth, Inspector, type Census } from '../lib/inspector.js';
import {
  KIND_DESCRIPTIONS,
  KINDS,
  Operations,
  runMany,
  startLongRunGateway,
  stopAll,
  type Database,
  type Kind,
  type LongRunGateway,
} from '../lib/long-run.js';

const { values: cli } = parseArgs({
  options: {
    db: { type: 'string', default: 'sqlite,postgres' },
    kinds: { type: 'string' },
    n: { type: 'string', short: 'n', default: '2000' },
    warmup: { type: 'string', default: '500' },
    census: { type: 'boolean', default: false },
    breakdown: { type: 'string', default: '0' },
  },
});
const N = Number(cli.n);
const WARMUP = Number(cli.warmup);
const databases = cli.db.split(',').map((s) => s.trim()) as Database[];
const kinds = (cli.kinds ? cli.kinds.split(',').map((s) => s.trim()) : [...KINDS]) as Kind[];
for (const k of kinds) if (!KINDS.includes(k)) throw new Error(`unknown kind ${k}; one of ${KINDS.join(', ')}`);

const started = Date.now();
const log = (line: string) =>
  process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${line}\n`);

interface Memory {
  rss: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
  /** V8 heap spaces: committed (space_size) and used, bytes. */
  spaces: Array<{ space_name: string; space_size: number; space_used_size: number }>;
}

async function memory(insp: Inspector, gc = true): Promise<Memory> {
  if (gc) await insp.collectGarbage();
  const json = await insp.evaluate<string>(
    "JSON.stringify({ ...process.memoryUsage(), spaces: process.getBuiltinModule('node:v8').getHeapSpaceStatistics() })",
  );
  return JSON.parse(json) as Memory;
}

/** From /proc/<pid>/smaps_rollup: resident memory by kind, bytes. */
function smaps(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8').split('\n')) {
    const m = /^(\w+):\s+(\d+) kB/.exec(line);
    if (m) out[m[1]!] = Number(m[2]) * 1024;
  }
  return out;
}

const kb = (bytes: number) => (bytes / 1024).toFixed(1);
const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

interface Row {
  database: Database;
  kind: Kind;
  first: number;
  second: number;
  rssDelta: number;
  failed: number;
  grew: Array<{ key: string; count: number; bytes: number }>;
}

async function measureKind(gw: LongRunGateway, insp: Inspector, ops: Operations, kind: Kind): Promise<Row> {
  const check = (what: string, r: { failed: number; sample: string | null }) => {
    if (r.failed) log(`  ${kind} ${what}: ${r.failed} failed, e.g. ${r.sample}`);
    return r.failed;
  };
  let failed = check('warm-up', await runMany(ops, kind, WARMUP));
  const m0 = await memory(insp);
  failed += check('window 1', await runMany(ops, kind, N));
  const m1 = await memory(insp);
  const c1: Census | null = cli.census ? await insp.census() : null;
  failed += check('window 2', await runMany(ops, kind, N));
  const m2 = await memory(insp);
  const c2: Census | null = cli.census ? await insp.census() : null;
  const row: Row = {
    database: gw.database,
    kind,
    first: (m1.heapUsed - m0.heapUsed) / N,
    second: (m2.heapUsed - m1.heapUsed) / N,
    rssDelta: m2.rss - m0.rss,
    failed,
    grew: c1 && c2 ? censusGrowth(c1, c2) : [],
  };
  log(
    `  ${kind}: heap after GC ${mb(m0.heapUsed)} → ${mb(m1.heapUsed)} → ${mb(m2.heapUsed)} MB (${row.first.toFixed(0)} / ${row.second.toFixed(0)} B per request); RSS ${mb(m0.rss)} → ${mb(m2.rss)} MB`,
  );
  for (const g of row.grew) log(`    ${g.count > 0 ? '+' : ''}${g.count} ${g.key} (${kb(g.bytes)} KB)`);
  return row;
}

/** What the RSS of a gateway that served a mix of everything is made of: idle, right after the load, and after a full GC. */
async function breakdown(gw: LongRunGateway, insp: Inspector, ops: Operations, count: number): Promise<string[]> {
  const read = async (gc: boolean) => ({ ...(await memory(insp, gc)), smaps: smaps(gw.proc.pid) });
  const idle = await read(true);
  for (const kind of KINDS) {
    log(`  breakdown: ${Math.round(count / KINDS.length)} × ${kind}, 32 at a time`);
    await runMany(ops, kind, Math.round(count / KINDS.length), 32);
  }
  const loaded = await read(false);
  const collected = await read(true);
  const cells = (m: typeof idle) => {
    const committed = m.spaces.reduce((s, x) => s + x.space_size, 0);
    const space = (name: string) => m.spaces.find((s) => s.space_name === name)?.space_size ?? 0;
    const anonymous = m.smaps.Anonymous ?? 0;
    return [
      mb(m.rss),
      `${mb(m.heapUsed)} / ${mb(committed)}`,
      mb(space('new_space')),
      mb(space('old_space')),
      mb(space('code_space') + space('large_object_space') + space('code_large_object_space')),
      mb(m.external),
      mb(anonymous),
      mb((m.smaps.Rss ?? 0) - anonymous),
      mb(anonymous - committed - m.external),
    ];
  };
  return [
    `| ${gw.database} | RSS MB | V8 heap used / committed MB | new space MB | old space MB | code + large objects MB | external MB | anonymous RSS MB | file-backed RSS MB | anonymous − V8 heap − external MB |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    `| idle after start-up (after GC) | ${cells(idle).join(' | ')} |`,
    `| right after ${count} requests (every kind, 32 at a time) | ${cells(loaded).join(' | ')} |`,
    `| the same, after a full GC | ${cells(collected).join(' | ')} |`,
  ];
}

async function main(): Promise<void> {
  const rows: Row[] = [];
  const breakdowns: string[][] = [];
  for (const database of databases) {
    log(`${database}: starting the gateway with --inspect`);
    const gw = await startLongRunGateway(database, { inspect: true });
    const insp = await Inspector.connect(gw.inspectPort!);
    const ops = await Operations.prepare(gw.origin);
    try {
      for (const kind of kinds) rows.push(await measureKind(gw, insp, ops, kind));
      if (Number(cli.breakdown) > 0) breakdowns.push(await breakdown(gw, insp, ops, Number(cli.breakdown)));
    } finally {
      await ops.close();
      insp.close();
      await gw.stop();
    }
  }
  const out = [
    `Heap growth per request after GC (gateway main isolate, \`process.memoryUsage().heapUsed\` after two forced full collections), ` +
      `${WARMUP} requests of warm-up, then two windows of ${N}; Node ${process.version}.`,
    '',
    '| store | request | window 1 B/request | window 2 B/request | RSS change MB | failed |',
    '|---|---|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.database} | ${r.kind} | ${r.first.toFixed(0)} | ${r.second.toFixed(0)} | ${mb(r.rssDelta)} | ${r.failed} |`,
    ),
    '',
    ...kinds.map((k) => `- ${k}: ${KIND_DESCRIPTIONS[k]}`),
    ...breakdowns.flatMap((b) => ['', ...b]),
  ];
  process.stdout.write(`${out.join('\n')}\n`);
}

for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () => void stopAll().finally(() => process.exit(130)));
main().catch(async (err: unknown) => {
  process.stderr.write(`memory failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
