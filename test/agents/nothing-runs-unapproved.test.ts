// The audit of "an MCP client plans, gets a person's approval and creates exactly once" (docs/agents.md): every way an
// agent (an MCP client, or the app its key belongs to) tried to create, or to run a plan other than as approved, and
// what refused it. Each row is one attempt over real HTTP; none reaches an upstream.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { upstreamCreations } from '../helpers/cloud.js';
import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { testClock } from '../helpers/jwt.js';
import { mcpClient, textOf, type TestMcpClient } from '../helpers/mcp.js';

const KEYS = {
  agent: 'agent-key-0123456789',
  other: 'other-agent-key-0123456789',
  approver: 'approver-key-0123456789',
  narrow: 'narrow-approver-key-0123456789',
  identity: 'identity-approver-key-0123456789',
  selfish: 'selfish-key-one-0123456789',
  selfishAgain: 'selfish-key-two-0123456789',
  ops: 'operator-key-0123456789',
  plain: 'plain-gateway-key-0123456789',
};

const MANIFEST = {
  'skip-root':
    'mutation SkipRoot($input: CreateProjectInput!) { createProject(input: $input) @skip(if: false) { project { id } } }',
  'include-root':
    'mutation IncludeRoot { issueMobileIdNotificationToken(ttlSeconds: 60) { token } createProject(input: { name: "x" }) @include(if: true) { project { id } } }',
  aliased: 'mutation Aliased { catalog: createProject(input: { name: "aliased" }) { project { id } } }',
};

function setup(dir: string, mutations: 'approve' | 'none'): Record<string, string> {
  const sha = (key: string) => createHash('sha256').update(key).digest('hex');
  const app = (name: string, scopes: string[], keys: string[], approves?: string[]) =>
    `  - name: ${name}\n    scopes: [${scopes.join(', ')}]\n` +
    (approves ? `    approves: [${approves.join(', ')}]\n` : '') +
    `    keys: [${keys.map((k) => `{ sha256: ${sha(k)} }`).join(', ')}]\n`;
  const apps = path.join(dir, 'apps.yaml');
  fs.writeFileSync(
    apps,
    'apps:\n' +
      app('agent', ['cloud:read', 'cloud:write', 'identity:read', 'identity:write'], [KEYS.agent]) +
      app('other-agent', ['cloud:read', 'cloud:write'], [KEYS.other]) +
      app('approver', ['cloud:approve'], [KEYS.approver]) +
      app('narrow', ['cloud:approve'], [KEYS.narrow], ['other-agent']) +
      app('identity-approver', ['identity:approve'], [KEYS.identity]) +
      app('selfish', ['cloud:read', 'cloud:write', 'cloud:approve'], [KEYS.selfish, KEYS.selfishAgain]) +
      app('ops', ['operator'], [KEYS.ops]),
  );
  const manifest = path.join(dir, 'manifest.json');
  fs.writeFileSync(manifest, JSON.stringify(MANIFEST));
  return {
    DATA_DIR: dir,
    GATEWAY_APPS_FILE: apps,
    GATEWAY_API_KEYS: KEYS.plain,
    MCP_MUTATIONS: mutations,
    MCP_EXECUTE: 'true',
    MCP_APPROVAL_TTL: '15m',
    TRUSTED_DOCUMENTS: 'allow',
    TRUSTED_DOCUMENTS_MANIFEST: manifest,
  };
}

/** What an attempt got: the code of its refusal (a tool's or GraphQL's), or the status of what it made. */
interface Answer {
  code?: string | undefined;
  status?: string | undefined;
  text: string;
}

type Result = Awaited<ReturnType<TestMcpClient['call']>>;
const ofTool = (r: Result): Answer => {
  const s = (r.structuredContent ?? {}) as { code?: string; status?: string; errors?: { code?: string }[] };
  return { code: s.code ?? s.errors?.[0]?.code, status: s.status, text: textOf(r) };
};

const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { status } }';
const DECLINE = 'mutation($id: ID!) { declinePlan(planId: $id) { status } }';

let gw: TestGateway;
const clock = testClock();
const clients: TestMcpClient[] = [];
async function client(key: string, person: 'accept' | null = null): Promise<TestMcpClient> {
  const c = await mcpClient(gw, { key, person });
  clients.push(c);
  return c;
}
async function plan(c: TestMcpClient, name: string): Promise<string> {
  const made = await c.call('create_project', { input: { name } });
  expect(made.isError, textOf(made)).toBeFalsy();
  return made.structuredContent!.planId as string;
}
async function graphql(query: string, id: string, key: string): Promise<Answer> {
  const res = await gw.graphql(query, { id }, { key });
  const error = res.errors?.[0];
  return { code: error?.extensions?.code, status: (res.data as any)?.approvePlan?.status, text: error?.message ?? '' };
}

