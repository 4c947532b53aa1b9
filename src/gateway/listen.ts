// The HTTP server of the gateway: where it listens, what it answers while it starts, and how it drains at shutdown.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';

import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import { startingHandler } from '../server/health.js';
import { createRequestHandler, RequestArrivals, requestIdOf } from '../server/http.js';
import { refuseShuttingDown, refuseUnreadRequest } from '../server/respond.js';
import { SHUTDOWN } from './options.js';
import type { Transports } from './transports.js';

export class GatewayServer {
  readonly server = http.createServer();
  /** The requests served so far, counted for the store's commit window (RequestArrivals). */
  readonly arrivals = new RequestArrivals();
  /** `http://<host>:<port>`, known once it listens (127.0.0.1 when bound to all interfaces). */
  url = '';
  /** True from the moment the drain begins: /readyz then answers 503 on every connection, a kept-alive one too. */
  draining = false;
  private starting: RequestListener | null = null;
  /** What `serve` listens with: the drain takes the WebSocket upgrades from the transports (`refuseUpgrades`). */
  private served: { request: RequestListener; upgrade: UpgradeListener } | null = null;

  constructor(
    private readonly port: number,
    private readonly host: string,
  ) {
    this.server.keepAliveTimeout = 65_000;
    this.server.on('clientError', refuseUnreadRequest);
  }

  async listen(): Promise<void> {
    const { server, host } = this;
    await new Promise<void>((resolve, reject) => {
      const refused = (err: Error) => reject(listenFailure(err, this.port, host));
      server.once('error', refused);
      server.listen(this.port, host, () => {
        server.off('error', refused);
        resolve();
      });
    });
    const address = server.address() as AddressInfo;
    const shownHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
    this.url = `http://${shownHost}:${address.port}`;
  }

  /**
   * Listens at once, alive but not ready (/readyz says `why()`, every other route `said()`), while what the gateway
   * waits for (PostgreSQL) comes; `serve` takes over once everything is built.
   */
  async listenWhileStarting(why: () => string, said?: () => string): Promise<void> {
    this.starting = startingHandler(why, said);
    this.server.on('request', this.starting);
    await this.listen();
  }

  /** Serves the transports (listening now when it did not while starting). */
  async serve(transports: Transports, logger: Logger, metrics: Metrics): Promise<void> {
    if (this.starting) this.server.off('request', this.starting);
    this.served = {
      request: createRequestHandler({ routes: transports.routes, logger, metrics, arrivals: this.arrivals }),
      upgrade: (req, socket, head) => transports.upgrade(req, socket, head),
    };
    this.server.on('request', this.served.request);
    this.server.on('upgrade', this.served.upgrade);
    if (!this.server.listening) await this.listen();
  }

  /**
   * Stops accepting and lets in-flight requests finish: keep-alive connections are closed as they go idle, and what
   * is left is cut after SHUTDOWN.drainMs.
   */
  drain(): Promise<void> {
    const { server } = this;
    this.draining = true;
    this.refuseUpgrades();
    if (!server.listening) return Promise.resolve();
    return new Promise<void>((resolve) => {
      server.close(() => resolve());
      const sweep = setInterval(() => server.closeIdleConnections(), 50);
      const cut = setTimeout(() => server.closeAllConnections(), SHUTDOWN.drainMs);
      server.once('close', () => {
        clearInterval(sweep);
        clearTimeout(cut);
      });
      server.closeIdleConnections();
    });
  }

  /**
   * From the drain on, a WebSocket upgrade (on a connection kept alive from before) is refused in the gateway's words,
   * as the SSE route refuses a reservation then. The WebSocket route has closed, and ws would answer a bare 503 (no
   * body, no request id, no Retry-After) on the socket at once, ahead of the answer the connection still owes a request
   * sent before it. With no 'upgrade' listener, Node hands an upgrade to 'request' as any request: answered in turn.
   */
  private refuseUpgrades(): void {
    const { served, server } = this;
    if (!served) return;
    this.served = null;
    server.off('upgrade', served.upgrade);
    server.off('request', served.request);
    server.on('request', (req, res) => {
      if (!isUpgrade(req)) return served.request(req, res);
      req.resume();
      refuseShuttingDown(res, { 'x-request-id': requestIdOf(req), connection: 'close' });
    });
  }
}

/**
 * A port or an interface the gateway cannot listen on: the message names the variable to change (PORT or HOST) and
 * what to do, for an operator who reads it without a stack trace (src/main.ts).
 */
export class ListenError extends Error {
  constructor(message: string, options: { cause: unknown }) {
    super(message, options);
    this.name = 'ListenError';
  }
}

/**
 * Why listen failed, in the operator's words, for the failures a setting explains: another process on the port (a
 * second `npm start`, another server on 4000), a privileged port, an address of no interface of this machine, a name
 * that does not resolve. Anything else is unexpected and kept as it is, stack and all.
 */
function listenFailure(err: Error, port: number, host: string): Error {
  const code = (err as NodeJS.ErrnoException).code;
  const where = `PORT ${port} (HOST ${host})`;
  if (code === 'EADDRINUSE')
    return new ListenError(
      `${where}: another process listens on this port (EADDRINUSE): stop it, or set PORT to a free port`,
      { cause: err },
    );
  if (code === 'EACCES' || code === 'EPERM')
    return new ListenError(
      `${where}: this process may not listen on this port (${code}): a port below 1024 needs privileges; set PORT to 1024 or above`,
      { cause: err },
    );
  if (code === 'EADDRNOTAVAIL')
    return new ListenError(
      `HOST ${host}: no interface of this machine has this address (EADDRNOTAVAIL): set HOST to one of its addresses, or leave it unset to listen on every interface`,
      { cause: err },
    );
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN')
    return new ListenError(
      `HOST ${host}: the host name does not resolve (${code}): set HOST to an address or a name of this machine`,
      { cause: err },
    );
  return err;
}

type RequestListener = (req: http.IncomingMessage, res: http.ServerResponse) => void;
type UpgradeListener = (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void;

/** A request Node would hand to 'upgrade' (its parser's test): `Connection: upgrade` and an `Upgrade` header. */
function isUpgrade(req: http.IncomingMessage): boolean {
  return req.headers.upgrade !== undefined && /(?:^|,)\s*upgrade\s*(?:,|$)/i.test(req.headers.connection ?? '');
}
