// A reload that narrows what an approver may see ends its running pendingAgentPlansChanged subscription, over
// graphql-ws and SSE, before it lists a plan it may no longer see: the scope it was admitted under is gone (though the
// field is still open through its other approve scope), or the apps whose plans it approves changed.
import fs from 'node:fs';
import { createClient as createSseClient, type Client as SseClient } from 'graphql-sse';
import type { Client } from 'graphql-ws';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';

import { appsFile, gatewaysPerTest } from '../helpers/gateway.js';
import { AGENT_KEY, APPROVER_KEY, mcpClientsPerTest, OPERATOR_KEY } from '../helpers/mcp.js';
import { collect, wsClient } from '../helpers/mobile-id.js';
import { waitFor } from '../helpers/wait.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();
const OTHER_AGENT_KEY = 'other-agent-key-0123456789';
const CHANGED = 'subscription { pendingAgentPlansChanged { id } }';

/** The apps: two agents, an approver with both approve scopes (or those given, for the apps given), an operator. */
function apps(approver: { scopes: string[]; approves?: string[] }): string {
  const file = appsFile('approver-reload-', [
    { name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: AGENT_KEY },
    { name: 'other-agent', scopes: ['cloud:read', 'cloud:write'], key: OTHER_AGENT_KEY },
    { name: 'approver', ...approver, key: APPROVER_KEY },
    { name: 'ops', scopes: ['operator'], key: OPERATOR_KEY },
  ]);
  return fs.readFileSync(file, 'utf8');
}

const clients: Array<Client | SseClient> = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.dispose()));
});

describe.each([
  {
    reload: 'takes cloud:approve (identity:approve still opens the field)',
    after: { scopes: ['identity:approve'] },
    why: 'this app no longer holds it',
  },
  {
    reload: 'narrows the apps whose plans it approves',
    after: { scopes: ['cloud:approve', 'identity:approve'], approves: ['agent'] },
    why: 'the apps whose plans this app approves have changed',
  },
])('a reload that $reload', ({ after, why }) => {
  it.each(['ws', 'sse'])(
    'ends the approver’s running pendingAgentPlansChanged over %s with FORBIDDEN, listing no later plan',
    async (transport) => {
      const before = apps({ scopes: ['cloud:approve', 'identity:approve'] });
      const file = appsFile('approver-reload-file-', []);
      fs.writeFileSync(file, before);
      const gw = await start({ GATEWAY_APPS_FILE: file, MCP_MUTATIONS: 'approve' });
      const plan = async (key: string, name: string) =>
        (await (await connect(gw, { key })).call('create_project', { input: { name } })).structuredContent!
          .planId as string;
      const first = await plan(OTHER_AGENT_KEY, 'first');

      const client =
        transport === 'ws'
          ? wsClient(gw, { key: APPROVER_KEY })
          : createSseClient({
              url: `${gw.url}/graphql/stream`,
              retryAttempts: 0,
              headers: { authorization: `Bearer ${APPROVER_KEY}` },
            });
      clients.push(client);
      const sub = collect(client, CHANGED, {});
      await waitFor(() => sub.results.length > 0, 20_000, 'the first list');
      expect(sub.results[0].data.pendingAgentPlansChanged).toEqual([{ id: first }]);

      fs.writeFileSync(file, apps(after));
      const reloaded = await request(`${gw.url}/admin/reload`, {
        method: 'POST',
        headers: { authorization: `Bearer ${OPERATOR_KEY}` },
      });
      expect(reloaded.statusCode).toBe(200);
      await reloaded.body.text();
      // A plan the approver may no longer see: it would be listed if the subscription went on as it was opened.
      const later = await plan(OTHER_AGENT_KEY, 'later');
      const lists = () => sub.results.map((r) => JSON.stringify(r.data?.pendingAgentPlansChanged ?? null));
      await waitFor(
        () => sub.completed() || sub.errors.length > 0 || lists().some((l) => l.includes(later)),
        20_000,
        'the subscription to end, or to list the later plan',
      );
      expect(lists().filter((l) => l.includes(later))).toEqual([]);
      const ended = transport === 'ws' ? (sub.errors[0] as unknown[]) : sub.results.at(-1).errors;
      expect(ended).toEqual([
        expect.objectContaining({
          message: expect.stringContaining(`Subscription.pendingAgentPlansChanged was admitted under the scope`),
          extensions: expect.objectContaining({ code: 'FORBIDDEN', field: 'Subscription.pendingAgentPlansChanged' }),
        }),
      ]);
      expect((ended[0] as { message: string }).message).toContain(why);
    },
  );
});
