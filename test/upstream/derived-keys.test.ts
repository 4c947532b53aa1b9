import fc from 'fast-check';
import { v5 as uuidv5 } from 'uuid';
import { describe, expect, it } from 'vitest';

import { stepKey, upstreamKey } from '../../src/upstream/idempotency.js';

/**
 * The upstream Idempotency-Key and the per-step keys are UUIDv5 (docs/contract.md, Idempotency). The gateway derives them
 * with node:crypto's SHA-1 instead of the uuid package (docs/decisions/036): a key sent upstream must stay the very same, or
 * a retry after an upgrade would create the resource twice.
 */
const UPSTREAM_NAMESPACE = 'b3c1e0b4-6a43-5d0e-9f5a-2d7c4e8a1f60';
const STEP_NAMESPACE = '6f1c1f0e-8f3a-4c4e-9a59-2f8f3c1d7b21';

describe('derived idempotency keys', () => {
  it("are the uuid package's UUIDv5 of scope and key, and of key and step, for any key", () => {
    const scope = fc.oneof(fc.constant('open'), fc.stringMatching(/^key:[0-9a-f]{16}$/));
    const key = fc.oneof(fc.uuid(), fc.string(), fc.string({ unit: 'grapheme' }), fc.string({ unit: 'binary' }));
    fc.assert(
      fc.property(scope, key, fc.string(), (s, k, step) => {
        let expected: string | Error;
        try {
          expected = uuidv5(`${s}\u0000${k}`, UPSTREAM_NAMESPACE);
        } catch (error) {
          expected = error as Error;
        }
        if (expected instanceof Error) expect(() => upstreamKey(s, k)).toThrow(expected.message);
        else expect(upstreamKey(s, k)).toBe(expected);
        let expectedStep: string | Error;
        try {
          expectedStep = uuidv5(`${k}/${step}`, STEP_NAMESPACE);
        } catch (error) {
          expectedStep = error as Error;
        }
        if (expectedStep instanceof Error) expect(() => stepKey(k, step)).toThrow(expectedStep.message);
        else expect(stepKey(k, step)).toBe(expectedStep);
      }),
      { numRuns: 3000 },
    );
  });

  it('are the values every earlier version sent for a known key', () => {
    expect(upstreamKey('open', '00000000-0000-4000-8000-000000000000')).toBe('c983b77c-592b-5dcb-92c5-b9eb25b915fe');
    expect(stepKey('00000000-0000-4000-8000-000000000000', 'network')).toBe('ba9f22fd-f9ab-5d12-9d66-849f737f3f5d');
  });
});
