/**
 * `npm run bench`: starts the upstream stub, the gateway (twice: SQLITE_SYNCHRONOUS FULL and NORMAL), the
 * baseline, for scenario 1 the durable baseline and the peers (Hive Gateway, Apollo Server 5), and the
 * load generator as separate processes pinned to CPUs, runs the scenarios and writes the results into
 * bench/README.md between the `results` markers.
 *
 * Options (after `npm run bench --`):
 *   --quick            short measurements (smoke test of the harness; figures are not meaningful)
 *   --only 1,3         run only these scenarios
 *   --duration <s>     seconds per measurement (default 8)
 *   --rounds <n>       alternating rounds per scenario (default 2)
 *   --no-normal        do not start the SQLITE_SYNCHRONOUS=NORMAL gateway
 *   --upstream sandbox use the project's cloud sandbox in fast mode instead of the minimal stub
 *   --profile          run the gateway (and the load generator) with --cpu-prof; profiles land in bench/profiles/
 *   --compare name=dir another checkout of the gateway (e.g. the code before an optimization, from
 *                      `git archive`) measured as one more FULL target in scenarios 1 and 2; repeatable
 *   --node-args name=args  this checkout once more, its gateway started with these node options (e.g.
 *                      "semi64=--max-semi-space-size=64"), measured as one more FULL target like --compare; repeatable
 *   --no-write         print the results instead of writing bench/README.md
 *   --from source      run each gateway's TypeScript under tsx instead of its build (default: built, as `npm start`
 *                      runs it: `tsc -p tsconfig.build.json` into each checkout's dist/ at the start of the run)
 *   --intake-max <n>   notifications/s that scenario 7's rates are shares of, when scenario 4 does not run
 *                      (without it, 7 measures a short intake maximum first)
 *
 * Scenario 9 (10,000 waiting subscriptions: their idle CPU, and the marginal CPU of one delivery) runs after 7.
 *
 * Scenario 8 (three replicas on one embedded PostgreSQL, and the ceiling of LISTEN/NOTIFY) runs only when named
 * in --only: it takes minutes the 10-minute suite does not have.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

import { buildGateway, startNodeArgs } from './lib/build.js';
import {
  gatewayEnv,
  NOTIFICATION_TOKEN,
  UPSTREAM_TOKEN,
  type BenchEnv,
  type BenchOptions,
  type GatewayProc,
  type ScenarioReport,
} from './lib/env.js';
import { Loadgen } from './lib/harness.js';
import { startMutationReferences } from './lib/mutation-references.js';
import { placement as detectPlacement, freePort, pin, ROOT, spawnNode, type Proc } from './lib/processes.js';
import { batching } from './scenarios/batching.js';
import { fanout } from './scenarios/fanout.js';
import { addedLatency } from './scenarios/latency.js';
import { subscriptionMix, type IntakeMax } from './scenarios/mix.js';
import { mutationBody, mutationThroughput } from './scenarios/mutation.js';
import { queryThroughput } from './scenarios/query.js';
import { replicas } from './scenarios/replicas.js';
import { singleDelivery } from './scenarios/single-delivery.js';
import { webhookIngest } from './scenarios/webhook.js';

const { values: cli } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    only: { type: 'string' },
    duration: { type: 'string' },
    rounds: { type: 'string' },
    'no-normal': { type: 'boolean', default: false },
    upstream: { type: 'string', default: 'stub' },
    profile: { type: 'boolean', default: false },
    compare: { type: 'string', multiple: true },
    'node-args': { type: 'string', multiple: true },
    'no-write': { type: 'boolean', default: false },
    'intake-max': { type: 'string' },
    from: { type: 'string', default: 'built' },
  },
});
if (cli.from !== 'built' && cli.from !== 'source') {
  process.stderr.write(`--from must be built or source, got ${JSON.stringify(cli.from)}\n`);
  process.exit(2);
}

/** Each checkout's gateway script: its build (compiled once per run), or its source under tsx with `--from source`. */
const scripts = new Map<string, string>();
function gatewayScript(checkout: string): string {
  let script = scripts.get(checkout);
  if (script === undefined) {
    script = cli.from === 'source' ? 'src/main.ts' : buildGateway(checkout);
    scripts.set(checkout, script);
  }
  return script;
}

