/**
 * The event log's append and newest-event read through the real `EventLog` and store of two checkouts, in one process
 * (this one and `--base`, e.g. `git archive` of another commit with a node_modules link): each side opens its own
 * store (its migrations, its group commit, SQLITE_SYNCHRONOUS=FULL, the data directory on /dev/shm), holding `--prefill`
 * mobile-ID successes with random auth_req_ids, then rounds interleaved (A, B, B, A, …) of `--n` appends `--inflight`
 * at a time (8: commits grouped; 1: each append commits alone), then as many newest-event reads of keys just written.
 * µs of process CPU per append and per read (a pause after each round lets the checkpoint worker finish its copy).
 *
 *   npx tsx bench/experiments/events-index-ab.ts --base /tmp/base [--rounds 10] [--n 4000] [--inflight 8] [--prefill 100000]
 */
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';

import type { EventLog } from '../../src/events/log.js';
import type { openStore } from '../../src/store/index.js';
import { sampleAppend } from './sample-event.js';

const { values: cli } = parseArgs({
  options: {
    base: { type: 'string' },
    rounds: { type: 'string', default: '10' },
    n: { type: 'string', default: '4000' },
    inflight: { type: 'string', default: '8' },
    prefill: { type: 'string', default: '100000' },
  },
});
if (!cli.base) throw new Error('--base <checkout> is required');
const n = Number(cli.n);
const inflight = Number(cli.inflight);

interface Side {
  log: EventLog;
  close(): Promise<void>;
  dir: string;
}

async function open(checkout: string): Promise<Side> {
  const store: typeof import('../../src/store/index.js') = await import(path.resolve(checkout, 'src/store/index.ts'));
  const events: typeof import('../../src/events/log.js') = await import(path.resolve(checkout, 'src/events/log.ts'));
  const logger: typeof import('../../src/logger.js') = await import(path.resolve(checkout, 'src/logger.ts'));
  const dir = fs.mkdtempSync(path.join('/dev/shm', 'events-index-ab-'));
  const s = await (store.openStore as typeof openStore)({
    dataDir: dir,
    logger: logger.createLogger({ level: 'silent' }),
    sqliteSynchronous: 'FULL',
  });
  return { log: new events.EventLog(s.db, 86_400_000, s.dialect, s.execute), close: () => s.close(), dir };
}

/** `count` appends of fresh mobile-ID successes, `width` at a time; the keys written. */
async function append(log: EventLog, count: number, width: number): Promise<string[]> {
  const keys: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < count) {
      next++;
      const event = sampleAppend();
      const { status } = await log.append(event);
      if (status !== 'created') throw new Error(status);
      keys.push(event.key);
    }
  };
  await Promise.all(Array.from({ length: width }, worker));
  return keys;
}

const sides = { base: await open(cli.base), head: await open(process.cwd()) };
for (const s of Object.values(sides)) await append(s.log, Number(cli.prefill), 64);
const perAppend: Record<keyof typeof sides, number[]> = { base: [], head: [] };
const perRead: Record<keyof typeof sides, number[]> = { base: [], head: [] };
const cpu = () => {
  const c = process.cpuUsage();
  return c.user + c.system;
};
for (let r = 0; r < Number(cli.rounds); r++) {
  const order: (keyof typeof sides)[] = r % 2 ? ['head', 'base'] : ['base', 'head'];
  for (const name of order) {
    const { log } = sides[name];
    await sleep(700);
    const c0 = cpu();
    const keys = await append(log, n, inflight);
    perAppend[name].push((cpu() - c0) / n);
    await sleep(700);
    const r0 = cpu();
    for (const key of keys) if (!(await log.latest('mobile-id', key))) throw new Error(`no event for ${key}`);
    perRead[name].push((cpu() - r0) / keys.length);
  }
  console.log(
    `round ${r}: append base ${perAppend.base.at(-1)!.toFixed(1)} µs, head ${perAppend.head.at(-1)!.toFixed(1)} µs; ` +
      `read base ${perRead.base.at(-1)!.toFixed(2)} µs, head ${perRead.head.at(-1)!.toFixed(2)} µs`,
  );
}
const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
const summary = (what: string, figures: Record<keyof typeof sides, number[]>) => {
  const base = figures.base.slice(1);
  const head = figures.head.slice(1);
  const ratios = head.map((h, i) => h / base[i]!).sort((x, y) => x - y);
  return (
    `${what}: base ${median(base).toFixed(2)} µs, head ${median(head).toFixed(2)} µs (medians); head/base median ` +
    `${median(ratios).toFixed(3)}, range ${ratios[0]!.toFixed(3)}..${ratios.at(-1)!.toFixed(3)} over ${ratios.length} rounds`
  );
};
console.log(`inflight ${inflight}, prefill ${cli.prefill}`);
console.log(summary('append', perAppend));
console.log(summary('newest event of a key', perRead));
for (const s of Object.values(sides)) {
  await s.close();
  fs.rmSync(s.dir, { recursive: true, force: true });
}
