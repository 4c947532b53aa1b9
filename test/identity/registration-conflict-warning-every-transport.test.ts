// A registration recorded from a 409 (the repeat of one whose answer was lost) carries an UPSTREAM_ANSWER_INCOMPLETE
// warning, derived from the record, so that its replay carries it too. POST /graphql is covered beside this; here
// every other transport that runs the mutation: graphql-ws, SSE, an MCP tool (MCP_MUTATIONS=all), and an agent plan's
// execute_plan (MCP_MUTATIONS=approve), each on the answer and on its replay.
import { randomUUID } from 'node:crypto';
import { createClient as createSseClient } from 'graphql-sse';
import { describe, expect, it } from 'vitest';

import { VERIFICATIONS_PATH } from '../../src/sandbox/verification.js';
import { appsFile, gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { connected } from '../helpers/identity.js';
import { AGENT_KEY, approveAgainAsUnknown, APPROVER_KEY, mcpClientsPerTest, textOf } from '../helpers/mcp.js';
import { wsClient } from '../helpers/mobile-id.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const REGISTER = `mutation($input: RegisterVerificationInput!, $key: UUID) {
  registerVerification(input: $input, idempotencyKey: $key) {
    verification { id externalId status }
    replayed
  }
}`;
const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { status } }';

const env = (mutations: 'all' | 'approve') => ({
  GATEWAY_APPS_FILE: appsFile(`conflict-warning-${mutations}-`, [
    { name: 'agent', scopes: ['identity:read', 'identity:write'], key: AGENT_KEY },
    { name: 'approver', scopes: ['identity:approve'], key: APPROVER_KEY },
  ]),
  MCP_MUTATIONS: mutations,
  SANDBOX_CALLBACK_DELAY_MS: '600000',
});

const registrations = (t: TestGateway) =>
  t.gateway.sandbox.verification!.requests.filter((r) => r.method === 'POST' && r.path === VERIFICATIONS_PATH);
const sentIdOf = (t: TestGateway) =>
  (registrations(t).at(-1)!.body as { verificationExternalId: string }).verificationExternalId;
/** The upstream's 409 for an id that exists, as a service that ignores Idempotency-Key answers the repeat. */
const exists = (id: string) => ({
  status: 409,
  retryAfterSeconds: null,
  body: { code: 'VERIFICATION_EXISTS', domain: 'sandbox', details: `verification ${id} is already registered` },
});
const warningFor = (id: string) => ({
  code: 'UPSTREAM_ANSWER_INCOMPLETE',
  message: expect.stringMatching(/already registered.*status is not known/),
  path: ['registerVerification', 'verification'],
  upstream: 'verification',
  id,
  missing: ['status', 'jobResults', 'raw'],
});

/** A registration whose answer was lost (over POST), then the 409 queued for its repeat: its input, key and id. */
async function lostRegistration(t: TestGateway) {
  const input = { workflowId: 'wf-kyc', applicant: { lastName: 'Lost' }, externalId: `lost-${randomUUID()}` };
  const key = randomUUID();
  t.gateway.sandbox.verification!.faults.enqueueFor(VERIFICATIONS_PATH, 'reset-after');
  const first = await t.graphql(REGISTER, { input, key }, { key: AGENT_KEY });
  expect(first.errors?.[0]?.extensions?.code).toBe('UPSTREAM_OUTCOME_UNKNOWN');
  const sentId = sentIdOf(t);
  t.gateway.sandbox.verification!.faults.enqueueFor(VERIFICATIONS_PATH, exists(sentId));
  return { input, key, sentId };
}

/** The last result of one operation over graphql-ws. */
async function overWs(t: TestGateway, variables: Record<string, unknown>): Promise<any> {
  const client = wsClient(t, { key: AGENT_KEY });
  try {
    const ready = connected(client);
    const result = await new Promise<any>((resolve, reject) => {
      let last: any;
      client.subscribe(
        { query: REGISTER, variables },
        { next: (v) => (last = v), error: reject, complete: () => resolve(last) },
      );
    });
    await ready;
    return result;
  } finally {
    await client.dispose();
  }
}

/** The last result of one operation over SSE (graphql-sse, distinct connections). */
async function overSse(t: TestGateway, variables: Record<string, unknown>): Promise<any> {
  const client = createSseClient({
    url: `${t.url}/graphql/stream`,
    retryAttempts: 0,
    headers: { authorization: `Bearer ${AGENT_KEY}` },
  });
  try {
    return await new Promise<any>((resolve, reject) => {
      let last: any;
      client.subscribe(
        { query: REGISTER, variables },
        { next: (v) => (last = v), error: reject, complete: () => resolve(last) },
      );
    });
  } finally {
    client.dispose();
  }
}

/** The warnings an MCP tool's text carries on its last line, as `warnings: <JSON>`; undefined for none. */
const warned = (text: string): unknown => {
  const line = /\nwarnings: (.*)$/.exec(text);
  return line ? JSON.parse(line[1]!) : undefined;
};

describe('the warning of a registration recorded from a 409, on every transport', () => {
  it.each([
    { transport: 'graphql-ws', run: overWs },
    { transport: 'SSE', run: overSse },
  ])('over $transport, on the answer and on its replay', async ({ run }) => {
    const t = await start(env('all'));
    const { input, key, sentId } = await lostRegistration(t);
    const again = await run(t, { input, key });
    expect(again.errors).toBeUndefined();
    expect(again.data.registerVerification).toMatchObject({ replayed: false, verification: { id: sentId } });
    expect(again.extensions?.warnings).toEqual([warningFor(sentId)]);
    const replay = await run(t, { input, key });
    expect(replay.data.registerVerification.replayed).toBe(true);
    expect(replay.extensions?.warnings).toEqual([warningFor(sentId)]);
    expect(registrations(t)).toHaveLength(2);
  });

  it('over an MCP tool (MCP_MUTATIONS=all), in its text, on the answer and on its replay', async () => {
    const t = await start(env('all'));
    const mcp = await connect(t, { key: AGENT_KEY });
    const { input, key, sentId } = await lostRegistration(t);
    const again = await mcp.call('register_verification', { input, idempotencyKey: key });
    expect(again.isError, textOf(again)).toBeFalsy();
    expect(again.structuredContent!.registerVerification).toMatchObject({ replayed: false });
    expect(warned(textOf(again))).toEqual([warningFor(sentId)]);
    const replay = await mcp.call('register_verification', { input, idempotencyKey: key });
    expect(replay.structuredContent!.registerVerification).toMatchObject({ replayed: true });
    expect(warned(textOf(replay))).toEqual([warningFor(sentId)]);
    expect(registrations(t)).toHaveLength(2);
  });

  it('over an agent plan’s execute_plan (MCP_MUTATIONS=approve), on its run and on the replay of its outcome', async () => {
    const t = await start(env('approve'));
    const agent = await connect(t, { key: AGENT_KEY });
    const input = { workflowId: 'wf-kyc', applicant: { lastName: 'Planned' }, externalId: `plan-${randomUUID()}` };
    const planned = await agent.call('register_verification', { input });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const planId = planned.structuredContent!.planId as string;
    expect((await t.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
      approvePlan: { status: 'APPROVED' },
    });

    // The plan's run sends the registration, and its answer is lost: UNKNOWN, run again once approved again.
    t.gateway.sandbox.verification!.faults.enqueueFor(VERIFICATIONS_PATH, 'reset-after');
    const lost = await agent.call('execute_plan', { planId });
    expect(lost.structuredContent).toMatchObject({ planId, status: 'UNKNOWN' });
    const sentId = sentIdOf(t);
    await approveAgainAsUnknown(t, planId);
    t.gateway.sandbox.verification!.faults.enqueueFor(VERIFICATIONS_PATH, exists(sentId));

    const ran = await agent.call('execute_plan', { planId });
    expect(ran.isError, textOf(ran)).toBeFalsy();
    expect(ran.structuredContent).toMatchObject({
      planId,
      status: 'SUCCEEDED',
      replayed: false,
      registerVerification: { verification: { id: sentId } },
    });
    expect(warned(textOf(ran))).toEqual([warningFor(sentId)]);
    // Calling execute_plan again replays the stored outcome: with its warning, as a replay of the key over any
    // other transport carries it.
    const replayed = await agent.call('execute_plan', { planId });
    expect(replayed.structuredContent).toMatchObject({ planId, status: 'SUCCEEDED', replayed: true });
    expect(warned(textOf(replayed))).toEqual([warningFor(sentId)]);
    // As on its run, the warning is in the text, and the structured content is the data.
    expect(replayed.structuredContent).not.toHaveProperty('warnings');
    expect(replayed.structuredContent!.registerVerification).toEqual(ran.structuredContent!.registerVerification);
    expect(registrations(t)).toHaveLength(2);
  });
});
