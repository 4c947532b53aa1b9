// A reload that gives a key to another app (GATEWAY_APPS_FILE rewritten, POST /admin/reload): what the key opened
// before the reload read as its old app, and must not go on doing so as the new one (docs/apps-and-security.md,
// "Tenancy"). Each stream it holds open (graphql-ws, SSE in both modes, an MCP listen stream, a wait_for_events call)
// ends as one whose key the reload removed (test/gateway/config-reload.test.ts), before the old app's next event.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { createClient as createSseClient } from 'graphql-sse';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { mcpClient } from '../helpers/mcp.js';
import { collect, wsClient } from '../helpers/mobile-id.js';
import { subscribers, waitFor } from '../helpers/wait.js';

const MOVED = 'moved-key-0123456789abcdef';
const SHOP_NEW = 'shop-new-key-0123456789abcdef';
const CRM = 'crm-key-0123456789abcdef';
const SRE = 'sre-key-0123456789abcdef';
const REGISTER = `mutation { registerVerification(input: { workflowId: "wf-kyc", applicant: { lastName: "Petrova" } }) {
  verification { externalId }
} }`;
const COMPLETED = `subscription($id: ID) { verificationCompleted(externalId: $id) { externalId status } }`;

const digest = (key: string) => createHash('sha256').update(key).digest('hex');
const apps = (shop: string[], crm: string[]) =>
  [
    'apps:',
    ...[
      ['shop', shop],
      ['crm', crm],
    ].flatMap(([name, keys]) => [
      `  - name: ${name as string}`,
      '    scopes: [identity:read, identity:write]',
      `    keys: [${(keys as string[]).map((k) => `{ sha256: ${digest(k)} }`).join(', ')}]`,
    ]),
    '  - name: sre',
    '    scopes: [operator]',
    `    keys: [{ sha256: ${digest(SRE)} }]`,
    '',
  ].join('\n');

let t: TestGateway;
let file: string;
beforeAll(async () => {
  file = path.join(tempDataDir('moved-key-'), 'apps.yaml');
  fs.writeFileSync(file, apps([MOVED, SHOP_NEW], [CRM]));
  t = await startTestGateway({ GATEWAY_APPS_FILE: file, SANDBOX_CALLBACK_DELAY_MS: '600000' });
});
afterAll(() => t?.close());

describe('a reload that gives a key to another app', () => {
  it("ends what the key opened as its old app, over graphql-ws, SSE in both modes and MCP, before the old app's next event", async () => {
    const registered = await t.graphql(REGISTER, {}, { key: MOVED });
    expect(registered.errors).toBeUndefined();
    const id = registered.data!.registerVerification.verification.externalId as string;

    const ws = wsClient(t, { key: MOVED });
    const sse = [false, true].map((singleConnection) =>
      createSseClient({
        url: `${t.url}/graphql/stream`,
        singleConnection,
        retryAttempts: 0,
        headers: { authorization: `Bearer ${MOVED}` },
      }),
    );
    const mcp = await mcpClient(t, { key: MOVED });
    try {
      const streams = [ws, ...sse].map((client) => collect(client, COMPLETED, { id }));
      const uri = `identity://verifications/${id}`;
      const updated: string[] = [];
      mcp.client.setNotificationHandler('notifications/resources/updated', (n) => void updated.push(n.params.uri));
      const listen = await mcp.client.listen({ resourceSubscriptions: [uri] });
      const cursor = (await mcp.call('wait_for_events', { timeoutSeconds: 0 })).structuredContent!.cursor as string;
      const waited = mcp.call('wait_for_events', { cursor, timeoutSeconds: 300 });
      await waitFor(() => subscribers(t, 'verification', id) === 4, 20_000, 'every stream listening');
      await waitFor(() => subscribers(t, 'verification', null) >= 1, 20_000, 'the wait listening');

      fs.writeFileSync(file, apps([SHOP_NEW], [CRM, MOVED]));
      const reloaded = await request(`${t.url}/admin/reload`, {
        method: 'POST',
        headers: { authorization: `Bearer ${SRE}` },
      });
      expect(reloaded.statusCode).toBe(200);
      await reloaded.body.text();
      // The key is crm's now: a new request reads shop's verification as an unknown id.
      const asCrm = await t.graphql('query($id: ID!) { node(id: $id) { id } }', { id }, { key: MOVED });
      expect(asCrm.data).toEqual({ node: null });

      await t.gateway.sandbox.verification!.complete(id);
      // Shop's own subscriber, with its new key, gets the result: every stream has had its chance at it by then.
      const shop = wsClient(t, { key: SHOP_NEW });
      try {
        const own = collect(shop, COMPLETED, { id });
        await waitFor(() => own.results.length > 0, 20_000, "shop's result");
      } finally {
        await shop.dispose();
      }
      const ended = (s: (typeof streams)[number]) => s.completed() || s.errors.length > 0;
      await waitFor(() => streams.every((s) => ended(s) || s.results.length > 0), 20_000, 'each stream to end');
      const events = (s: (typeof streams)[number]) => s.results.filter((r) => r.data);
      expect(streams.map(events)).toEqual([[], [], []]);
      expect(streams.map(ended)).toEqual([true, true, true]);
      const wait = await waited;
      expect(wait.structuredContent).toMatchObject({ errors: [{ code: 'UNAUTHENTICATED' }] });
      expect(await listen.closed).toBe('remote');
      expect(updated).toEqual([]);
    } finally {
      await ws.dispose();
      for (const c of sse) c.dispose();
      await mcp.close();
    }
  });
});
