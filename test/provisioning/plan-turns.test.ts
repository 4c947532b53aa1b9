// Plans take turns on the event loop (docs/decisions/053): however many are in flight, one turn of the loop runs one
// plan's slice, then I/O is served before the next plan's. The clock is the test's: each unit of work moves it by 1.
import { describe, expect, it } from 'vitest';

import { PlanTurns } from '../../src/provisioning/plan-turns.js';

/** Runs `plans` plans of `units` units each; the log has the plan's name per unit and `|` per turn of the loop. */
async function run(plans: number, units: number, sliceMs: number): Promise<string[]> {
  let clock = 0;
  const log: string[] = [];
  const turns = new PlanTurns({
    sliceMs,
    now: () => clock,
    // The hand-over runs in the loop's check phase, after I/O: one mark per turn of the loop.
    defer: (handOver) =>
      setImmediate(() => {
        log.push('|');
        handOver();
      }),
  });
  const plan = async (name: string) => {
    await turns.acquire();
    try {
      for (let i = 0; i < units; i++) {
        const wait = turns.pause();
        if (wait) await wait;
        clock += 1;
        log.push(name);
      }
    } finally {
      turns.release();
    }
  };
  await Promise.all(Array.from({ length: plans }, (_, i) => plan(String.fromCharCode(97 + i))));
  return log;
}

describe('turns of plans on the event loop', () => {
  it('runs one slice of one plan per turn of the event loop, with 12 plans in flight', async () => {
    const log = await run(12, 9, 3);
    const slices = log
      .join('')
      .split('|')
      .filter((s) => s.length > 0);
    // Each turn: one plan, at most a slice's worth of units.
    for (const slice of slices) {
      expect(new Set(slice).size).toBe(1);
      expect(slice.length).toBeLessThanOrEqual(3);
    }
    // Every unit of every plan ran.
    expect(log.filter((x) => x !== '|')).toHaveLength(12 * 9);
  });

  it('serves the plans in flight round-robin, in the order they asked', async () => {
    const log = await run(3, 6, 2);
    const order = log
      .join('')
      .split('|')
      .filter((s) => s.length > 0)
      .map((s) => s[0]);
    expect(order).toEqual(['a', 'b', 'c', 'a', 'b', 'c', 'a', 'b', 'c']);
  });

  it('gives a plan alone the loop back after each slice too', async () => {
    const log = await run(1, 6, 2);
    expect(log.join('')).toBe('aa|aa|aa');
  });
});
