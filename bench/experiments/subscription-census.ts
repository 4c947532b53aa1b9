/**
 * What one waiting graphql-ws subscription keeps in the gateway, counted from heap snapshots rather than timed: a
 * gateway in this process (in-process-gateway.ts, SQLite, the sandbox upstreams), the clients in a child process. The
 * clients open `n` connections, each with one pending `mobileIdAuthentication` subscription (the subscription of
 * scenarios 5, 7 and 9) on its own auth_req_id; a heap snapshot is written (V8 collects garbage first); then `n` more
 * connections, and a second snapshot. The difference of the two, divided by `n`, is what one connection with its one
 * pending subscription keeps: objects and self bytes, by the snapshot's node type and constructor (or function name,
 * for closures), largest first. Deterministic up to V8's own caches (code, feedback), which are a few objects per
 * thousand connections. A second table names each new object by what holds it (its first retainer and the edge), and
 * each closure by its function's file and line, so that a closure or a promise reads as the code that made it. The
 * gateway is the built one (`npm run build` first: dist/, as the benchmark runs it, so that lines are tsc's output).
 * `--env NAME=VALUE` (repeatable) runs the gateway with a switch flipped. `--cpu R [--b-dist DIR]` measures instead the
 * CPU of opening a connection with its subscription, per connection, rounds interleaved with another build's.
 *
 *   npm run build && npx tsx bench/experiments/subscription-census.ts [--n 1000] [--top 40] [--settle 7000] [--env NAME=VALUE]
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import inspector from 'node:inspector';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import v8 from 'node:v8';

import { builtGateway, forkSubscriberClients, subscriberClients } from './in-process-gateway.js';

const { values: cli } = parseArgs({
  options: {
    n: { type: 'string', default: '1000' },
    /** ms between a batch's last subscription and its snapshot: past the first keep-alive sweep (6 s), before a ping (12 s). */
    settle: { type: 'string', default: '7000' },
    /** Another build's dist/src (a `git archive` of another commit, built), to count the same way. */
    dist: { type: 'string' },
    /** Instead of snapshots: `cpu` rounds of opening `n` connections with a subscription each, this process's CPU per one. */
    cpu: { type: 'string' },
    /** With --cpu: a second build (dist/src) whose gateway runs in this process too, rounds interleaved with the first's. */
    'b-dist': { type: 'string' },
    top: { type: 'string', default: '40' },
    env: { type: 'string', multiple: true, default: [] },
    clients: { type: 'boolean', default: false },
  },
});

interface Census {
  /** `type:name` → [objects, self bytes] */
  rows: Map<string, [number, number]>;
  /** `type:name <- retainer.edge` (closures: `name @file:line`) → [objects, self bytes] */
  held: Map<string, [number, number]>;
  /** the file of the nearest located retainer (V8's code left out) → [objects, self bytes] */
  owners: Map<string, [number, number]>;
  objects: number;
  bytes: number;
}

/** Script id → file, relative to the checkout (closures' locations name a script by id). */
const scripts = new Map<string, string>();

function add(map: Map<string, [number, number]>, key: string, size: number): void {
  const row = map.get(key) ?? [0, 0];
  row[0]++;
  row[1] += size;
  map.set(key, row);
}

