/**
 * Fan-out CPU per delivery of two gateways in this one process, rounds interleaved (A, B, A, B, …), each with its own
 * environment: an in-process A/B of a delivery shortcut against its off switch. Each round, the clients (a child
 * process, pinned apart when `taskset` is there) open `connections` graphql-ws connections to one gateway and
 * subscribe each to `ids` fresh auth_req_ids (the bench's subscription, bench/scenarios/fanout.ts); then one
 * notification per id goes to the webhook, one after the other; the round's CPU (process.cpuUsage, this process:
 * both gateways, the webhook client) runs from the first webhook to the last `complete` the clients get.
 *
 * Each round also gives deliveries per second over its window (first webhook to last `complete`: the ten intakes, each
 * with its fsync, are in it), the p99 of the latency from each webhook's send to each `next` reaching the clients
 * (one machine's clock), and a notification's burst: from its first `next` at the clients to its last, as deliveries
 * per second (the fan-out's own rate, the intake before it aside; the clients' core bounds it too).
 * `--a NAME=VALUE` sets A's environment (the defaults otherwise).
 *
 *   npx tsx bench/experiments/fanout-ab.ts [--connections 500] [--ids 10] [--rounds 8] [--b SUBSCRIPTION_COMPILED_SELECTION=false]
 *   npx tsx bench/experiments/fanout-ab.ts --b-dist /path/to/other/dist/src   # B: another tree's build, same process
 *   … --a-dist /path/to/this/dist/src   # A from this tree's build (`npm run build` first), compiled as B is
 *
 * Where the time goes, in A's measured windows only: `--profile DIR` (a V8 CPU profile per window, 100 µs sampling),
 * `--heap DIR` (V8's sampling heap profiler per window, every allocation kept, 256 B interval), `--strace FILE`
 * (`strace -c -f` attached to this process for each window; the counts of every window go to FILE.<round>),
 * `--perf-ctl FIFO [--perf-ack FIFO]` (under `perf record -D -1 --control fifo:CTL,ACK`: perf counts A's windows alone).
 * Every run also splits each round's CPU between the main thread and the process's other threads (V8's workers: the
 * concurrent marker, the compilers; libuv's pool), from the scheduler's count per thread.
 *
 * A round that stalls (a step waiting more than `--stall-ms`, default 120 s: the clients' `ready`, the subscriptions'
 * count, the last `complete`, the sockets' close) is accounted for, and the run exits 3: the round, side and step, the
 * gateway's listeners by id, the clients' account (each subscription not completed, with what it got and its socket's
 * state) and, with `--diagnose`, the gateway's side of every result stream of the round (its state and its event
 * stream's: started, done, who waits, queued, reading, yielded); SIGUSR2 writes the same at any time. `--diagnose`
 * wraps SharedResultStream's `next` of this tree's src (not of a `--b-dist` build) to know the round's streams.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import inspector from 'node:inspector';
import { parseArgs } from 'node:util';

import type { Gateway } from '../../src/gateway/options.js';
import { pin, placement } from '../lib/processes.js';
import { median } from '../lib/stats.js';
import { notificationBody } from '../scenarios/webhook.js';
import {
  builtGateway,
  forkSubscriberClients,
  inProcessGateway,
  notify,
  subscriberClients,
} from './in-process-gateway.js';

const { values: cli } = parseArgs({
  options: {
    connections: { type: 'string', default: '500' },
    ids: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '8' },
    b: { type: 'string', default: 'SUBSCRIPTION_COMPILED_SELECTION=false' },
    /** B is another tree's build (its dist/src), with A's environment, instead of A with `--b`. */
    'b-dist': { type: 'string' },
    /** A from a build too (this tree's dist/src, `npm run build` first), so that both sides run compiled alike. */
    'a-dist': { type: 'string' },
    /** A's environment (NAME=VALUE), the defaults otherwise: the profiles, census and strace are taken of A. */
    a: { type: 'string' },
    clients: { type: 'boolean', default: false },
    profile: { type: 'string' },
    heap: { type: 'string' },
    strace: { type: 'string' },
    'perf-ctl': { type: 'string' },
    'perf-ack': { type: 'string' },
    'stall-ms': { type: 'string', default: '120000' },
    diagnose: { type: 'boolean', default: false },
  },
});

/** With --diagnose: the result streams that started in this round (SharedResultStream's first `next()`). */
const streamsOfRound = new Set<object>();
if (cli.diagnose && !cli.clients) {
  const { SharedResultStream } = await import('../../src/execution/run.js');
  const next = SharedResultStream.prototype.next;
  SharedResultStream.prototype.next = function (this: InstanceType<typeof SharedResultStream>) {
    streamsOfRound.add(this);
    return next.call(this);
  };
}