const options: BenchOptions = cli.quick
  ? { durationMs: 2_000, warmupMs: 500, rounds: 1, connections: 32 }
  : { durationMs: Number(cli.duration ?? 8) * 1000, warmupMs: 3_000, rounds: Number(cli.rounds ?? 2), connections: 32 };
const only = cli.only ? new Set(cli.only.split(',').map((s) => Number(s.trim()))) : null;
const wants = (n: number) => only === null || only.has(n);
if (cli['intake-max'] !== undefined && !(Number(cli['intake-max']) > 0)) {
  process.stderr.write(
    `--intake-max must be a positive number of notifications/s, got ${JSON.stringify(cli['intake-max'])}\n`,
  );
  process.exit(2);
}

const started = Date.now();
const log = (line: string) =>
  process.stdout.write(`[${((Date.now() - started) / 1000).toFixed(0).padStart(3)} s] ${line}\n`);

async function startGatewayProc(
  name: string,
  synchronous: 'FULL' | 'NORMAL',
  root: string,
  stubUrl: string,
  cpus: string | null,
  checkout: string = ROOT,
  nodeArgs: string[] = [],
  extraEnv: Record<string, string> = {},
): Promise<GatewayProc> {
  const dataDir = path.join(root, name);
  fs.mkdirSync(dataDir, { recursive: true });
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  // One folder per gateway: every thread (the tsx loader's too) writes its own profile.
  const profileDir = path.join(ROOT, 'bench', 'profiles', name.replace(/\W+/g, '-').replace(/^-|-$/g, ''));
  if (cli.profile) fs.mkdirSync(profileDir, { recursive: true });
  const proc = await spawnNode(name, {
    script: gatewayScript(checkout),
    cwd: checkout,
    cpus,
    nodeArgs: [
      ...startNodeArgs(checkout),
      ...nodeArgs,
      ...(cli.profile ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : []),
    ],
    env: { ...gatewayEnv({ port, dataDir, stubUrl }), SQLITE_SYNCHRONOUS: synchronous, ...extraEnv },
    readiness: { url: `${origin}/readyz` },
  });
  return { name, proc, origin, dataDir, synchronous, checkout };
}

function machine(): string {
  const cpuinfo = fs.readFileSync('/proc/cpuinfo', 'utf8');
  const model = /^model name\s*:\s*(.*)$/m.exec(cpuinfo)?.[1]?.trim() ?? os.cpus()[0]?.model ?? 'unknown';
  const mhz = /^cpu MHz\s*:\s*(.*)$/m.exec(cpuinfo)?.[1]?.trim();
  // os.cpus(), not availableParallelism(): this process is pinned to one core by now.
  return `${os.cpus().length} × ${model}${mhz ? ` @ ${Math.round(Number(mhz))} MHz` : ''}, ${Math.round(os.totalmem() / 2 ** 30)} GiB RAM, Linux ${os.release()}`;
}

