import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';

import { loadConfig } from '../../src/config/index.js';
import { startGateway } from '../../src/gateway/start.js';
import { createLogger } from '../../src/logger.js';
import { API_KEY, type BenchEnv, type ScenarioReport } from '../lib/env.js';
import { graphql } from '../lib/harness.js';
import { fmt, median } from '../lib/stats.js';

const LOOKUPS = 50;
const RESULTS_PATH = '/api/v2/verifications/results';

/** One operation with 50 `verificationResults` fields (aliases), one external id each: the N+1 shape DataLoader exists for. */
function operation(): string {
  const vars = Array.from({ length: LOOKUPS }, (_, i) => `$id${i}: ID!`).join(', ');
  const fields = Array.from(
    { length: LOOKUPS },
    (_, i) => `r${i}: verificationResults(externalIds: [$id${i}]) { externalId status }`,
  ).join('\n  ');
  return `query Results(${vars}) {\n  ${fields}\n}`;
}

interface Count {
  calls: number;
  ms: number;
  found: number;
}

/** Upstream calls of the operation, counted by the embedded verification sandbox of an in-process gateway. */
async function count(batchSize: number | null): Promise<Count> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-batch-'));
  const config = loadConfig({
    DATA_DIR: dataDir,
    GATEWAY_API_KEYS: API_KEY,
    LOG_LEVEL: 'warn',
    SANDBOX_CALLBACK_DELAY_MS: '600000',
    // 50 aliased lookups in one document: above the default abuse limits (15 aliases, 1,000 tokens), which
    // are not what this scenario measures.
    GRAPHQL_MAX_ALIASES: '100',
    GRAPHQL_MAX_TOKENS: '10000',
    GRAPHQL_MAX_COST: '1000000',
    ...(batchSize === null ? {} : { VERIFICATION_RESULTS_BATCH_SIZE: String(batchSize) }),
  });
  const logger = createLogger({ level: 'warn', destination: new Writable({ write: (_c, _e, cb) => cb() }) });
  const gw = await startGateway(config, { port: 0, host: '127.0.0.1', logger });
  try {
    const sandbox = gw.sandbox.verification;
    if (!sandbox) throw new Error('the verification sandbox is not running');
    const ids: string[] = [];
    for (let i = 0; i < LOOKUPS; i++) {
      const data = await graphql(
        gw.url,
        API_KEY,
        'mutation($input: RegisterVerificationInput!) { registerVerification(input: $input) { verification { externalId } } }',
        {
          input: {
            workflowId: 'wf-bench',
            applicant: { lastName: 'Ivanov', firstName: 'Ivan', birthDate: '1990-01-01' },
          },
        },
      );
      ids.push(data.registerVerification.verification.externalId as string);
    }
    const query = operation();
    const variables = Object.fromEntries(ids.map((id, i) => [`id${i}`, id]));
    const times: number[] = [];
    let calls = 0;
    let found = 0;
    for (let run = 0; run < 5; run++) {
      sandbox.clearRequests();
      const t0 = performance.now();
      const data = await graphql(gw.url, API_KEY, query, variables);
      times.push(performance.now() - t0);
      calls = sandbox.requests.filter((r) => r.path === RESULTS_PATH).length;
      found = Object.values(data).filter((list) => Array.isArray(list) && list[0]).length;
    }
    return { calls, ms: median(times), found };
  } finally {
    await gw.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Scenario 6: upstream calls for an operation with 50 result lookups, DataLoader batching on and off. */
export async function batching(env: BenchEnv): Promise<ScenarioReport> {
  env.log('scenario 6: batching of 50 verification result lookups');
  let on: Count;
  let off: Count;
  try {
    on = await count(null);
    off = await count(1);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    env.log(`  skipped: ${why}`);
    return {
      id: 6,
      title: 'Batching',
      markdown: `Skipped: ${why}`,
      targets: [{ target: '1 upstream call per batch', measured: 'not measured', met: null }],
    };
  }
  env.log(
    `  DataLoader on: ${on.calls} call(s), ${on.ms.toFixed(1)} ms; off: ${off.calls} calls, ${off.ms.toFixed(1)} ms`,
  );
  const markdown = [
    `One GraphQL operation with ${LOOKUPS} \`verificationResults(externalIds: [$idN])\` fields (aliases), for ${LOOKUPS} verifications registered first; ` +
      'upstream `POST /api/v2/verifications/results` calls counted by the embedded verification sandbox of a gateway in the orchestrator process ' +
      '(the calls go over loopback HTTP). "Off" is `VERIFICATION_RESULTS_BATCH_SIZE=1`: DataLoader then sends every id on its own, which is what a ' +
      'resolver without DataLoader does. Time is the median of 5 runs of the operation.',
    '',
    '| DataLoader | upstream calls | results found | operation ms |',
    '|---|---:|---:|---:|',
    `| on (batch size 100) | **${on.calls}** | ${on.found} of ${LOOKUPS} | ${fmt.ms(on.ms)} |`,
    `| off (batch size 1) | ${off.calls} | ${off.found} of ${LOOKUPS} | ${fmt.ms(off.ms)} |`,
  ].join('\n');
  return {
    id: 6,
    title: 'Batching',
    markdown,
    targets: [
      {
        target: '1 upstream call per batch (50 lookups in one operation)',
        measured: `${on.calls} with DataLoader, ${off.calls} without`,
        met: on.calls === 1,
      },
    ],
  };
}
