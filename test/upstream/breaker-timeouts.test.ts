// Which failures open an upstream's circuit (docs/decisions/056): the upstream's health, not one app's payload. A
// timeout while the upstream answered other calls is that request's own (one app's huge provisioning); timeouts with
// nothing answered meanwhile, transport errors and 502/503/504 are the upstream's. The breaker itself, its clock and
// its order of events in the test's hands: nothing here depends on timing.
import { describe, expect, it } from 'vitest';

import { CircuitBreaker, PASS } from '../../src/upstream/breaker.js';

const SETTINGS = { enabled: true, volume: 4, errorThreshold: 0.5, resetTimeoutMs: 30_000, halfOpenAttempts: 2 };

function breaker(): CircuitBreaker {
  return new CircuitBreaker('cloud', SETTINGS, { transition: () => undefined, shortCircuit: () => undefined }, () => 0);
}

describe('an upstream circuit and timeouts', () => {
  it("stays closed while one app's calls time out and the upstream answers every other app's meanwhile", () => {
    const b = breaker();
    for (let i = 0; i < 10; i++) {
      // The slow call goes out; two other apps' calls go out after it and are answered before it times out.
      const slow = b.pass();
      const startedAt = b.answered;
      for (let j = 0; j < 2; j++) b.record(b.pass(), false);
      b.recordTimeout(slow, startedAt);
    }
    expect(b.state).toBe('closed');
    expect(b.pass()).toBe(PASS);
  });

  it('opens when calls time out and the upstream answers nothing meanwhile (it hangs for everyone)', () => {
    const b = breaker();
    b.record(b.pass(), false);
    for (let i = 0; i < 3; i++) {
      const call = b.pass();
      b.recordTimeout(call, b.answered);
    }
    expect(b.state).toBe('open');
  });

  it('still opens on 502/503/504 and transport errors, whatever else was answered', () => {
    const b = breaker();
    for (let i = 0; i < 4; i++) {
      b.record(b.pass(), false);
      b.record(b.pass(), true);
      b.record(b.pass(), true);
    }
    expect(b.state).toBe('open');
  });
});
