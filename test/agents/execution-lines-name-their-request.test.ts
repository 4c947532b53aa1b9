// An agent plan's execution logs, from its heartbeat while the run waits on the upstream and from its end, with the
// request id of the execute_plan call that claimed it (docs/operations.md, Logs): the id of that call's own `request`
// line, which the client read in `X-Request-Id`. The run is not bound to its request's life (a client that leaves
// does not stop it), so its lines name the request rather than rely on being written while it runs. Only an internal
// throw reaches the heartbeat's line: ONE method of the store's plan rows is replaced, and restored after it.
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { AgentPlanRows } from '../../src/store/agent-plans.js';
import { gatewaysPerTest, logLines, type TestGateway } from '../helpers/gateway.js';
import { AGENT_KEY, APPROVER_KEY, mcpClientsPerTest, planApps, rawMcpPost, textOf } from '../helpers/mcp.js';
import { waitFor } from '../helpers/wait.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();
/** A secret the thrown error carries, at a key the log masks: it never reaches a line. */
const SECRET = `s3cret-${randomUUID()}`;

afterEach(() => {
  vi.restoreAllMocks();
});

interface Line {
  msg: string;
  requestId?: string;
  planId?: string;
  agentAudit?: { planId: string; action: string };
  level: number;
}

const lines = (gw: TestGateway, keep: (l: Line) => boolean) => logLines<Line>(gw, keep);

describe("an agent plan's execution logs with the request that claimed it", () => {
  it("a failing heartbeat while the run waits upstream, and the end's audit line, name that request", async () => {
    // A heartbeat every 100 ms of the wall's; the run's upstream call waits as long as the upstream holds it.
    const gw = await start({
      GATEWAY_APPS_FILE: planApps('execution-lines-'),
      MCP_MUTATIONS: 'approve',
      IDEMPOTENCY_TAKEOVER: '300ms',
      UPSTREAM_TIMEOUT: '10m',
    });
    const c = await connect(gw, { key: AGENT_KEY });
    const planned = await c.call('create_project', { input: { name: 'execution-lines' } });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const planId = planned.structuredContent!.planId as string;
    const approved = await gw.graphql(
      'mutation($id: ID!) { approvePlan(planId: $id) { status } }',
      { id: planId },
      { key: APPROVER_KEY },
    );
    expect(approved.data, JSON.stringify(approved.errors)).toEqual({ approvePlan: { status: 'APPROVED' } });

    const held = gw.gateway.sandbox.cloud!.faults.hold();
    // Let go in any case: a held call would keep the gateway from closing.
    try {
      vi.spyOn(AgentPlanRows.prototype, 'touch').mockRejectedValue(
        Object.assign(new Error('unexpected [heartbeat]'), { password: SECRET }),
      );
      const executing = `execute-${randomUUID()}`;
      const answer = rawMcpPost(
        gw,
        AGENT_KEY,
        { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'execute_plan', arguments: { planId } } },
        { 'x-request-id': executing },
      );
      await waitFor(() => held.arrived() > 0, 20_000, 'the plan’s creation at the upstream');
      await waitFor(
        () => lines(gw, (l) => l.msg === 'agent plan heartbeat failed').length > 0,
        20_000,
        'a heartbeat that failed',
      );
      vi.restoreAllMocks();
      held.release();
      const { status, messages } = await answer;
      expect(status).toBe(200);
      expect(messages[0]!.result.structuredContent).toMatchObject({ planId, status: 'SUCCEEDED' });

      expect(lines(gw, (l) => l.msg === 'request' && l.requestId === executing)).toHaveLength(1);
      const beats = lines(gw, (l) => l.msg === 'agent plan heartbeat failed');
      for (const beat of beats) expect(beat).toMatchObject({ level: 40, planId, requestId: executing });
      expect(lines(gw, (l) => l.msg === 'agent plan executed')).toEqual([
        expect.objectContaining({ agentAudit: expect.objectContaining({ planId }), requestId: executing }),
      ]);
      expect(gw.logs()).not.toContain(SECRET);
    } finally {
      held.release();
    }
  });
});
