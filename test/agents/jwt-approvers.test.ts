// Approvers that sign in with their identity provider's JWTs (docs/agents.md, "Who approves";
// docs/apps-and-security.md, AUTH_ISSUERS and AUTH_APPS): an app the apps file names with `approves`, made one with a
// JWT client (`finance=finance`), sees and approves through its JWT only the listed apps' plans, and every other plan
// reads as one that does not exist; a token's `identity:approve` approves no cloud plan; an agent signed in by JWT
// never approves its own plan, nor one its keys made; and a reload that takes the approve scope from what a token
// grants, or narrows its approves list, refuses that token's next approvePlan and ends its pendingAgentPlansChanged.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { upstreamCreations } from '../helpers/cloud.js';
import { appsFile, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { ISSUER, sign, signingKey, startJwksServer, type JwksServer, type SigningKey } from '../helpers/jwt.js';
import { mcpClientsPerTest, textOf } from '../helpers/mcp.js';
import { collect, wsClient } from '../helpers/mobile-id.js';
import { waitFor } from '../helpers/wait.js';

const KEYS = {
  build: 'build-agent-key-0123456789',
  ops: 'ops-agent-key-0123456789',
  finance: 'finance-key-0123456789',
  operator: 'operator-key-0123456789',
};

const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { id status approvedBy } }';
const READ = 'query($id: ID!) { agentPlan(id: $id) { id status } }';
const PENDING = '{ pendingAgentPlans(first: 1000) { id } }';

let key: SigningKey;
let jwks: JwksServer;
let gw: TestGateway;
let issuersFile: string;
let appsFilePath: string;
const connect = mcpClientsPerTest();

/** The issuers file: one provider, its scopes read from `scopeClaims`, and the apps it signs in. */
const issuers = (scopeClaims: string[]) =>
  [
    'issuers:',
    `  - issuer: ${ISSUER}`,
    `    jwksUrl: ${jwks.url}`,
    '    audience: gateway',
    '    appClaim: azp',
    `    scopeClaims: [${scopeClaims.join(', ')}]`,
    '    apps: [finance=finance, build-agent=build-agent, jwt-agent, kyc-approver, roles-approver]',
    '',
  ].join('\n');

/** A token of `app` granting `scope` (space-separated), and `roles` when given. */
const tokenOf = (app: string, scope: string, roles?: string[]) =>
  sign(key, { claims: { azp: app, scope, ...(roles ? { roles } : {}) } });

beforeAll(async () => {
  key = await signingKey('jwt-approvers-kid');
  jwks = await startJwksServer([key]);
  const file = (appsFilePath = appsFile('jwt-approvers-', [
    { name: 'build-agent', scopes: ['cloud:read', 'cloud:write'], key: KEYS.build },
    { name: 'ops-agent', scopes: ['cloud:read', 'cloud:write'], key: KEYS.ops },
    { name: 'finance', scopes: ['cloud:approve'], approves: ['build-agent'], key: KEYS.finance },
    { name: 'ops', scopes: ['operator'], key: KEYS.operator },
  ]));
  issuersFile = path.join(path.dirname(file), 'issuers.yaml');
  fs.writeFileSync(issuersFile, issuers(['scope', 'roles']));
  gw = await startTestGateway({
    GATEWAY_APPS_FILE: file,
    AUTH_ISSUERS: issuersFile,
    AUTH_SCOPE_PREFIX: '',
    MCP_MUTATIONS: 'approve',
  });
}, 60_000);
afterAll(async () => {
  await gw?.close();
  await jwks?.stop();
});

async function planOf(credential: string, tool: string, input: object): Promise<string> {
  const c = await connect(gw, { key: credential });
  const planned = await c.call(tool, { input });
  expect(planned.isError, textOf(planned)).toBeFalsy();
  return planned.structuredContent!.planId as string;
}

/** An answer's errors with `id` written as `<id>`, to compare with an unknown id's. */
const errorsOf = (res: { errors?: unknown[] }, id: string) => JSON.stringify(res.errors).replaceAll(id, '<id>');

