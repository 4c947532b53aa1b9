/**
 * The in-process part of a fan-out delivery, without sockets: N subscriptions over the one EventStream each (one
 * key, a stored-event read that finds nothing), graphql-js's subscription through the streaming execution's result
 * stream (src/execution/run.ts) with a sink per subscriber that only counts, then one event published to all of them.
 * µs of CPU per delivery, rounds interleaved.
 *
 *   npx tsx bench/experiments/fanout-micro.ts [subscribers, default 1000] [rounds, default 40]
 */
import { makeExecutableSchema } from '@graphql-tools/schema';
import { parse, type ExecutionResult } from 'graphql';

import { APP_GRANTS, type Caller } from '../../src/auth/caller.js';
import { CursorCodec, EventStreams, InProcessBus, type EventLog, type EventRecord } from '../../src/events/index.js';
import { streamingExecution } from '../../src/execution/run.js';
import { SharedExecution } from '../../src/execution/shared.js';
import { TRACING_OFF } from '../../src/telemetry/tracing.js';

const N = Number(process.argv[2] ?? 1000);
const ROUNDS = Number(process.argv[3] ?? 40);
const cursors = CursorCodec.random();
const bus = new InProcessBus(0, cursors);
const log = { latest: async () => undefined } as unknown as EventLog;
const streams = new EventStreams(log, bus, cursors);
const caller: Caller = { scope: 'app:bench', app: 'bench', grants: APP_GRANTS };

const schema = makeExecutableSchema({
  typeDefs: 'type Query { x: Int } type Subscription { got(key: String!): Got } type Got { key: String seq: Int }',
  resolvers: {
    Subscription: {
      got: {
        subscribe: (_p: unknown, { key }: { key: string }) =>
          streams.subscribe({ kind: 'k', key, reader: caller, limit: 1 }),
        resolve: (e: EventRecord) => ({ key: e.key, seq: e.seq }),
      },
    },
  },
});
const document = parse('subscription($key: String!) { got(key: $key) { key seq } }');
const exec = streamingExecution(TRACING_OFF, 'ws', new SharedExecution(schema));

let seq = 0;
async function round(): Promise<number> {
  const key = `key-${seq}`;
  let delivered = 0;
  const ends: Promise<unknown>[] = [];
  for (let i = 0; i < N; i++) {
    const sink = { next: (_r: ExecutionResult) => void (delivered += 1) };
    const stream = (await exec.subscribe(
      { schema, document, variableValues: { key }, contextValue: { caller } },
      sink,
    )) as AsyncGenerator<ExecutionResult>;
    ends.push(stream.next());
  }
  await new Promise((r) => setImmediate(r));
  await new Promise((r) => setImmediate(r));
  const before = process.cpuUsage();
  const t0 = performance.now();
  seq += 1;
  await bus.publish({
    seq,
    kind: 'k',
    key,
    dedupeKey: key,
    fingerprint: '',
    payload: {},
    meta: {},
    scope: 'app:bench',
    receivedAt: new Date(),
  });
  await Promise.all(ends);
  const cpu = process.cpuUsage(before);
  void t0;
  if (delivered !== N) throw new Error(`delivered ${delivered} of ${N}`);
  return (cpu.user + cpu.system) / N;
}

const results: number[] = [];
for (let r = 0; r < ROUNDS; r++) results.push(await round());
const kept = results.slice(Math.floor(ROUNDS / 4)).sort((a, b) => a - b);
console.log(`µs CPU per delivery (median of ${kept.length}): ${kept[Math.floor(kept.length / 2)]!.toFixed(2)}`);