/**
 * The gateway's side of the round's result streams, counted by state (--diagnose): the result stream's flags and its
 * event stream's (private fields read as the objects hold them: an account for a stall, nothing else reads them).
 */
function streamStates(): string[] {
  const counts = new Map<string, { n: number; example: string }>();
  for (const stream of streamsOfRound) {
    const r = stream as Record<string, unknown>;
    const source = r.iterator as Record<string, unknown>;
    const waiting = source.waiting;
    const state = [
      `stopped ${String(r.stopped)}`,
      `failed ${String(r.failed)}`,
      `last ${r.last === null ? 'none' : 'held'}`,
      `group ${r.group === undefined ? 'not joined' : r.group === null ? 'left' : 'member'}`,
      `| source started ${String(source.started)}`,
      `done ${String(source.done)}`,
      `waiting ${waiting === null || waiting === undefined ? 'none' : (waiting as object).constructor.name}`,
      `queued ${(source.queue as unknown[] | null)?.length ?? 0}`,
      `reading ${source.reading === null ? 'no' : 'yes'}`,
      `replay ${source.replay === null ? 'no' : 'yes'}`,
      `yielded ${String(source.yielded)}`,
    ].join(', ');
    const entry = counts.get(state) ?? { n: 0, example: String((source.filter as { key?: string }).key) };
    entry.n += 1;
    counts.set(state, entry);
  }
  return [...counts].map(([state, { n, example }]) => `gateway: ${n} result streams: ${state} (e.g. key ${example})`);
}

/**
 * CPU time (ns) so far of this process's threads from the scheduler's count (/proc/self/task/<tid>/schedstat): the main
 * thread and every other thread (V8's platform workers: concurrent marking, compiling; libuv's pool) apart.
 */
