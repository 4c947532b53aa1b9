import { afterEach, describe, expect, it, vi } from 'vitest';
import type { WebSocket } from 'ws';

import { KEEP_ALIVE_SLOTS, KeepAliveSweep } from '../../src/server/keep-alive.js';

// The keep-alive's pings are spread over each half interval, a slot of the connections a tick, instead of going out in
// one turn of the event loop (docs/decisions/098: 10,000 quiet connections pinged at once held the loop and the peers
// for 100–200 ms every 12 s). Real connections and the whole cycle (ping, answer, terminate) are in
// test/server/ws-keep-alive.test.ts; here, only what a tick does, with stand-ins for the sockets and the test's clock.

const INTERVAL_MS = 12_000;

/** A stand-in for an open ws connection whose peer never sends: what the sweep reads and calls, counted. */
function quietSocket() {
  return {
    OPEN: 1,
    CLOSED: 3,
    readyState: 1,
    pings: 0,
    ping() {
      this.pings += 1;
    },
    terminate() {
      this.readyState = 3;
    },
  };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('the keep-alive sweep', () => {
  it.each([
    [KEEP_ALIVE_SLOTS, 2],
    [1, 48],
  ])(
    'with %i slot(s), 48 quiet connections get their pings at most %i a tick, all of them within a half interval',
    (slots, most) => {
      vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
      const sockets = Array.from({ length: 48 }, quietSocket);
      const sweep = new KeepAliveSweep(INTERVAL_MS, slots);
      for (const s of sockets) sweep.opened(s as unknown as WebSocket, { bytesRead: 7 } as never);
      const pinged = () => sockets.reduce((n, s) => n + s.pings, 0);
      // The first pass only notes what each peer has sent.
      vi.advanceTimersByTime(INTERVAL_MS / 2);
      expect(pinged()).toBe(0);
      // The second pass pings every quiet connection, one tick at a time.
      const tick = INTERVAL_MS / 2 / slots;
      let before = 0;
      for (let t = 0; t < slots; t++) {
        vi.advanceTimersByTime(tick);
        const now = pinged();
        expect(now - before).toBeLessThanOrEqual(most);
        before = now;
      }
      expect(sockets.map((s) => s.pings)).toEqual(sockets.map(() => 1));
      // A whole interval after its ping, a connection that never answered is terminated; none before.
      vi.advanceTimersByTime(INTERVAL_MS / 2);
      expect(sockets.filter((s) => s.readyState === 3)).toHaveLength(0);
      vi.advanceTimersByTime(tick);
      expect(sockets.filter((s) => s.readyState === 3)).toHaveLength(slots === 1 ? 48 : 2);
      sweep.stop();
    },
  );

  it('forgets a closed connection at its slot’s next visit, and stops its timer once none is left', () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const sockets = Array.from({ length: 3 }, quietSocket);
    const sweep = new KeepAliveSweep(INTERVAL_MS);
    for (const s of sockets) sweep.opened(s as unknown as WebSocket, { bytesRead: 7 } as never);
    expect(vi.getTimerCount()).toBe(1);
    for (const s of sockets) s.readyState = 3;
    vi.advanceTimersByTime(INTERVAL_MS / 2);
    expect(sockets.map((s) => s.pings)).toEqual([0, 0, 0]);
    expect(vi.getTimerCount()).toBe(0);
  });
});
