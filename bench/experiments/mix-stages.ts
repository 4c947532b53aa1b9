/**
 * Where the realistic mix's CPU goes (docs/decisions/112): reads `perf script` text of one mix-cpu.ts side's measured
 * window and gives each of the gateway process's samples to one part of the mix, by what is on its stack (the rules
 * below, first match wins): on the main thread the GC and V8's compiler, the keep-alive's pings, the background jobs,
 * what runs after the WAL sync (the delivery published then, the webhook's 204), the turn's COMMIT, what graphql-ws
 * reads (a subscribe, or a pong / message alone), the intake (its event-log insert apart), socket reads with no JS on
 * the stack, the event loop's poll, malloc with its caller unknown; on the other threads the GC helpers, the WAL
 * sync and checkpoint, the background compiler. Per notification: samples × the period ÷ the notifications.
 *
 *   mkfifo CTL ACK
 *   perf record -D -1 --control fifo:CTL,ACK -g -F 999 -e cpu-clock -o mix.data -- \
 *     node --perf-basic-prof --interpreted-frames-native-stack --import tsx bench/experiments/mix-cpu.ts --side \
 *     --n 10000 --rate 600 --warm 17 --window 15 --perf-ctl CTL --perf-ack ACK
 *   perf script -i mix.data -F comm,pid,tid,ip,sym,dso > mix.txt
 *   npx tsx bench/experiments/mix-stages.ts mix.txt PID NOTIFICATIONS [--hz 999] [--within PART] [--intake]
 *
 * PID is the side's (it says it on stderr), NOTIFICATIONS its `delivered`. `--within` lists the leaf frames of one
 * part's samples; `--intake` splits the intake's parts by the innermost of its stages on the stack.
 *
 * perf-basic-prof's map is append-only: JIT code that moved keeps the name of what was first at its address (decision
 * 108), so a frame's name can be another function's (in the mix, Node's `writeOrBuffer` read as an OpenTelemetry
 * file). The rules match on several frames of a stack and on the native frames, which keep their names.
 */
import { parseArgs } from 'node:util';

import { readPerfScript } from '../lib/perf-script.js';

const { values: cli, positionals } = parseArgs({
  allowPositionals: true,
  options: { hz: { type: 'string', default: '999' }, within: { type: 'string' }, intake: { type: 'boolean' } },
});
const [file, pidText, count] = positionals;
if (!file || !pidText || !count)
  throw new Error('usage: mix-stages.ts SCRIPT.txt PID NOTIFICATIONS [--hz 999] [--within PART] [--intake]');
const perSampleUs = 1e6 / Number(cli.hz) / Number(count);

const GC =
  /Heap::CollectGarbage|Heap::Scavenge|ScavengerCollector|Scavenger::|MarkCompactCollector|IncrementalMarking|ConcurrentMarking|PerformGarbageCollection|ArrayBufferSweeper|MinorMarkCompact|GCTracer|MemoryAllocator::|GlobalHandles::InvokeFirstPassWeakCallbacks|GlobalHandles::PostGarbageCollection/;
const COMPILE =
  /v8::internal::Compiler::|BytecodeGenerator|Runtime_CompileLazy|Runtime_CompileOptimized|maglev::|compiler::Pipeline|OptimizingCompileDispatcher|baseline::|Parser::ParseProgram|Parser::ParseFunction|Builtins_CompileLazy/;

type Sample = { tid: number; frames: string[] };
const has = (s: Sample, re: RegExp) => s.frames.some((f) => re.test(f));

