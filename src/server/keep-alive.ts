import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';

/**
 * What the sweep knows of a connection: the TCP socket under it (its `bytesRead` says whether the peer sent anything),
 * the bytes its peer had sent at its last visit, and the pass of a ping not yet answered (0: none).
 */
interface Heard {
  readonly raw: Duplex;
  read: number;
  pingedAt: number;
}

/**
 * The slots a pass is cut into: each connection is visited in its own slot, one slot a tick, so a pass's pings go out
 * over the half interval rather than in one burst (docs/decisions/098: 10,000 quiet connections pinged in one turn
 * held the event loop and the peers for 100–200 ms every 12 s, the realistic mix's whole tail).
 */
export const KEEP_ALIVE_SLOTS = 24;

/**
 * WebSocket keep-alive for every connection of a server with one timer. A pass over the connections takes half an
 * interval, one slot of them a tick (a connection keeps its slot for its life, so it is visited every half interval). A
 * connection whose peer sent nothing (no byte on its TCP socket: no message, no pong, no ping) since its previous
 * visit is pinged, once; one that answers is heard from at its next visit, and one that has sent nothing a whole
 * interval after its ping is terminated. A connection that sends (in the realistic mix, every connection that
 * subscribes again) is never pinged: bytes from the peer prove it alive, and bytes to it would not (a write to a dead
 * peer succeeds into the kernel's buffer). A quiet live connection is pinged once per interval, as graphql-ws's own
 * keep-alive pings every connection; a dead peer is terminated at most two intervals after the last byte it sent, the
 * same bound as graphql-ws's (a ping at most an interval after, the terminate an interval after the ping). graphql-ws's
 * keep-alive costs two timers per connection per interval (its interval and the pong's wait) and a pong listener per
 * ping; this one costs one timer and one small record per connection (docs/decisions/090, 098).
 */
export class KeepAliveSweep {
  /** The open connections by slot (a closed one leaves at its slot's next visit). */
  private readonly slots: Map<WebSocket, Heard>[];
  private connections = 0;
  /** Slots visited since the timer started: `ticks % slots` is the next one, `ticks / slots` the pass. */
  private ticks = 0;
  private assigned = 0;
  private timer: NodeJS.Timeout | undefined;

  /**
   * @param intervalMs graphql-ws's keep-alive interval, whose bounds this keeps
   * @param slotCount the slots a pass is cut into (1: every connection visited in one turn)
   */
  constructor(
    private readonly intervalMs: number,
    slotCount = KEEP_ALIVE_SLOTS,
  ) {
    this.slots = Array.from({ length: slotCount }, () => new Map());
  }

  /** A connection opened: the ticks run while any is open (the timer is made here, so a test's clock governs it). */
  opened(socket: WebSocket, raw: Duplex): void {
    this.slots[this.assigned++ % this.slots.length]!.set(socket, { raw, read: -1, pingedAt: 0 });
    this.connections += 1;
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => this.tick(), this.intervalMs / 2 / this.slots.length);
    this.timer.unref();
  }

  /** One slot's visit (see the class). */
  tick(): void {
    const slots = this.slots.length;
    const slot = this.slots[this.ticks % slots]!;
    const pass = Math.floor(this.ticks / slots) + 1;
    this.ticks += 1;
    for (const [socket, state] of slot) {
      if (socket.readyState !== socket.OPEN) {
        if (socket.readyState === socket.CLOSED) {
          slot.delete(socket);
          this.connections -= 1;
        }
        continue;
      }
      const read = (state.raw as { bytesRead?: number }).bytesRead ?? 0;
      if (state.read !== read) {
        state.read = read;
        state.pingedAt = 0;
      } else if (state.pingedAt === 0) {
        state.pingedAt = pass;
        socket.ping();
      } else if (pass - state.pingedAt >= 2) {
        socket.terminate();
      }
    }
    if (this.connections === 0) this.stop();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.ticks = 0;
  }
}