beforeAll(async () => {
  gw = await startTestGateway(setup(tempDataDir('nothing-unapproved-'), 'approve'), { testing: { clock: clock.now } });
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  await gw.close();
});

/** attempt → what refused it. Nothing reaches an upstream in any row. */
const ATTEMPTS: ReadonlyArray<{ attempt: string; run: () => Promise<Answer>; refused: Partial<Answer> }> = [
  {
    attempt: 'execute_plan before anyone approved the plan',
    run: async () => {
      const c = await client(KEYS.agent);
      return ofTool(await c.call('execute_plan', { planId: await plan(c, 'early') }));
    },
    refused: { code: 'APPROVAL_REQUIRED', status: 'PENDING' },
  },
  {
    attempt: 'execute_plan with an approval as an argument',
    run: async () => {
      const c = await client(KEYS.agent);
      return ofTool(await c.call('execute_plan', { planId: await plan(c, 'arg'), approved: true }));
    },
    refused: { code: 'BAD_USER_INPUT' },
  },
  {
    attempt: 'a client that accepts every elicitation, under MCP_APPROVAL=approver',
    run: async () => {
      const c = await client(KEYS.agent, 'accept');
      const answer = ofTool(await c.call('execute_plan', { planId: await plan(c, 'auto-accept') }));
      expect(c.asked).toEqual([]);
      return answer;
    },
    refused: { code: 'APPROVAL_REQUIRED' },
  },
  {
    attempt: 'the plan tool given the idempotency key (to reuse one it knows)',
    run: async () => {
      const c = await client(KEYS.agent);
      const key = '0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e';
      return ofTool(await c.call('create_project', { input: { name: 'keyed' }, idempotencyKey: key }));
    },
    refused: { code: 'BAD_USER_INPUT' },
  },
  {
    attempt: "approvePlan over POST /graphql with the agent's own key",
    run: async () => graphql(APPROVE, await plan(await client(KEYS.agent), 'self'), KEYS.agent),
    refused: { code: 'FORBIDDEN' },
  },
  {
    attempt: 'an app holding cloud:write and cloud:approve approves its own plan with its second key',
    run: async () => graphql(APPROVE, await plan(await client(KEYS.selfish), 'selfish'), KEYS.selfishAgain),
    refused: { code: 'CONFLICT' },
  },
  {
    attempt: 'a key of GATEWAY_API_KEYS (every scope but the approve ones) approves',
    run: async () => graphql(APPROVE, await plan(await client(KEYS.agent), 'plain'), KEYS.plain),
    refused: { code: 'FORBIDDEN' },
  },
  {
    attempt: 'an approver whose approves list names another app',
    run: async () => graphql(APPROVE, await plan(await client(KEYS.agent), 'narrow'), KEYS.narrow),
    refused: { code: 'NOT_FOUND' },
  },
  {
    attempt: 'an approver holding identity:approve approves a cloud plan',
    run: async () => graphql(APPROVE, await plan(await client(KEYS.agent), 'identity'), KEYS.identity),
    refused: { code: 'NOT_FOUND' },
  },
  {
    attempt: "another app's agent executes the agent's approved plan",
    run: async () => {
      const planId = await plan(await client(KEYS.agent), 'theirs');
      expect((await graphql(APPROVE, planId, KEYS.approver)).status).toBe('APPROVED');
      return ofTool(await (await client(KEYS.other)).call('execute_plan', { planId }));
    },
    refused: { code: 'NOT_FOUND' },
  },
  {
    attempt: 'execute_plan of a declined plan, its id upper-cased',
    run: async () => {
      const c = await client(KEYS.agent);
      const planId = await plan(c, 'declined');
      expect((await gw.graphql(DECLINE, { id: planId }, { key: KEYS.approver })).errors).toBeUndefined();
      return ofTool(await c.call('execute_plan', { planId: planId.toUpperCase() }));
    },
    refused: { code: 'DECLINED' },
  },
  {
    attempt: 'execute_plan of a second, unapproved plan while the first is approved',
    run: async () => {
      const c = await client(KEYS.agent);
      expect((await graphql(APPROVE, await plan(c, 'first'), KEYS.approver)).status).toBe('APPROVED');
      return ofTool(await c.call('execute_plan', { planId: await plan(c, 'second') }));
    },
    refused: { code: 'APPROVAL_REQUIRED' },
  },
  {
    attempt: 'a creation aliased as a read (catalog: createProject) only plans',
    run: async () => ofTool(await (await client(KEYS.agent)).call('Aliased', {})),
    refused: { status: 'PENDING' },
  },
  {
    attempt: 'a creation behind @skip on its root field',
    run: async () => ofTool(await (await client(KEYS.agent)).call('SkipRoot', { input: { name: 's' } })),
    refused: { text: expect.stringContaining('no tool "SkipRoot"') as unknown as string },
  },
  {
    attempt: 'a creation behind @include beside a harmless write',
    run: async () => ofTool(await (await client(KEYS.agent)).call('IncludeRoot', {})),
    refused: { text: expect.stringContaining('no tool "IncludeRoot"') as unknown as string },
  },
  {
    attempt: 'execute (queries only) by the agent, which is no operator',
    run: async () => ofTool(await (await client(KEYS.agent)).call('execute', { query: 'mutation { ping }' })),
    refused: { code: 'FORBIDDEN' },
  },
  {
    attempt: "execute with a creation picked by operationName, with an operator's key",
    run: async () =>
      ofTool(
        await (
          await client(KEYS.ops)
        ).call('execute', {
          query:
            'query Look { catalog { platforms { name } } } mutation Make { createProject(input: { name: "m" }) { project { id } } }',
          operationName: 'Make',
        }),
      ),
    refused: { code: 'BAD_REQUEST' },
  },
  {
    attempt: 'execute_plan once the approval has lapsed (MCP_APPROVAL_TTL)',
    run: async () => {
      const c = await client(KEYS.agent);
      const planId = await plan(c, 'lapsed');
      expect((await graphql(APPROVE, planId, KEYS.approver)).status).toBe('APPROVED');
      clock.advance(15 * 60_000 + 1);
      return ofTool(await c.call('execute_plan', { planId }));
    },
    refused: { code: 'APPROVAL_REQUIRED' },
  },
  {
    attempt: "execute_plan past the plan's 24 hours, approved just before",
    run: async () => {
      const c = await client(KEYS.agent);
      const planId = await plan(c, 'old');
      clock.advance(24 * 3_600_000 - 60_000);
      expect((await graphql(APPROVE, planId, KEYS.approver)).status).toBe('APPROVED');
      clock.advance(60_000);
      return ofTool(await c.call('execute_plan', { planId }));
    },
    refused: { code: 'PLAN_EXPIRED' },
  },
];