/** Counts a snapshot's nodes by type and name (strings, code and arrays by type alone: their names are their contents). */
function census(file: string): Census {
  const snap = JSON.parse(fs.readFileSync(file, 'utf8')) as {
    snapshot: {
      meta: {
        node_fields: string[];
        node_types: [string[]];
        edge_fields: string[];
        edge_types: [string[]];
        location_fields: string[];
      };
    };
    nodes: number[];
    edges: number[];
    locations: number[];
    strings: string[];
  };
  const meta = snap.snapshot.meta;
  const types = meta.node_types[0];
  const edgeTypes = meta.edge_types[0];
  const width = meta.node_fields.length;
  const ew = meta.edge_fields.length;
  const [T, N, S, E] = ['type', 'name', 'self_size', 'edge_count'].map((f) => meta.node_fields.indexOf(f)) as number[];
  const [ET, EN, ETO] = ['type', 'name_or_index', 'to_node'].map((f) => meta.edge_fields.indexOf(f)) as number[];
  const label = (i: number): string => {
    const type = types[snap.nodes[i + T!]!]!;
    const byName = type === 'object' || type === 'closure' || type === 'native' || type === 'hidden';
    return `${type}:${byName ? snap.strings[snap.nodes[i + N!]!]!.slice(0, 50) : ''}`;
  };
  const where = new Map<number, string>();
  const lw = meta.location_fields.length;
  const [LO, LS, LL] = ['object_index', 'script_id', 'line'].map((f) => meta.location_fields.indexOf(f)) as number[];
  for (let l = 0; l < snap.locations.length; l += lw)
    where.set(
      snap.locations[l + LO!]!,
      `${scripts.get(String(snap.locations[l + LS!])) ?? snap.locations[l + LS!]}:${snap.locations[l + LL!]! + 1}`,
    );
  // Each node's first retainer other than weak edges and the snapshot's roots: "retainer.edge", and its index.
  const firstRetainer = new Map<number, string>();
  const parent = new Map<number, number>();
  for (let i = 0, e = 0; i < snap.nodes.length; i += width) {
    const count = snap.nodes[i + E!]!;
    for (let k = 0; k < count; k++, e += ew) {
      const to = snap.edges[e + ETO!]!;
      const et = edgeTypes[snap.edges[e + ET!]!]!;
      if (et === 'weak' || firstRetainer.has(to)) continue;
      const edge =
        et === 'element' || et === 'hidden'
          ? `[${snap.edges[e + EN!]}]`
          : snap.strings[snap.edges[e + EN!]!]!.slice(0, 30);
      firstRetainer.set(to, `${label(i)}${where.has(i) ? ` @${where.get(i)}` : ''}.${edge}`);
      parent.set(to, i);
    }
  }
  /** The file of the nearest object up the first retainers that has a location (a closure, or an object its class made). */
  const owner = (i: number): string => {
    for (let x: number | undefined = i, up = 0; x !== undefined && up < 16; x = parent.get(x), up++) {
      const at = where.get(x);
      if (at)
        return at
          .replace(/:\d+$/, '')
          .replace(/^.*node_modules\//, '')
          .replace(/^file:\/\//, '');
    }
    return '(no located retainer within 16)';
  };
  const rows = new Map<string, [number, number]>();
  const held = new Map<string, [number, number]>();
  const owners = new Map<string, [number, number]>();
  let objects = 0;
  let bytes = 0;
  for (let i = 0; i < snap.nodes.length; i += width) {
    const size = snap.nodes[i + S!]!;
    const key = label(i);
    add(rows, key, size);
    const at = where.get(i);
    add(held, at ? `${key} @${at}` : `${key} <- ${firstRetainer.get(i) ?? '(root)'}`, size);
    if (!key.startsWith('code:')) add(owners, owner(i), size);
    objects++;
    bytes += size;
  }
  return { rows, held, owners, objects, bytes };
}

function table(a: Map<string, [number, number]>, b: Map<string, [number, number]>, n: number, top: number): string {
  const diff: Array<[string, number, number]> = [];
  for (const key of new Set([...a.keys(), ...b.keys()])) {
    const [ca, sa] = a.get(key) ?? [0, 0];
    const [cb, sb] = b.get(key) ?? [0, 0];
    if (cb !== ca || sb !== sa) diff.push([key, (cb - ca) / n, (sb - sa) / n]);
  }
  diff.sort((x, y) => Math.abs(y[2]) - Math.abs(x[2]) || Math.abs(y[1]) - Math.abs(x[1]));
  // Rows of less than one object in ten connections are V8's own caches and the snapshot's noise.
  diff.splice(0, Infinity, ...diff.filter(([, count]) => Math.abs(count) >= 0.1));
  let out = '';
  for (const [key, count, size] of diff.slice(0, top))
    out += `  ${count.toFixed(2).padStart(8)} ${size.toFixed(0).padStart(7)} B  ${key}\n`;
  return out;
}

/** The built gateway (in-process-gateway.ts's `builtGateway`), with its count of mobile-ID subscriptions. */
async function censusGateway(
  env: Record<string, string>,
  dist = cli.dist ?? path.resolve(import.meta.dirname, '../../dist/src'),
): Promise<{ url: string; subscribers(): number; close(): Promise<void> }> {
  const gw = await builtGateway('subscription-census', env, dist);
  return { url: gw.url, subscribers: () => gw.services.events.bus.subscribers('mobile-id'), close: () => gw.close() };
}

/**
 * The CPU of opening a connection and subscribing, per connection: this process's (the gateway's threads; the clients
 * are in a child), from the clients' word to the last subscription registered on the bus; rounds of A and B
 * alternated (ABBA), each round's connections closed before the next.
 */
async function subscribeCpu(n: number, env: Record<string, string>): Promise<void> {
  const builds = [
    cli.dist ?? path.resolve(import.meta.dirname, '../../dist/src'),
    ...(cli['b-dist'] ? [cli['b-dist']] : []),
  ];
  const gateways = [];
  for (const dist of builds) gateways.push(await censusGateway(env, dist));
  const { child, said } = forkSubscriberClients(import.meta.url);
  const perRound: number[][] = builds.map(() => []);
  const rounds = Number(cli.cpu);
  for (let r = 0; r <= rounds; r++) {
    const order = r % 2 === 0 ? gateways.map((_, i) => i) : gateways.map((_, i) => i).reverse();
    for (const g of order) {
      const gw = gateways[g]!;
      const ready = said('ready');
      const before = process.cpuUsage();
      child.send({ url: gw.url, groups: Array.from({ length: n }, () => [randomUUID()]) });
      await ready;
      while (gw.subscribers() < n) await new Promise((res) => setImmediate(res));
      const used = process.cpuUsage(before);
      const closed = said('closed');
      child.send('close');
      await closed;
      while (gw.subscribers() > 0) await new Promise((res) => setTimeout(res, 10));
      // The first round of each gateway is a warm-up.
      if (r > 0) perRound[g]!.push((used.user + used.system) / n);
    }
  }
  child.kill();
  for (const gw of gateways) await gw.close();
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
  let out = `µs of CPU per connection and its subscription, ${rounds} rounds of ${n} ${JSON.stringify(env)}\n`;
  builds.forEach((dist, g) => {
    const v = perRound[g]!;
    out += `  ${dist}: median ${median(v).toFixed(1)} (range ${Math.min(...v).toFixed(1)}–${Math.max(...v).toFixed(1)}); ${v.map((x) => x.toFixed(1)).join(' ')}\n`;
  });
  process.stdout.write(out);
}

async function main(): Promise<void> {
  const n = Number(cli.n);
  const env = Object.fromEntries(cli.env.map((e) => e.split('=') as [string, string]));
  if (cli.cpu) return subscribeCpu(n, env);
  const gw = await censusGateway(env);
  const session = new inspector.Session();
  session.connect();
  const root = `file://${path.resolve(import.meta.dirname, '../..')}/`;
  session.on('Debugger.scriptParsed', ({ params }) => scripts.set(params.scriptId, params.url.replace(root, '')));
  if (!process.env.NO_DEBUGGER) session.post('Debugger.enable');
  const { child, said } = forkSubscriberClients(import.meta.url);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'subscription-census-'));
  // Both snapshots are written before either is read, so that the first census is not in the second snapshot.
  const files: string[] = [];
  for (let batch = 1; batch <= 2; batch++) {
    const ready = said('ready');
    child.send({ url: gw.url, groups: Array.from({ length: n }, () => [randomUUID()]) });
    await ready;
    while (gw.subscribers() < batch * n) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, Number(cli.settle)));
    files.push(v8.writeHeapSnapshot(path.join(dir, `batch-${batch}.heapsnapshot`)));
  }
  child.kill();
  await gw.close();
  const snapshots = files.map((file) => {
    const counted = census(file);
    if (!process.env.KEEP_SNAPSHOTS) fs.rmSync(file);
    else process.stderr.write(`${file}\n`);
    return counted;
  });
  const [a, b] = snapshots as [Census, Census];
  const top = Number(cli.top);
  let out = `per waiting subscription (${n} → ${2 * n} connections, one subscription each) ${JSON.stringify(env)}\n`;
  out += `  all: ${((b.objects - a.objects) / n).toFixed(2)} objects, ${((b.bytes - a.bytes) / n).toFixed(0)} bytes\n`;
  // V8's compiled code (and its optimization feedback) varies by ±100 B a connection from run to run: left out here.
  const sum = (c: Census, i: 0 | 1) =>
    [...c.rows].reduce((t, [key, row]) => (key.startsWith('code:') ? t : t + row[i]), 0);
  out += `  without code: ${((sum(b, 0) - sum(a, 0)) / n).toFixed(2)} objects, ${((sum(b, 1) - sum(a, 1)) / n).toFixed(0)} bytes\n`;
  out += `by type and constructor:\n${table(a.rows, b.rows, n, top)}`;
  out += `by owner (the file of the nearest retainer with a location; without code):\n${table(a.owners, b.owners, n, top)}`;
  out += `by what holds them (closures: where their function is):\n${table(a.held, b.held, n, top * 2)}`;
  process.stdout.write(out);
}

if (cli.clients) subscriberClients();
else await main();
