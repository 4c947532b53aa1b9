// graphql-js's own errors during execution are unexpected errors like any other (docs/contract.md, Error codes): a
// stored row that breaks the schema's promise (a value its enum cannot represent, a null in a non-null field) reaches
// the client as INTERNAL_SERVER_ERROR with nothing of graphql-js's message, its path and locations kept, on POST
// /graphql (the direct path, compiled, and Apollo's pipeline), GET, graphql-ws, SSE and MCP; the log has the original
// with the request id. Errors of the request itself (parse, validation, variables) keep their words:
// test/execution/bad-variables-every-transport.test.ts and rules-every-transport.test.ts.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { M, ok } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mcpClient, type TestMcpClient } from '../helpers/mcp.js';
import { operationOver } from '../helpers/operation.js';

const KEY = 'masking-execution-errors-key-01';
type Transport = 'POST direct' | 'POST Apollo' | 'GET' | 'graphql-ws' | 'SSE' | 'MCP';
const TRANSPORTS: readonly Transport[] = ['POST direct', 'POST Apollo', 'GET', 'graphql-ws', 'SSE', 'MCP'];

interface Broken {
  readonly name: string;
  /** What the stored network's spec is changed to (SQLite's json_set / json_remove on its JSON text). */
  readonly breakRow: (db: TestGateway['gateway']['services']['store']['db'], id: string) => Promise<unknown>;
  readonly field: string;
  /** graphql-js's words for it, which no client may read. */
  readonly original: string;
}

const CASES: readonly Broken[] = [
  {
    name: 'a stored value its enum cannot represent',
    breakRow: (db, id) =>
      sql`update resources set spec = json_set(spec, '$.defaultFirewallAction', 'DENY_7f3a') where id = ${id}`.execute(
        db,
      ),
    field: 'defaultFirewallAction',
    original: 'Enum "FirewallAction" cannot represent value: "DENY_7f3a"',
  },
  {
    name: 'a stored row without a non-null field',
    breakRow: (db, id) => sql`update resources set spec = json_remove(spec, '$.title') where id = ${id}`.execute(db),
    field: 'title',
    original: 'Cannot return null for non-nullable field Network.title.',
  },
];

let direct: TestGateway;
let apollo: TestGateway;
let mcp: TestMcpClient;
/** Per gateway and case: the project whose one network's row is broken that way. */
const projects = new Map<TestGateway, string[]>();

beforeAll(async () => {
  direct = await startTestGateway({ GATEWAY_API_KEYS: KEY });
  apollo = await startTestGateway({ GATEWAY_API_KEYS: KEY }, { testing: { directPath: false } });
  for (const gw of [direct, apollo]) {
    const ids: string[] = [];
    for (const c of CASES) {
      const projectId = (await ok(gw, M.project, { input: { name: c.field, description: '' } }, KEY)).project.id;
      const input = { projectId, title: 'net-1', bandwidthMbps: 200 };
      const networkId = (await ok(gw, M.network, { input }, KEY)).network.id;
      await c.breakRow(gw.gateway.services.store.db, networkId);
      ids.push(projectId);
    }
    projects.set(gw, ids);
  }
  mcp = await mcpClient(direct, { key: KEY });
}, 60_000);
afterAll(async () => {
  await mcp?.close();
  await direct?.close();
  await apollo?.close();
});

/** How each transport's operation is sent. */
const VIA = { 'POST direct': 'post', 'POST Apollo': 'post', GET: 'get', 'graphql-ws': 'ws', SSE: 'sse' } as const;

/** One operation over `transport`: the raw text the client received, its errors, and the HTTP request id. */
async function once(
  transport: Transport,
  query: string,
  projectId: string,
): Promise<{ raw: string; errors: any[]; requestId?: string }> {
  if (transport === 'MCP') {
    const result = await mcp.call('project', { id: projectId });
    return { raw: JSON.stringify(result), errors: result.structuredContent?.errors ?? [] };
  }
  const answer = await operationOver(VIA[transport], transport === 'POST Apollo' ? apollo : direct, KEY, { query });
  return { ...answer, errors: answer.errors ?? [] };
}

/** The log lines of masked errors whose original is `original`. */
function maskedLines(gw: TestGateway, original: string): Array<{ requestId?: string; err: { message: string } }> {
  return gw
    .logs()
    .split('\n')
    .filter((l) => l.includes('unexpected error in a GraphQL operation'))
    .map((l) => JSON.parse(l))
    .filter((l) => l.err?.message === original);
}

describe.each(CASES.map((c, i) => ({ ...c, i })))('graphql-js failing to complete $name', (c) => {
  it.each(TRANSPORTS)(
    'over %s is INTERNAL_SERVER_ERROR with the generic message and its path, and the log has the original with the request id',
    async (transport) => {
      const gw = transport === 'POST Apollo' ? apollo : direct;
      const projectId = projects.get(gw)![c.i]!;
      const query = `{ project(id: "${projectId}") { id networks { id ${c.field} } } }`;
      const before = maskedLines(gw, c.original).length;
      const { raw, errors, requestId } = await once(transport, query, projectId);
      if (transport === 'MCP') {
        expect(errors, raw).toEqual([{ message: 'Internal server error', code: 'INTERNAL_SERVER_ERROR' }]);
      } else {
        expect(errors, raw).toEqual([
          {
            message: 'Internal server error',
            locations: [{ line: 1, column: query.indexOf(c.field, query.indexOf('networks')) + 1 }],
            path: ['project', 'networks', 0, c.field],
            extensions: { code: 'INTERNAL_SERVER_ERROR' },
          },
        ]);
      }
      for (const leaked of [c.original, 'cannot represent', 'non-nullable', 'DENY_7f3a'])
        expect(raw).not.toContain(leaked);
      const logged = maskedLines(gw, c.original).slice(before);
      expect(logged, gw.logs()).toHaveLength(1);
      const prefix = { 'graphql-ws': 'ws:', SSE: 'sse:' }[transport as string] ?? '';
      expect(logged[0]!.requestId).toMatch(new RegExp(`^${prefix}[0-9a-f-]{36}$`));
      if (requestId !== undefined) expect(logged[0]!.requestId).toBe(requestId);
    },
  );
});
