/**
 * graphql-js's execute against graphql-jit's compiled form for scenario 1's createNetwork (docs/decisions/087), in one
 * process, rounds interleaved: the gateway's schema with the createNetwork resolver answering a stored payload
 * (an async function, as the real resolver is), so that only the execution differs. Per round of `--n` executions
 * of each variant, the process's CPU per execution (process.cpuUsage).
 *
 *   A  execute (graphql-js), what the direct path runs for a mutation today
 *   B  getVariableValues (graphql-js) then the compiled query, as the compiled store-only queries run (decision 035)
 *   C  the compiled query alone (its own variable coercion)
 *   D  the variables check made once for the operation (src/execution/variables.ts), then the compiled query: what
 *      the direct path runs for a creation with GRAPHQL_COMPILED_MUTATIONS and GRAPHQL_VARIABLES_CHECK (decision 099)
 *
 *   npx tsx bench/experiments/compiled-mutation-ab.ts [--rounds 12] [--n 20000]
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { execute, getOperationAST, getVariableValues, parse, type GraphQLSchema } from 'graphql';
import { compileQuery, isCompiledQuery } from 'graphql-jit';

import { viewAs } from '../../src/cloud/views.js';
import { variablesCheck } from '../../src/execution/variables.js';
import { gatewaySchema } from '../../src/gateway/pipeline.js';
import { CREATE_NETWORK } from '../scenarios/mutation.js';

const { values: cli } = parseArgs({
  options: { rounds: { type: 'string', default: '12' }, n: { type: 'string', default: '20000' } },
});
const rounds = Number(cli.rounds);
const n = Number(cli.n);

const schema: GraphQLSchema = gatewaySchema();
const field = schema.getMutationType()!.getFields()['createNetwork']!;
const projectId = randomUUID();
field.resolve = async (_p, args: { idempotencyKey?: string }) => {
  await null;
  return {
    network: viewAs('network', {
      id: randomUUID(),
      kind: 'network',
      projectId,
      parentId: projectId,
      title: 'bench-net',
      spec: { projectId, title: 'bench-net' },
      response: {},
      idempotencyKey: args.idempotencyKey ?? null,
      createdBy: 'app',
      createdAt: new Date(),
    }),
    idempotencyKey: args.idempotencyKey,
    upstreamIdempotencyKey: randomUUID(),
    replayed: false,
  };
};
const document = parse(CREATE_NETWORK);
const operation = getOperationAST(document)!;
const compiled = compileQuery(schema, document);
if (!isCompiledQuery(compiled)) throw new Error('not compiled');
const check = variablesCheck(schema, operation.variableDefinitions!)!;
const variables = () => ({ input: { projectId, title: 'bench-net' }, key: randomUUID() });

const variants: Record<string, () => Promise<unknown>> = {
  A: async () => execute({ schema, document, contextValue: {}, variableValues: variables() }),
  B: async () => {
    const v = variables();
    const coerced = getVariableValues(schema, operation.variableDefinitions!, v);
    if (coerced.errors) throw new Error('variables');
    return compiled.query(undefined, {}, v);
  },
  C: async () => compiled.query(undefined, {}, variables()),
  D: async () => {
    const v = variables();
    if (!check(v)) throw new Error('variables');
    return compiled.query(undefined, {}, v);
  },
};
// The same answer from each.
const texts = await Promise.all(
  Object.values(variants).map(async (run) => JSON.stringify(await run()).replace(/"[0-9a-f-]{36}"/g, '"U"')),
);
if (new Set(texts).size !== 1) throw new Error(`answers differ:\n${texts.join('\n')}`);

async function round(run: () => Promise<unknown>): Promise<number> {
  const before = process.cpuUsage();
  for (let i = 0; i < n; i += 16) await Promise.all(Array.from({ length: 16 }, run));
  const used = process.cpuUsage(before);
  return (used.user + used.system) / n;
}
const figures: Record<string, number[]> = { A: [], B: [], C: [], D: [] };
for (let r = 0; r < rounds; r++) {
  for (const name of r % 2 ? ['D', 'C', 'B', 'A'] : ['A', 'B', 'C', 'D'])
    figures[name]!.push(await round(variants[name]!));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const drop = Math.min(2, rounds - 1);
for (const [name, xs] of Object.entries(figures)) {
  const kept = xs.slice(drop);
  console.log(
    `${name}: median ${median(kept).toFixed(2)} µs  range ${Math.min(...kept).toFixed(2)}–${Math.max(...kept).toFixed(2)}`,
  );
}
const pairs = (x: string) => figures[x]!.slice(drop).map((v, i) => figures['A']!.slice(drop)[i]! - v);
for (const x of ['B', 'C', 'D']) {
  const d = pairs(x);
  console.log(
    `A−${x}: median ${median(d).toFixed(2)} µs  range ${Math.min(...d).toFixed(2)}–${Math.max(...d).toFixed(2)}`,
  );
}
