// MCP_APPROVAL=elicitation: the person's answer approves the plan as the form showed it (docs/agents.md, "Who
// approves", "Running, once"). An identity check whose run ended UPSTREAM_OUTCOME_UNKNOWN has spent its approval: the
// client echoing the form it answered for the first run (its sealed requestState, its inputResponses) approves
// nothing; its person is asked anew, told that the outcome is unknown, and the upstream gets nothing more until then;
// their answer to that form runs it again.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';

import { appsFile, gatewaysPerTest } from '../helpers/gateway.js';

const start = gatewaysPerTest();
const AGENT_KEY = 'agent-key-0123456789';

const clients: Client[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close().catch(() => undefined)));
});

interface Answer {
  resultType?: string;
  isError?: boolean;
  requestState?: string;
  inputRequests?: Record<string, { params?: { message?: string } }>;
  structuredContent?: Record<string, unknown>;
}

/**
 * A gateway under MCP_MUTATIONS=approve and MCP_APPROVAL=elicitation, and an agent's client that answers forms itself
 * (manual mode), so that it can send an answer again: `call` calls execute_plan and returns its answer as it comes.
 */
async function replayingClient(prefix: string) {
  const gw = await start({
    GATEWAY_APPS_FILE: appsFile(prefix, [
      { name: 'agent', scopes: ['identity:read', 'identity:write'], key: AGENT_KEY },
    ]),
    MCP_MUTATIONS: 'approve',
    MCP_APPROVAL: 'elicitation',
  });
  const client = new Client(
    { name: 'replaying-client', version: '1.0.0' },
    {
      versionNegotiation: { mode: 'auto' },
      capabilities: { elicitation: { form: {} } },
      inputRequired: { autoFulfill: false },
    },
  );
  client.setRequestHandler('elicitation/create', () => ({ action: 'decline' }));
  clients.push(client);
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${gw.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${AGENT_KEY}` } },
    }),
  );
  const call = async (args: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    (await client.callTool({ name: 'execute_plan', arguments: args, ...extra }, {
      allowInputRequired: true,
    } as never)) as unknown as Answer;
  return { gw, client, call };
}

describe('an elicited approval binds the plan as it was shown', () => {
  it("a replayed accept of a pending plan's form does not run it again once its outcome is unknown", async () => {
    const { gw, client, call } = await replayingClient('elicited-status-');

    const planned = (await client.callTool({
      name: 'create_identification',
      arguments: { input: { workflowId: 'wf-elicited' } },
    })) as unknown as Answer;
    const planId = planned.structuredContent!.planId as string;
    const asked = await call({ planId });
    expect(asked.resultType).toBe('input_required');
    const accept = {
      inputResponses: { approval: { action: 'accept', content: { approve: true } } },
      requestState: asked.requestState,
    };

    const identification = gw.gateway.sandbox.identification!;
    // The upstream creates the identification, then the connection resets: the gateway cannot know.
    identification.faults.enqueueFor(() => true, 'reset-after');
    const first = await call({ planId }, accept);
    identification.faults.clear();
    expect(first.structuredContent).toMatchObject({ status: 'UNKNOWN' });
    expect(identification.requests).toHaveLength(1);

    // The same answer, sent again: the person approved the first run of a pending plan, not a second one.
    const replayed = await call({ planId }, accept);
    expect(identification.requests).toHaveLength(1);
    expect(replayed.resultType, JSON.stringify(replayed)).toBe('input_required');
    expect(replayed.inputRequests!.approval!.params!.message).toContain('unknown');

    // The person, told that the outcome is unknown, approves this form: the plan runs again, under the same key.
    const again = await call(
      { planId },
      {
        inputResponses: { approval: { action: 'accept', content: { approve: true } } },
        requestState: replayed.requestState,
      },
    );
    expect(again.isError, JSON.stringify(again)).toBeFalsy();
    expect(again.structuredContent).toMatchObject({ planId, status: 'SUCCEEDED' });
    expect(identification.requests).toHaveLength(2);
    expect(new Set(identification.requests.map((r) => r.headers['idempotency-key'])).size).toBe(1);
  });

  it("a replayed accept of an unknown plan's form does not run it a third time once its rerun is unknown too", async () => {
    const { gw, client, call } = await replayingClient('elicited-rerun-');
    const accepting = (asked: Answer) => ({
      inputResponses: { approval: { action: 'accept', content: { approve: true } } },
      requestState: asked.requestState,
    });
    const identification = gw.gateway.sandbox.identification!;
    /** The upstream creates the identification, then the connection resets: the run's outcome is unknown. */
    const unknownRun = async (answer: Record<string, unknown>) => {
      identification.faults.enqueueFor(() => true, 'reset-after');
      const ran = await call({ planId }, answer);
      identification.faults.clear();
      expect(ran.structuredContent, JSON.stringify(ran)).toMatchObject({ status: 'UNKNOWN' });
    };

    const planned = (await client.callTool({
      name: 'create_identification',
      arguments: { input: { workflowId: 'wf-elicited-rerun' } },
    })) as unknown as Answer;
    const planId = planned.structuredContent!.planId as string;
    await unknownRun(accepting(await call({ planId })));
    expect(identification.requests).toHaveLength(1);

    // The person, told that the outcome is unknown, approves one rerun; its outcome is unknown too.
    const askedAgain = await call({ planId });
    expect(askedAgain.resultType).toBe('input_required');
    const rerun = accepting(askedAgain);
    await unknownRun(rerun);
    expect(identification.requests).toHaveLength(2);

    // The client sends that answer again (its answer lost, say): the person approved the second run, not a third.
    const replayed = await call({ planId }, rerun);
    expect(identification.requests).toHaveLength(2);
    expect(replayed.resultType, JSON.stringify(replayed)).toBe('input_required');
    expect(replayed.inputRequests!.approval!.params!.message).toContain('unknown');
  });
});
