// One error rule on every transport and at every seam (docs/contract.md, "Error codes"): an error the gateway did not
// raise on purpose reaches no client. For each seam that can fail (a resolver, the store, the upstream client, the
// event log under a subscription, the webhook intake, an MCP tool), a property: whatever secret-looking message the
// error carries (fast-check draws it), sent over POST /graphql (the direct path and Apollo's pipeline), GET /graphql,
// graphql-ws, SSE and MCP, no byte of it reaches the client, the client gets INTERNAL_SERVER_ERROR, and the log has it.
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';

import { CloudClient } from '../../src/cloud/client.js';
import { EventReader } from '../../src/events/cursor-read.js';
import { EventLog } from '../../src/events/log.js';
import { catalogResolvers } from '../../src/graphql/catalog.js';
import { NotificationIntake } from '../../src/mobile-id/intake.js';
import { Ledger } from '../../src/store/ledger.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mcpClient, type TestMcpClient } from '../helpers/mcp.js';
import { postNotification } from '../helpers/mobile-id.js';
import { operationOver } from '../helpers/operation.js';

const KEY = 'masking-every-seam-key-01';
type Transport = 'POST direct' | 'POST Apollo' | 'GET' | 'graphql-ws' | 'SSE' | 'MCP';
type Kind = 'query' | 'mutation' | 'subscription';

/** The part of a secret no answer may hold: drawn per run, so that no fixed string can be special-cased. */
const secretPart = fc.stringMatching(/^[A-Za-z0-9]{16,32}$/);
const messageOf = (part: string) => `connect ECONNREFUSED 10.9.8.7:5432 password=${part}`;

interface Seam {
  readonly name: string;
  readonly kind: Kind;
  /** The GraphQL operation (or, over MCP, the tool and its arguments) that goes through the seam. */
  readonly query: string;
  readonly tool: readonly [string, Record<string, unknown>];
  /** Makes the seam throw `message` from now on. */
  fail(message: string): void;
}

// The resolver seam: Catalog.platforms, spied on before the gateways build their schemas (they keep the spy).
const platforms = vi.spyOn(catalogResolvers.Catalog as { platforms: (...a: unknown[]) => unknown }, 'platforms');