function mainPart(s: Sample): string {
  if (has(s, GC)) return 'GC (its main-thread part)';
  if (has(s, COMPILE)) return "V8's compiler";
  if (has(s, /server\/keep-alive/)) return "keep-alive: the sweep's pings";
  if (has(s, /gateway\/jobs/)) return 'background jobs';
  if (has(s, /fs::AfterNoArgs|FSReqCallback/)) {
    // After the WAL sync (its fdatasync's callback): the commits that waited for it go on.
    if (
      has(s, /events\/(bus|stream|cursor|index)|execution\/|server\/ws|graphql-jit|mobile-id\/views|graphql\/scalars/)
    )
      return 'delivery (published after the WAL sync)';
    if (has(s, /_http_outgoing|server\/webhooks|_http_server|server\/http|server\/respond|mobile-id\/intake/))
      return 'intake: the 204, after the WAL sync';
    if (has(s, /sqlite-dialect/)) return "store: the WAL sync's bookkeeping";
    return 'after the WAL sync: other (promise turns)';
  }
  if (has(s, /CheckImmediate/) && has(s, /sqlite-dialect|better_sqlite3/)) return "store: the turn's COMMIT";
  if (has(s, /graphql-ws|node_modules\/ws\/|server\/ws(-protocol)?\.js/)) {
    if (has(s, /execution\/|events\/stream|node_modules\/graphql\//)) return 'subscribe (graphql-ws to the execution)';
    return 'graphql-ws messages read alone (pongs, a subscribe parsed)';
  }
  if (
    has(
      s,
      /mobile-id\/intake|server\/webhooks|_http_common|_http_server|_http_incoming|_http_outgoing|server\/http|llhttp|Parser::/,
    )
  ) {
    if (has(s, /events\/log|sqlite-dialect|better_sqlite3/)) return "intake: the event log's insert";
    return 'intake: HTTP, body, decode, verify, seal, digest';
  }
  if (has(s, /RunForegroundTask/)) return 'foreground tasks (other)';
  if (has(s, /OnUvRead|uv__stream_io|ksys_read|tcp_recvmsg/)) return 'socket reads (no JS on the stack)';
  if (has(s, /uv__io_poll|epoll/)) return "the event loop's poll";
  if (has(s, /malloc|_int_free|unlink_chunk|cfree/)) return 'malloc/free (caller unknown)';
  if (has(s, /processTicksAndRejections|RunMicrotasks/)) return 'microtasks (what started them unknown)';
  return 'other';
}

function threadPart(s: Sample): string {
  if (has(s, GC)) return 'GC helper threads';
  if (has(s, /fdatasync|walCheckpoint|better_sqlite3|sqlite3/)) return 'WAL sync and checkpoint (worker threads)';
  if (has(s, COMPILE)) return "V8's compiler (background)";
  if (has(s, /uv_fs|uv__fs|pwrite|ext4|jbd2/)) return "fs (libuv's pool)";
  return 'other threads';
}

/** The intake's stages, innermost first on a stack wins. */
const INTAKE: Array<[string, RegExp]> = [
  ['seal (AES-256-GCM, its IV)', /secret\.(ts|js).*seal|JS:\S*seal |createCipherWithIV|Cipheriv|nextIv|CipherBase/],
  ['digest (HMAC of the canonical body)', /JS:\S*digest |Hmac|canonicalJson/],
  ['fingerprint', /src\/fingerprint\./],
  ["wire: the body's JSON, the id_token's decode (jose), zod", /mobile-id\/wire\.|jose\/|zod\//],
  ['verify', /mobile-id\/verify\./],
  ["event log: the row's JSON, SQLite's insert", /events\/log\.|sqlite-dialect|better_sqlite3|sqlite3/],
  ['body read', /webhooks\/body\./],
  ['receive (the rest)', /mobile-id\/intake\./],
  ['webhook handler (the rest)', /server\/webhooks\/mobile-id\./],
  ['server/http, respond', /server\/http\.|server\/respond\./],
  ["Node's HTTP (parse, request, response)", /_http_|llhttp|Parser::/],
];

const pid = Number(pidText);
const samples: Sample[] = readPerfScript(file).filter((s) => s.pid === pid);

const parts = new Map<string, number>();
const within = new Map<string, number>();
for (const s of samples) {
  const part = s.tid === pid ? `main: ${mainPart(s)}` : `threads: ${threadPart(s)}`;
  parts.set(part, (parts.get(part) ?? 0) + 1);
  if (cli.within && part.endsWith(cli.within)) {
    const leaf = (s.frames[0] ?? '?').replace(/ \(\/tmp\/perf-\d+\.map\)/, '').slice(0, 110);
    within.set(leaf, (within.get(leaf) ?? 0) + 1);
  }
  if (cli.intake && part.startsWith('main: intake')) {
    let stage = 'other';
    for (const f of s.frames) {
      const hit = INTAKE.find(([, re]) => re.test(f));
      if (hit) {
        stage = hit[0];
        break;
      }
    }
    const key = `${part.slice(6)} / ${stage}`;
    within.set(key, (within.get(key) ?? 0) + 1);
  }
}
const rows = (m: Map<string, number>) =>
  [...m]
    .sort((a, b) => b[1] - a[1])
    .map(([k, n]) => `| ${k} | ${n} | ${(n * perSampleUs).toFixed(1)} |`)
    .join('\n');
const total = samples.length;
process.stdout.write(
  `${total} samples of process ${pid}: ${(total * perSampleUs).toFixed(1)} µs per notification\n\n` +
    `| part | samples | µs per notification |\n|---|---:|---:|\n${rows(parts)}\n`,
);
if (within.size)
  process.stdout.write(`\n| within | samples | µs per notification |\n|---|---:|---:|\n${rows(within)}\n`);
