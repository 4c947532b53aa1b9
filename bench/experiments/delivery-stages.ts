/**
 * Where one delivery's main-thread CPU goes, by stage (docs/decisions/108): reads `perf script` text of
 * single-delivery-ab.ts's measured windows and gives each of the gateway process's main-thread samples to the
 * innermost stage whose code is on its stack (the stages below, in the order the delivery runs them); what no stage
 * claims is "the rest" (the webhook's intake, the event loop, promise settling outside a stage's frames, the GC), the
 * same in rounds with and without a delivery but for those parts.
 *
 *   mkfifo CTL ACK
 *   perf record -D -1 --control fifo:CTL,ACK -g -F 2999 -e cpu-clock -o with.data -- \
 *     env NODE_OPTIONS="--perf-basic-prof --interpreted-frames-native-stack" \
 *     npx tsx bench/experiments/single-delivery-ab.ts --waiting 1000 --rounds 8 --only with --perf-ctl CTL --perf-ack ACK
 *   perf script -i with.data -F comm,pid,tid,ip,sym,dso > with.txt
 *   npx tsx bench/experiments/delivery-stages.ts with.txt 9000 [--hz 2999] [--within STAGE]
 *
 * The second argument is the deliveries in the file (windows × waiting: `--rounds 8` is nine windows). `--within`
 * lists the leaf functions of one stage's samples.
 */
import { parseArgs } from 'node:util';

import { readPerfScript } from '../lib/perf-script.js';

const { values: cli, positionals } = parseArgs({
  allowPositionals: true,
  options: { hz: { type: 'string', default: '2999' }, within: { type: 'string' } },
});
const [file, count] = positionals;
if (!file || !count) throw new Error('usage: delivery-stages.ts SCRIPT.txt DELIVERIES [--hz 2999] [--within STAGE]');
const deliveries = Number(count);
const periodUs = 1e6 / Number(cli.hz);

/** Stages by the code on a sample's stack (perf-basic-prof names: `JS:*name file:line:column`); the innermost wins. */
const STAGES: Array<[string, RegExp]> = [
  ['bus: the event cursor sealed (HMAC, AES, base64url)', /events\/cursor\.(ts|js)/],
  ['event stream: listener, take, finish', /events\/stream\.(ts|js)/],
  ['bus: publish loop', /events\/bus\.(ts|js)/],
  [
    'execution: the selection (graphql-jit, resolver, view, scalars)',
    /graphql-jit|mobile-id\/views|graphql\/scalars|graphql\/mobile-id|ResolverHandler|JS:[*^~]?query :3/,
  ],
  ['execution: shared (group, turn, context view, cursor on the result)', /execution\/shared\.(ts|js)/],
  ['sink: deliverable (warnings, masking)', /execution\/present\.(ts|js)/],
  ['sink: payload JSON, frames, write into the corked socket', /server\/ws\.(ts|js)/],
  ['result stream (run.ts)', /execution\/run\.(ts|js)/],
  ['graphql-ws', /graphql-ws/],
  ['ws (the library: pongs, frames read)', /node_modules\/ws\//],
];

// Each frame's symbol, without its offset and its object file.
const samples = readPerfScript(file).map((s) => ({
  ...s,
  frames: s.frames.map((f) => f.replace(/ \(.*\)$/, '').replace(/\+0x[0-9a-f]+$/, '')),
}));

// The gateway's process: the one whose main thread has the most samples (the clients' child is another process).
const byPid = new Map<number, number>();
for (const s of samples) if (s.pid === s.tid) byPid.set(s.pid, (byPid.get(s.pid) ?? 0) + 1);
const gateway = [...byPid].sort((a, b) => b[1] - a[1])[0]![0];
const main = samples.filter((s) => s.pid === gateway && s.tid === gateway);
const others = samples.filter((s) => s.pid === gateway && s.tid !== gateway);

const perStage = new Map<string, number>();
const leaves = new Map<string, number>();
for (const s of main) {
  let stage = 'the rest';
  // The corked WebSocket's write: Node's uncork and the write under ws.ts's uncork (TurboFan may inline Node's into it);
  // an HTTP response's uncork has no ws.ts frame outside it.
  const uncork = s.frames.findIndex((f) => /Writable\.uncork|clearBuffer|WriteBuffer|libc_write/.test(f));
  if (uncork !== -1 && s.frames.slice(uncork + 1).some((f) => /server\/ws\.(ts|js)/.test(f)))
    stage = 'socket: ws.ts uncork → Writable.uncork → write(2)';
  else
    outer: for (const frame of s.frames)
      for (const [name, pattern] of STAGES)
        if (pattern.test(frame)) {
          stage = name;
          break outer;
        }
  perStage.set(stage, (perStage.get(stage) ?? 0) + 1);
  if (cli.within && stage.startsWith(cli.within))
    leaves.set(s.frames[0] ?? '?', (leaves.get(s.frames[0] ?? '?') ?? 0) + 1);
}
const us = (n: number) => ((n * periodUs) / deliveries).toFixed(2).padStart(8);
console.log(
  `process ${gateway}: main thread ${us(main.length)} µs per delivery, its other threads ${us(others.length)}`,
);
for (const [stage, n] of [...perStage].sort((a, b) => b[1] - a[1])) console.log(`${us(n)}  ${stage}`);
if (cli.within) {
  console.log(`leaf functions of "${cli.within}…":`);
  for (const [leaf, n] of [...leaves].sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log(`${us(n)}  ${leaf}`);
}