function threadTimes(): { main: number; others: number } {
  let main = 0;
  let others = 0;
  for (const tid of fs.readdirSync('/proc/self/task')) {
    let ns: number;
    try {
      ns = Number(fs.readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      continue; // the thread ended meanwhile
    }
    if (Number(tid) === process.pid) main += ns;
    else others += ns;
  }
  return { main, others };
}

/** perf's control and acknowledgement FIFOs, opened at the first use (perf opens its ends when it starts). */
let perfFds: [number, number | undefined] | undefined;
/** Tells perf to count (`enable`) or stop (`disable`), and waits for its acknowledgement. */
function perfControl(command: 'enable' | 'disable'): void {
  if (!cli['perf-ctl']) return;
  perfFds ??= [fs.openSync(cli['perf-ctl'], 'w'), cli['perf-ack'] ? fs.openSync(cli['perf-ack'], 'r') : undefined];
  fs.writeSync(perfFds[0], `${command}\n`);
  if (perfFds[1] !== undefined) fs.readSync(perfFds[1], Buffer.alloc(5));
}

const session = cli.profile || cli.heap ? new inspector.Session() : undefined;
session?.connect();
const post = (method: string, params?: object): Promise<unknown> =>
  new Promise((resolve, reject) =>
    session!.post(method, params, (err, result) => (err ? reject(err) : resolve(result))),
  );

/** `strace -c -f` attached to this process; resolves once it has attached every thread. */
async function straceOn(file: string): Promise<() => Promise<void>> {
  const tracer = spawn('strace', ['-c', '-f', '-o', file, '-p', String(process.pid)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  // strace says `Process N attached with M threads` once it holds every thread of the process.
  await new Promise<void>((resolve, reject) => {
    tracer.once('error', reject);
    tracer.stderr!.on('data', (d: Buffer) => {
      if (String(d).includes('attached')) resolve();
    });
  });
  return () =>
    new Promise<void>((resolve) => {
      tracer.once('exit', () => resolve());
      tracer.kill('SIGINT');
    });
}

function gateway(env: Record<string, string>): Promise<Gateway> {
  return inProcessGateway('fanout-ab', env);
}

async function main(): Promise<void> {
  const place = placement();
  if (place.pinned) pin(process.pid, place.server!);
  const [name, value] = cli.b.split('=') as [string, string];
  const bName = cli['b-dist'] ? `build at ${cli['b-dist']}` : cli.b;
  const gateways = {
    A: cli['a-dist']
      ? await builtGateway('fanout-ab', {}, cli['a-dist'])
      : await gateway(cli.a ? Object.fromEntries([cli.a.split('=') as [string, string]]) : {}),
    B: cli['b-dist'] ? await builtGateway('fanout-ab', {}, cli['b-dist']) : await gateway({ [name]: value }),
  };
  /** Where the run is, for the account of a stall. */
  let at = { r: -1, which: 'A' as 'A' | 'B', ids: [] as string[], step: 'starting' };
  const { child, said } = forkSubscriberClients(import.meta.url);
  if (place.pinned) pin(child.pid!, place.driver!);
  // The clients gone (a crash: its error is on stderr) would leave the round waiting for their word: said, and ended.
  const clientsExited = (code: number | null, signal: string | null) => {
    process.stderr.write(
      `the clients' process ended (${code ?? signal}) in round ${at.r} (${at.which}), at ${at.step}\n`,
    );
    process.exit(4);
  };
  child.once('exit', clientsExited);
  const connections = Number(cli.connections);
  const idsPerRound = Number(cli.ids);
  const body = notificationBody();
  const per: Record<'A' | 'B', number[]> = { A: [], B: [] };
  const rates: Record<'A' | 'B', number[]> = { A: [], B: [] };
  const p99s: Record<'A' | 'B', number[]> = { A: [], B: [] };
  const bursts: Record<'A' | 'B', number[]> = { A: [], B: [] };
  /** The main thread's and the other threads' share of each round, µs per delivery (the scheduler's count). */
  const mains: Record<'A' | 'B', number[]> = { A: [], B: [] };
  const others: Record<'A' | 'B', number[]> = { A: [], B: [] };
  const rounds = Number(cli.rounds);
  /** The account of the round so far (see the file's comment): the parent's side, then the clients' (on stderr). */
  const account = async (why: string): Promise<void> => {
    const bus = gateways[at.which].services.events.bus;
    const lines = [
      `${why}: round ${at.r} (${at.which}), waiting for ${at.step}`,
      `gateway ${at.which}: ${bus.subscribers('mobile-id')} mobile-id listeners; by id: ${at.ids.map((id) => bus.subscribers('mobile-id', id)).join(' ')}`,
      ...(cli.diagnose ? streamStates() : []),
    ];
    process.stderr.write(`${lines.join('\n')}\n`);
    const dumped = said('dumped');
    child.send('dump');
    await Promise.race([dumped, new Promise((r) => setTimeout(r, 10_000))]);
  };
  process.on('SIGUSR2', () => void account('SIGUSR2'));
  const stallMs = Number(cli['stall-ms']);
  /** `p`, or past --stall-ms the account of the stall and exit 3. */
  const step = async <T>(what: string, p: Promise<T>): Promise<T> => {
    at.step = what;
    let timer: NodeJS.Timeout | undefined;
    const stalled = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('stalled')), stallMs);
    });
    try {
      return await Promise.race([p, stalled]);
    } catch (err) {
      if ((err as Error).message !== 'stalled') throw err;
      await account(`stalled for ${stallMs} ms`);
      child.kill();
      process.exit(3);
    } finally {
      clearTimeout(timer);
    }
  };
  for (let r = 0; r < rounds * 2 + 2; r++) {
    const which = r % 2 === 0 ? 'A' : 'B';
    const gw = gateways[which];
    const ids = Array.from({ length: idsPerRound }, () => randomUUID());
    at = { r, which, ids, step: 'starting' };
    streamsOfRound.clear();
    const ready = said('ready');
    child.send({ url: gw.url, groups: Array.from({ length: connections }, () => ids) });
    await step("the clients' ready", ready);
    const want = connections * idsPerRound;
    await step(
      `${want} listeners`,
      (async () => {
        while (gw.services.events.bus.subscribers('mobile-id') < want) await new Promise((r) => setTimeout(r, 10));
      })(),
    );
    await new Promise((r) => setTimeout(r, 200));
    const done = said('done');
    const arrived = new Promise<{ arrivals: number[][] }>((resolve) => {
      const on = (m: unknown) => {
        if (typeof m !== 'object' || m === null || !('arrivals' in m)) return;
        child.off('message', on);
        resolve(m as { arrivals: number[][] });
      };
      child.on('message', on);
    });
    const sent: number[] = [];
    const traced = which === 'A' && r >= 2;
    const stopStrace = traced && cli.strace ? await straceOn(`${cli.strace}.${r}`) : undefined;
    if (traced && cli.profile) {
      await post('Profiler.enable');
      await post('Profiler.setSamplingInterval', { interval: 100 });
      await post('Profiler.start');
    }
    if (traced && cli.heap) {
      await post('HeapProfiler.enable');
      await post('HeapProfiler.startSampling', {
        samplingInterval: 256,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      });
    }
    if (traced) perfControl('enable');
    const t0 = performance.now();
    const before = process.cpuUsage();
    const threadsBefore = threadTimes();
    for (const id of ids) {
      sent.push(performance.timeOrigin + performance.now());
      await step(`the webhook's answer for ${id}`, notify(gw.url, body, id));
    }
    await step(`the last of ${want} completes`, done);
    const used = process.cpuUsage(before);
    const threadsAfter = threadTimes();
    const ms = performance.now() - t0;
    if (traced) perfControl('disable');
    if (traced && cli.profile) {
      const { profile } = (await post('Profiler.stop')) as { profile: unknown };
      fs.mkdirSync(cli.profile, { recursive: true });
      fs.writeFileSync(`${cli.profile}/fanout-${r}.cpuprofile`, JSON.stringify(profile));
    }
    if (traced && cli.heap) {
      const { profile } = (await post('HeapProfiler.stopSampling')) as { profile: unknown };
      fs.mkdirSync(cli.heap, { recursive: true });
      fs.writeFileSync(`${cli.heap}/fanout-${r}.heapprofile`, JSON.stringify(profile));
    }
    await stopStrace?.();
    // The first round of each is a warm-up.
    if (r >= 2) {
      per[which].push((used.user + used.system) / want);
      mains[which].push((threadsAfter.main - threadsBefore.main) / 1000 / want);
      others[which].push((threadsAfter.others - threadsBefore.others) / 1000 / want);
      rates[which].push((want / ms) * 1000);
    }
    if (r >= 2) {
      const { arrivals } = await arrived;
      const waits = arrivals.flatMap((times, i) => times.map((t) => t - sent[i]!)).sort((x, y) => x - y);
      p99s[which].push(waits[Math.floor(waits.length * 0.99)]!);
      // One notification's burst: its first `next` to its last, as deliveries per second (the intake before it aside).
      const perId = arrivals.map((times) => (times.length - 1) / ((Math.max(...times) - Math.min(...times)) / 1000));
      bursts[which].push(median(perId));
    } else await arrived;
    const closed = said('closed');
    child.send('close');
    await step("the sockets' close", closed);
    // Not kept into the other side's round (a round's streams are garbage once its sockets closed).
    streamsOfRound.clear();
  }
  const a = median(per.A);
  const b = median(per.B);
  const lower = per.A.filter((v, i) => v < per.B[i]!).length;
  /** A − B by round: the pairs' median and quartiles (the medians of their lower and upper halves). */
  const paired = (x: number[], y: number[]) => {
    const d = x.map((v, i) => v - y[i]!).sort((p, q) => p - q);
    const half = Math.floor(d.length / 2);
    const f = (v: number) => v.toFixed(2);
    return `median ${f(median(d))} (quartiles ${f(median(d.slice(0, half)))}, ${f(median(d.slice(d.length - half)))})`;
  };
  process.stdout.write(
    `µs CPU per delivery, median of ${rounds} rounds of ${connections * idsPerRound}: A (${cli.a ?? 'defaults'}) ${a.toFixed(2)}, ` +
      `B (${bName}) ${b.toFixed(2)}; A/B ${(a / b).toFixed(3)}; A lower in ${lower} of ${per.A.length} pairs\n` +
      `A ${per.A.map((v) => v.toFixed(1)).join(' ')}\nB ${per.B.map((v) => v.toFixed(1)).join(' ')}\n` +
      `deliveries/s (median): A ${median(rates.A).toFixed(0)}, B ${median(rates.B).toFixed(0)}; ` +
      `p99 ms (median of rounds): A ${median(p99s.A).toFixed(1)}, B ${median(p99s.B).toFixed(1)}; ` +
      `a notification's burst, deliveries/s (median of rounds): A ${median(bursts.A).toFixed(0)}, B ${median(bursts.B).toFixed(0)}\n` +
      `bursts A ${bursts.A.map((v) => v.toFixed(0)).join(' ')}\nbursts B ${bursts.B.map((v) => v.toFixed(0)).join(' ')}\n` +
      `main thread, µs per delivery (median): A ${median(mains.A).toFixed(2)}, B ${median(mains.B).toFixed(2)}; ` +
      `other threads: A ${median(others.A).toFixed(2)}, B ${median(others.B).toFixed(2)}\n` +
      `other threads A ${others.A.map((v) => v.toFixed(1)).join(' ')}\nother threads B ${others.B.map((v) => v.toFixed(1)).join(' ')}\n` +
      `paired A − B, µs per delivery: ${paired(per.A, per.B)}; main thread ${paired(mains.A, mains.B)}\n`,
  );
  child.off('exit', clientsExited);
  child.kill();
  await Promise.all([gateways.A.close(), gateways.B.close()]);
}

if (cli.clients) subscriberClients();
else await main();