async function reload(): Promise<void> {
  const res = await request(`${gw.url}/admin/reload`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEYS.operator}` },
  });
  expect(res.statusCode, await res.body.text()).toBe(200);
}

describe('an approver signed in with a JWT, its apps-file entry listing approves', () => {
  it("sees and approves the listed app's plans; another app's plan reads as an unknown one, and stays pending", async () => {
    const finance = await tokenOf('finance', 'cloud:approve');
    const listed = await planOf(KEYS.build, 'create_project', { name: 'listed' });
    const other = await planOf(KEYS.ops, 'create_project', { name: 'other' });
    const unknown = randomUUID();

    const pending = await gw.graphql<{ pendingAgentPlans: { id: string }[] }>(PENDING, {}, { key: finance });
    expect(pending.errors).toBeUndefined();
    expect(pending.data!.pendingAgentPlans.map((p) => p.id)).toContain(listed);
    expect(pending.data!.pendingAgentPlans.map((p) => p.id)).not.toContain(other);

    expect((await gw.graphql(READ, { id: other }, { key: finance })).data).toEqual({ agentPlan: null });
    expect((await gw.graphql(READ, { id: listed }, { key: finance })).data).toEqual({
      agentPlan: { id: listed, status: 'PENDING' },
    });
    const refused = await gw.graphql(APPROVE, { id: other }, { key: finance });
    const missing = await gw.graphql(APPROVE, { id: unknown }, { key: finance });
    expect(refused.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    expect(errorsOf(refused, other)).toBe(errorsOf(missing, unknown));
    expect(refused.data).toEqual(missing.data);

    expect((await gw.graphql(APPROVE, { id: listed }, { key: finance })).data).toEqual({
      approvePlan: { id: listed, status: 'APPROVED', approvedBy: 'finance' },
    });
    // The plan it could not approve is still pending for an approver of every app (an ops agent's key cannot run it).
    const c = await connect(gw, { key: KEYS.ops });
    expect((await c.call('execute_plan', { planId: other })).structuredContent).toMatchObject({
      code: 'APPROVAL_REQUIRED',
    });
    expect(upstreamCreations(gw)).toEqual([]);
  });

  it('a token whose scopes grant identity:approve but not cloud:approve approves no cloud plan', async () => {
    const kyc = await tokenOf('kyc-approver', 'identity:approve cloud:read');
    const plan = await planOf(KEYS.build, 'create_project', { name: 'cloud-for-kyc' });
    const unknown = randomUUID();
    expect((await gw.graphql(READ, { id: plan }, { key: kyc })).data).toEqual({ agentPlan: null });
    const pending = await gw.graphql<{ pendingAgentPlans: { id: string }[] }>(PENDING, {}, { key: kyc });
    expect(pending.data!.pendingAgentPlans.map((p) => p.id)).not.toContain(plan);
    const refused = await gw.graphql(APPROVE, { id: plan }, { key: kyc });
    expect(refused.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    expect(errorsOf(refused, plan)).toBe(errorsOf(await gw.graphql(APPROVE, { id: unknown }, { key: kyc }), unknown));
    expect((await gw.graphql(READ, { id: plan }, { key: KEYS.finance })).data).toEqual({
      agentPlan: { id: plan, status: 'PENDING' },
    });
  });
});

describe('an agent signed in with a JWT and its own plan', () => {
  it('a JWT agent holding cloud:approve never approves the plan it made: CONFLICT, the plan left pending', async () => {
    const agent = await tokenOf('jwt-agent', 'cloud:read cloud:write cloud:approve');
    const plan = await planOf(agent, 'create_project', { name: 'own-by-jwt' });
    const refused = await gw.graphql(APPROVE, { id: plan }, { key: agent });
    expect(refused.errors?.[0]?.extensions?.code).toBe('CONFLICT');
    const c = await connect(gw, { key: agent });
    expect((await c.call('execute_plan', { planId: plan })).structuredContent).toMatchObject({
      code: 'APPROVAL_REQUIRED',
    });
    expect(upstreamCreations(gw)).toEqual([]);
  });

  it("nor does the JWT of an app its keys made one with (build-agent=build-agent) approve that app's plan", async () => {
    const agent = await tokenOf('build-agent', 'cloud:read cloud:write cloud:approve');
    const byKey = await planOf(KEYS.build, 'create_project', { name: 'own-by-key' });
    const refused = await gw.graphql(APPROVE, { id: byKey }, { key: agent });
    expect(refused.errors?.[0]?.extensions?.code).toBe('CONFLICT');
    const byJwt = await planOf(agent, 'create_project', { name: 'own-by-its-jwt' });
    expect((await gw.graphql(READ, { id: byJwt }, { key: KEYS.finance })).data).toEqual({
      agentPlan: { id: byJwt, status: 'PENDING' },
    });
    expect((await gw.graphql(APPROVE, { id: byJwt }, { key: agent })).errors?.[0]?.extensions?.code).toBe('CONFLICT');
  });
});

describe('a reload that takes the approve scope from what a token grants', () => {
  it('refuses the next approvePlan of the same token, and the plan stays pending', async () => {
    const approver = await tokenOf('roles-approver', 'cloud:read', ['cloud:approve']);
    const first = await planOf(KEYS.build, 'create_project', { name: 'before-reload' });
    const second = await planOf(KEYS.build, 'create_project', { name: 'after-reload' });
    expect((await gw.graphql(APPROVE, { id: first }, { key: approver })).data).toEqual({
      approvePlan: { id: first, status: 'APPROVED', approvedBy: 'roles-approver' },
    });

    fs.writeFileSync(issuersFile, issuers(['scope']));
    try {
      await reload();
      const refused = await gw.graphql(APPROVE, { id: second }, { key: approver });
      expect(refused.data?.approvePlan ?? null).toBeNull();
      expect(refused.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
      expect((await gw.graphql(READ, { id: second }, { key: KEYS.finance })).data).toEqual({
        agentPlan: { id: second, status: 'PENDING' },
      });
    } finally {
      fs.writeFileSync(issuersFile, issuers(['scope', 'roles']));
      await reload();
    }
  });

  it("a reload that narrows finance's approves list holds for its JWT at once", async () => {
    const finance = await tokenOf('finance', 'cloud:approve');
    const plan = await planOf(KEYS.build, 'create_project', { name: 'narrowed' });
    // Seen and cached before the reload.
    expect((await gw.graphql(READ, { id: plan }, { key: finance })).data).toEqual({
      agentPlan: { id: plan, status: 'PENDING' },
    });
    const before = fs.readFileSync(appsFilePath, 'utf8');
    fs.writeFileSync(appsFilePath, before.replace('approves: [build-agent]', 'approves: [ops-agent]'));
    try {
      await reload();
      expect((await gw.graphql(READ, { id: plan }, { key: finance })).data).toEqual({ agentPlan: null });
      expect((await gw.graphql(APPROVE, { id: plan }, { key: finance })).errors?.[0]?.extensions?.code).toBe(
        'NOT_FOUND',
      );
    } finally {
      fs.writeFileSync(appsFilePath, before);
      await reload();
    }
  });
});

describe("a reload and an approver's JWT that holds pendingAgentPlansChanged open over graphql-ws", () => {
  const CHANGED = 'subscription { pendingAgentPlansChanged(first: 1000) { id } }';

  it.each([
    {
      reload: 'takes cloud:approve from what its token grants',
      token: () => tokenOf('roles-approver', 'cloud:read', ['cloud:approve']),
      change: () => fs.writeFileSync(issuersFile, issuers(['scope'])),
      why: 'which this app does not hold; the configuration was reloaded',
    },
    {
      reload: "narrows its apps-file entry's approves list",
      token: () => tokenOf('finance', 'cloud:approve'),
      change: () =>
        fs.writeFileSync(
          appsFilePath,
          fs.readFileSync(appsFilePath, 'utf8').replace('approves: [build-agent]', 'approves: [ops-agent]'),
        ),
      why: 'the apps whose plans this app approves have changed',
    },
  ])('a reload that $reload ends it with FORBIDDEN, listing no later plan', async ({ token, change, why }) => {
    const issuersBefore = fs.readFileSync(issuersFile, 'utf8');
    const appsBefore = fs.readFileSync(appsFilePath, 'utf8');
    const client = wsClient(gw, { key: await token() });
    try {
      const sub = collect(client, CHANGED, {});
      await waitFor(() => sub.results.length > 0, 20_000, 'the first list');
      change();
      await reload();
      const later = await planOf(KEYS.build, 'create_project', { name: `later-${randomUUID().slice(0, 8)}` });
      const lists = () => sub.results.map((r) => JSON.stringify(r.data?.pendingAgentPlansChanged ?? null));
      await waitFor(
        () => sub.completed() || sub.errors.length > 0 || lists().some((l) => l.includes(later)),
        20_000,
        'the subscription to end, or to list the later plan',
      );
      expect(lists().filter((l) => l.includes(later))).toEqual([]);
      expect(sub.errors[0]).toEqual([
        expect.objectContaining({
          message: expect.stringContaining(why),
          extensions: expect.objectContaining({ code: 'FORBIDDEN', field: 'Subscription.pendingAgentPlansChanged' }),
        }),
      ]);
    } finally {
      await client.dispose();
      fs.writeFileSync(issuersFile, issuersBefore);
      fs.writeFileSync(appsFilePath, appsBefore);
      await reload();
    }
  });
});