function render(
  reports: ScenarioReport[],
  env: { placement: string; upstream: string; elapsed: number; normal: boolean },
): string {
  const date = new Date().toISOString().replace('T', ' ').slice(0, 16) + ' UTC';
  const lines = [
    `Run of ${date} · Node ${process.version} · ${machine()} · \`nproc\` = ${os.cpus().length}`,
    '',
    `Placement: ${env.placement}. Upstream: ${env.upstream}. Gateway: ${cli.from === 'source' ? `\`${['node', ...startNodeArgs(ROOT), '--import tsx src/main.ts'].join(' ')}\` (--from source)` : `\`${['node', ...startNodeArgs(ROOT), 'dist/src/main.js'].join(' ')}\` (as npm start runs it, compiled by tsc for this run)`}, NODE_ENV=production, LOG_LEVEL=warn, SQLite in a temporary DATA_DIR on the local disk, ` +
      `SQLITE_SYNCHRONOUS=FULL${env.normal ? ' (and a second gateway with NORMAL)' : ''}. ` +
      `${options.durationMs / 1000} s per measurement, ${options.rounds} alternating rounds; the whole suite took ${Math.round(env.elapsed)} s.`,
    '',
    '### Targets',
    '',
    '| target | measured | met |',
    '|---|---|---|',
    ...reports.flatMap((r) =>
      r.targets.map((t) => `| ${t.target} | ${t.measured} | ${t.met === null ? 'n/a' : t.met ? 'yes' : '**no**'} |`),
    ),
    '',
    ...reports.flatMap((r) => [`### ${r.id}. ${r.title}`, '', r.markdown, '']),
  ];
  return lines.join('\n');
}

function writeReadme(block: string): void {
  const file = path.join(ROOT, 'bench', 'README.md');
  const start = '<!-- results:start -->';
  const end = '<!-- results:end -->';
  const current = fs.existsSync(file)
    ? fs.readFileSync(file, 'utf8')
    : `# Benchmarks\n\n## Results\n\n${start}\n${end}\n`;
  const i = current.indexOf(start);
  const j = current.indexOf(end);
  const next =
    i === -1 || j === -1
      ? `${current.trimEnd()}\n\n## Results\n\n${start}\n${block}\n${end}\n`
      : `${current.slice(0, i + start.length)}\n${block}\n${current.slice(j)}`;
  fs.writeFileSync(file, next);
}