describe('nothing runs unapproved: the attempts that held', () => {
  for (const { attempt, run, refused } of ATTEMPTS) {
    it(`${attempt} → ${refused.code ?? refused.status ?? 'not offered'}`, async () => {
      const answer = await run();
      expect(answer, answer.text).toMatchObject(refused);
      expect(upstreamCreations(gw)).toEqual([]);
      expect(gw.gateway.sandbox.identification!.requests).toEqual([]);
    });
  }

  it('an approved plan runs once: two execute_plan at once and a third after create one project', async () => {
    const c = await client(KEYS.agent);
    const d = await client(KEYS.agent);
    const planId = await plan(c, 'once');
    expect((await graphql(APPROVE, planId, KEYS.approver)).status).toBe('APPROVED');
    const both = await Promise.all([c.call('execute_plan', { planId }), d.call('execute_plan', { planId })]);
    // One ran; the other found it claimed (and sent nothing), or, had it ended already, replayed its outcome.
    expect(
      both.filter((r) => r.structuredContent?.status === 'SUCCEEDED' && !r.structuredContent.replayed),
    ).toHaveLength(1);
    const third = await c.call('execute_plan', { planId });
    expect(third.structuredContent).toMatchObject({ status: 'SUCCEEDED', replayed: true });
    expect(upstreamCreations(gw)).toHaveLength(1);
  });
});

describe('MCP_MUTATIONS=none', () => {
  it('offers no creation tool and no execute_plan, and execute runs no mutation', async () => {
    const none = await startTestGateway(setup(tempDataDir('nothing-unapproved-none-'), 'none'));
    try {
      const c = await mcpClient(none, { key: KEYS.agent });
      const o = await mcpClient(none, { key: KEYS.ops });
      try {
        const names = await c.toolNames();
        for (const tool of ['create_project', 'provision_kafka_cluster', 'create_identification', 'execute_plan'])
          expect(names).not.toContain(tool);
        expect(textOf(await c.call('create_project', { input: { name: 'n' } }))).toContain('no tool');
        expect(textOf(await c.call('Aliased', {}))).toContain('no tool');
        const executed = await o.call('execute', {
          query: 'mutation { createProject(input: { name: "n" }) { project { id } } }',
        });
        expect(ofTool(executed).code).toBe('BAD_REQUEST');
        expect(upstreamCreations(none)).toEqual([]);
      } finally {
        await Promise.all([c.close(), o.close()]);
      }
    } finally {
      await none.close();
    }
  });
});
