// The rule that decides what a plan's finished run left it as (src/agents/workflow.ts `runStatus`). An error after
// which the request may have been applied, or was not sent yet, leaves the plan UNKNOWN: it runs again under the same
// idempotency keys, so a retry creates once. Any other failure is final.
//
// SERVICE_UNAVAILABLE, the gateway's own database failing, used to leave the plan FAILED for good. The contract's
// fault matrix says why it must not: with "PostgreSQL restarted during a request" the upstream created the resource
// under the key before the database failed, and a retry with the same key returns it. The race that stores it (the
// creation's own write failing and the plan's write, just after, succeeding) cannot be staged with a real database;
// when both fail, the plan is recovered as unknown by the takeover (test/server/mcp/mcp-plan-left-executing.test.ts).
import { describe, expect, it } from 'vitest';

import { runStatus } from '../../src/agents/workflow.js';

describe("a plan's finished run", () => {
  it('succeeded without errors', () => {
    expect(runStatus(false, [])).toBe('succeeded');
  });

  it.each([
    'SERVICE_UNAVAILABLE',
    'UPSTREAM_OUTCOME_UNKNOWN',
    'UPSTREAM_UNAVAILABLE',
    'IDEMPOTENCY_KEY_IN_USE',
    'RATE_LIMITED',
    'INTERNAL_SERVER_ERROR',
  ])('is unknown, to run again under its keys, after %s', (code) => {
    expect(runStatus(true, [{ code }])).toBe('unknown');
    // One such error among final ones is enough: the request it names may have been applied.
    expect(runStatus(true, [{ code: 'UPSTREAM_REJECTED' }, { code }])).toBe('unknown');
  });

  it.each(['UPSTREAM_REJECTED', 'BAD_USER_INPUT', 'CONFLICT', 'NOT_FOUND', 'FORBIDDEN'])(
    'failed for good after %s alone',
    (code) => {
      expect(runStatus(true, [{ code }])).toBe('failed');
    },
  );
});