async function main(): Promise<void> {
  const place = detectPlacement();
  if (place.pinned) pin(process.pid, place.driver!);
  log(`placement: ${place.description}`);
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-bench-'));
  const procs: Proc[] = [];
  const reports: ScenarioReport[] = [];
  try {
    const stubProc = await spawnNode('upstream', {
      script: 'bench/servers/upstream.ts',
      args: cli.upstream === 'sandbox' ? ['--sandbox'] : [],
      cpus: place.driver,
      readiness: { line: true },
    });
    procs.push(stubProc);
    const stub = Object.assign(stubProc, { url: String(stubProc.ready.url) });
    log(`upstream (${cli.upstream}) at ${stub.url}`);

    const gateway = await startGatewayProc('gateway (FULL)', 'FULL', root, stub.url, place.server);
    procs.push(gateway.proc);
    const gatewayNormal = cli['no-normal']
      ? null
      : await startGatewayProc('gateway (NORMAL)', 'NORMAL', root, stub.url, place.server);
    if (gatewayNormal) procs.push(gatewayNormal.proc);
    const others: GatewayProc[] = [];
    for (const spec of cli.compare ?? []) {
      const [label, dir] = spec.includes('=')
        ? [spec.slice(0, spec.indexOf('=')), spec.slice(spec.indexOf('=') + 1)]
        : [path.basename(spec), spec];
      const other = await startGatewayProc(label!, 'FULL', root, stub.url, place.server, path.resolve(dir!));
      procs.push(other.proc);
      others.push(other);
    }
    for (const spec of cli['node-args'] ?? []) {
      const at = spec.indexOf('=');
      if (at < 1) throw new Error(`--node-args wants name=options, got ${JSON.stringify(spec)}`);
      const other = await startGatewayProc(
        spec.slice(0, at),
        'FULL',
        root,
        stub.url,
        place.server,
        ROOT,
        spec
          .slice(at + 1)
          .split(/\s+/)
          .filter(Boolean),
      );
      procs.push(other.proc);
      others.push(other);
    }
    log(`gateway at ${gateway.origin}${gatewayNormal ? `, NORMAL gateway at ${gatewayNormal.origin}` : ''}`);

    const baselineDir = path.join(root, 'baseline');
    fs.mkdirSync(baselineDir);
    const baselineProc = await spawnNode('baseline', {
      script: 'bench/servers/baseline.ts',
      nodeArgs: startNodeArgs(ROOT),
      args: [
        '--upstream',
        stub.url,
        '--token',
        UPSTREAM_TOKEN,
        '--gateway-db',
        path.join(gateway.dataDir, 'gateway.sqlite'),
        '--data-dir',
        baselineDir,
        '--synchronous',
        'FULL',
        '--notification-token',
        NOTIFICATION_TOKEN,
      ],
      cpus: place.server,
      readiness: { line: true },
    });
    procs.push(baselineProc);
    const baseline = Object.assign(baselineProc, { url: String(baselineProc.ready.url) });
    const mutationRefs = wants(1)
      ? await startMutationReferences({ stubUrl: stub.url, root, cpus: place.server, log })
      : null;
    if (mutationRefs) procs.push(...mutationRefs.procs);

    const loadgenProfiles = path.join(ROOT, 'bench', 'profiles', 'loadgen');
    if (cli.profile) fs.mkdirSync(loadgenProfiles, { recursive: true });
    const lg = await Loadgen.start(place.driver, cli.profile ? ['--cpu-prof', '--cpu-prof-dir', loadgenProfiles] : []);
    procs.push(lg.proc);
    const env: BenchEnv = {
      options,
      placement: place,
      lg,
      stub,
      gateway,
      gatewayNormal,
      others,
      baseline,
      mutationRefs,
      driverProcs: [stub, lg.proc],
      log,
    };

    if (wants(1) || wants(2)) {
      // Scenario 2's rates are shares of scenario 1's baseline maximum, so 2 runs 1 first.
      const body = await mutationBody(env);
      const s1 = await mutationThroughput(env, body);
      if (wants(1)) reports.push(s1.report);
      if (wants(2)) {
        reports.push(
          await addedLatency(
            env,
            body,
            s1.figures.baselineRps,
            s1.figures.gatewayRps,
            cli.quick ? 2_000 : Math.min(options.durationMs, 5_000),
          ),
        );
      }
    }
    if (wants(3)) reports.push(await queryThroughput(env));
    // Scenario 7's rates are shares of the intake maximum: scenario 4's FULL figure, --intake-max, or (in 7) a short measurement.
    let intakeMax: IntakeMax | null = cli['intake-max']
      ? { rps: Number(cli['intake-max']), source: '`--intake-max`' }
      : null;
    if (wants(4)) {
      const s4 = await webhookIngest(env);
      reports.push(s4.report);
      if (intakeMax === null && s4.figures.gatewayRps !== null)
        intakeMax = { rps: s4.figures.gatewayRps, source: "scenario 4's FULL gateway in this run" };
    }
    if (wants(5)) {
      reports.push(
        await fanout(env, async (name, checkout) =>
          startGatewayProc(name, 'FULL', root, stub.url, place.server, checkout),
        ),
      );
    }
    if (wants(6)) reports.push(await batching(env));
    if (wants(7)) reports.push(await subscriptionMix(env, intakeMax));
    if (wants(9)) reports.push(await singleDelivery(env));
    if (only?.has(8))
      reports.push(
        await replicas(env, (name, extra) =>
          startGatewayProc(name, 'FULL', root, stub.url, place.server, ROOT, [], extra),
        ),
      );

    const elapsed = (Date.now() - started) / 1000;
    const block = render(reports, {
      placement: place.description,
      upstream:
        cli.upstream === 'sandbox'
          ? 'the cloud sandbox in fast mode (bench/servers/upstream.ts --sandbox)'
          : 'minimal stub (bench/servers/upstream.ts)',
      elapsed,
      normal: gatewayNormal !== null,
    });
    if (cli['no-write'] || cli.quick) process.stdout.write(`\n${block}\n`);
    else {
      writeReadme(block);
      log('results written to bench/README.md');
    }
  } finally {
    for (const p of procs.reverse()) await p.stop().catch(() => undefined);
    fs.rmSync(root, { recursive: true, force: true });
    log(`done in ${Math.round((Date.now() - started) / 1000)} s`);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
