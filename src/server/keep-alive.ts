import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';

/**
 * WebSocket keep-alive for every connection of a server with one timer: a sweep every half interval. A connection whose
 * peer sent nothing (no byte on its TCP socket: no message, no pong, no ping) since the previous sweep is pinged, once;
 * one that answers is heard from at the next sweep, and one that has sent nothing a whole interval after its ping is
 * terminated. A connection that sends (in the realistic mix, every connection that subscribes again) is never pinged:
 * bytes from the peer prove it alive, and bytes to it would not (a write to a dead peer succeeds into the kernel's
 * buffer). A quiet live connection is pinged once per interval, as graphql-ws's own keep-alive pings every connection;
 * a dead peer is terminated at most two intervals after the last byte it sent, the same bound as graphql-ws's (a ping
 * at most an interval after, the terminate an interval after the ping). graphql-ws's keep-alive costs two timers per
 * connection per interval (its interval and the pong's wait) and a pong listener per ping; this one costs one timer
 * per sweep and one small record per connection (docs/decisions/090).
 */
export class KeepAliveSweep {
  /** Per connection: the bytes its peer had sent at the last sweep, and the sweep of a ping not yet answered (0: none). */
  private readonly heard = new WeakMap<WebSocket, { read: number; pingedAt: number }>();
  private sweeps = 0;
  private timer: NodeJS.Timeout | undefined;

  /**
   * @param clients the server's open connections (ws's `clients`)
   * @param raw the TCP socket under a connection (its `bytesRead` says whether the peer sent anything)
   * @param intervalMs graphql-ws's keep-alive interval, whose bounds this keeps
   */
  constructor(
    private readonly clients: ReadonlySet<WebSocket>,
    private readonly raw: (socket: WebSocket) => Duplex | undefined,
    private readonly intervalMs: number,
  ) {}

  /** A connection opened: the sweeps run while any is open (the timer is made here, so a test's clock governs it). */
  opened(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => this.sweep(), this.intervalMs / 2);
    this.timer.unref();
  }

  /** One pass over the open connections (see the class). */
  sweep(): void {
    if (this.clients.size === 0) return this.stop();
    const now = ++this.sweeps;
    for (const socket of this.clients) {
      if (socket.readyState !== socket.OPEN) continue;
      const read = (this.raw(socket) as { bytesRead?: number } | undefined)?.bytesRead ?? 0;
      const state = this.heard.get(socket);
      if (state === undefined) {
        this.heard.set(socket, { read, pingedAt: 0 });
      } else if (state.read !== read) {
        state.read = read;
        state.pingedAt = 0;
      } else if (state.pingedAt === 0) {
        state.pingedAt = now;
        socket.ping();
      } else if (now - state.pingedAt >= 2) {
        socket.terminate();
      }
    }
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