const SEAMS: readonly Seam[] = [
  {
    name: 'a resolver',
    kind: 'query',
    query: '{ catalog { platforms { __typename } } }',
    tool: ['catalog', {}],
    fail: (message) =>
      platforms.mockImplementation(() => {
        throw new Error(message);
      }),
  },
  {
    name: 'the store',
    kind: 'query',
    query: '{ projects { id } }',
    tool: ['projects', {}],
    fail: (message) => vi.spyOn(Ledger.prototype, 'list').mockRejectedValue(new Error(message)),
  },
  {
    name: 'the upstream client',
    kind: 'mutation',
    query: 'mutation { createProject(input: { name: "masked", description: "" }) { project { id } } }',
    tool: ['create_project', { input: { name: 'masked', description: '' } }],
    fail: (message) => vi.spyOn(CloudClient.prototype, 'createProject').mockRejectedValue(new Error(message)),
  },
  {
    name: 'the event log under a subscription (and an MCP wait)',
    kind: 'subscription',
    query: 'subscription { mobileIdAuthentication(authReqId: "masked-1") { __typename } }',
    tool: ['wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 0 }],
    fail: (message) => {
      for (const method of ['latest', 'latestMany', 'after', 'range', 'inStretches', 'lowestIn', 'lastSeq'] as const)
        vi.spyOn(EventLog.prototype, method).mockRejectedValue(new Error(message));
      // MCP's wait reads through the event reader, which reads nothing from the log when no cursor is given.
      for (const method of ['waitForEvents', 'eventsAfter'] as const)
        vi.spyOn(EventReader.prototype, method).mockRejectedValue(new Error(message));
    },
  },
];

const TRANSPORTS: readonly Transport[] = ['POST direct', 'POST Apollo', 'GET', 'graphql-ws', 'SSE', 'MCP'];
const carries = (t: Transport, kind: Kind) =>
  kind === 'subscription' ? t === 'graphql-ws' || t === 'SSE' || t === 'MCP' : t !== 'GET' || kind === 'query';

let direct: TestGateway;
let apollo: TestGateway;
let mcp: TestMcpClient;
const env = { GATEWAY_API_KEYS: KEY, MCP_MUTATIONS: 'all', LOG_LEVEL: 'error' };
beforeAll(async () => {
  direct = await startTestGateway(env);
  apollo = await startTestGateway(env, { testing: { directPath: false } });
  mcp = await mcpClient(direct, { key: KEY });
}, 60_000);
afterAll(async () => {
  await mcp?.close();
  await direct?.close();
  await apollo?.close();
  platforms.mockRestore();
});
afterEach(() => {
  vi.restoreAllMocks();
  // restoreAllMocks ends the resolver's spy too: it calls through again (the schemas keep calling the spy).
  platforms.mockImplementation(platforms.getMockImplementation() ?? ((...a: unknown[]) => a && undefined));
});

/** How each transport's operation is sent. */
const VIA = { 'POST direct': 'post', 'POST Apollo': 'post', GET: 'get', 'graphql-ws': 'ws', SSE: 'sse' } as const;

/** One operation over `transport`: the raw text the client received, and the errors it parsed. */
async function once(transport: Transport, seam: Seam): Promise<{ raw: string; codes: string[] }> {
  if (transport === 'MCP') {
    const result = await mcp.call(...seam.tool);
    const errors = (result.structuredContent?.errors ?? []) as Array<{ code?: string }>;
    return { raw: JSON.stringify(result), codes: result.isError ? errors.map((e) => e.code ?? 'NO CODE') : [] };
  }
  const gw = transport === 'POST Apollo' ? apollo : direct;
  const { raw, errors = [] } = await operationOver(VIA[transport], gw, KEY, { query: seam.query });
  return { raw, codes: errors.map((e) => String(e.extensions?.code ?? 'NO CODE')) };
}

describe.each(SEAMS)('an unexpected error from $name', (seam) => {
  it.each(TRANSPORTS.filter((t) => carries(t, seam.kind)))(
    'over %s reaches the client as INTERNAL_SERVER_ERROR with no byte of its message, and the log in full',
    async (transport) => {
      await fc.assert(
        fc.asyncProperty(secretPart, async (part) => {
          vi.restoreAllMocks();
          seam.fail(messageOf(part));
          const { raw, codes } = await once(transport, seam);
          expect(codes, raw).toEqual(['INTERNAL_SERVER_ERROR']);
          for (const leaked of [part, 'ECONNREFUSED', '10.9.8.7', 'password']) expect(raw).not.toContain(leaked);
          expect(direct.logs() + apollo.logs()).toContain(part);
        }),
        { numRuns: 3 },
      );
    },
  );
});

describe('an unexpected error from the webhook intake', () => {
  it('is answered 500 server_error to the sender with no byte of its message, and the log in full', async () => {
    await fc.assert(
      fc.asyncProperty(secretPart, async (part) => {
        vi.spyOn(NotificationIntake.prototype, 'receive').mockRejectedValue(new Error(messageOf(part)));
        const res = await postNotification(direct, {
          auth_req_id: `masked-${part}`.slice(0, 40),
          error: 'access_denied',
          error_description: 'the user declined',
        });
        vi.restoreAllMocks();
        expect(res.status, res.text).toBe(500);
        expect(res.json).toMatchObject({ error: 'server_error' });
        for (const leaked of [part, 'ECONNREFUSED', '10.9.8.7', 'password']) expect(res.text).not.toContain(leaked);
        expect(direct.logs()).toContain(part);
      }),
      { numRuns: 3 },
    );
  });
});
