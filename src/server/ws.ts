import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { getSystemErrorName } from 'node:util';
import { GraphQLError, type ExecutionResult, type OperationTypeNode } from 'graphql';
import { CloseCode, handleProtocols } from 'graphql-ws';
import { WebSocketServer, type ServerOptions, type WebSocket } from 'ws';

import type { Caller } from '../auth/caller.js';
import { expiredNow, onExpiry } from '../auth/jwt.js';
import {
  authorizationOf,
  type Authenticate,
  type AuthFailure,
  type AuthResult,
  type RequestLog,
} from '../auth/keys.js';
import { ErrorCode } from '../errors.js';
import type { Pipeline, Ran, ResultSink } from '../execution/pipeline.js';
import { deliverable, streamFailure, streamPresenter, type StreamOutcome } from '../execution/present.js';
import type { GraphQLContext } from '../graphql/context.js';
import { logUnexpected } from '../logger.js';
import { Delivery, type Holding } from './held-credentials.js';
import { requestIdOf } from './http.js';
import { KeepAliveSweep } from './keep-alive.js';
import type { StreamingTransportOptions } from './streaming.js';
import { graphqlTransportWs, type Operated, type ProtocolConnection } from './ws-protocol.js';

export interface WsOptions extends StreamingTransportOptions {
  /** The execution pipeline's one entry: every operation runs through it (src/execution/pipeline.ts). */
  pipeline: Pipeline;
  /** GRAPHQL_MAX_BODY_BYTES: the largest WebSocket message (a larger one closes the socket, 1009). */
  maxMessageBytes?: number;
  /**
   * SUBSCRIBER_BUFFER_BYTES: a connection with more unsent bytes than this when a result is to be written is closed
   * (1013) with the last cursor of that subscription, and the result is not written. Default 8 MiB.
   */
  subscriberBufferBytes?: number;
  /** Called with `slow_consumer` for each connection closed as above (gateway_subscriptions_closed_total). */
  onClosed?: (reason: 'slow_consumer') => void;
  /**
   * DELIVERY_COMPLETE_WITH_LAST (default true): a subscription's last result (its event stream ended with it) is
   * written with the `complete` the protocol would write after it, and the subscription ends there (docs/decisions/089).
   */
  completeWithLast?: boolean;
  /**
   * DELIVERY_ONE_WRITE (default true): a subscription's `next` (and with its last result its `complete`) framed here
   * as the WebSocket text frames ws would write, into one buffer and one write to the TCP socket; false, each message
   * through ws's `send` (docs/decisions/093). The same bytes either way.
   */
  oneWrite?: boolean;
  /**
   * DELIVERY_DIRECT_WRITE (default true; with DELIVERY_ONE_WRITE): a socket's first result of a tick, when nothing is
   * queued on that socket, is written at the tick's end to its TCP handle, below Node's stream (docs/decisions/150);
   * false, or where Node offers no such write, every result goes through the socket's stream. The same bytes either way.
   */
  directWrite?: boolean;
  /**
   * WS_KEEP_ALIVE_SWEEP: true (the default), one pass over the connections every half interval, a slot of them a tick,
   * pings only those whose peer sent nothing since their last visit (src/server/keep-alive.ts); false, graphql-ws's
   * keep-alive (src/server/ws-protocol.ts keeps it), a timer per connection pinging every one. Either way a
   * dead peer is terminated within two intervals of its last byte.
   */
  keepAliveSweep?: boolean;
}

/** A close reason fits in 123 bytes (RFC 6455 §5.5: a control frame's payload is at most 125, 2 of them the code). */
function closeReason(text: string, most = 123): string {
  const bytes = Buffer.from(text);
  return bytes.length <= most
    ? text
    : `${bytes
        .subarray(0, most - 3)
        .toString('utf8')
        .replace(/\uFFFD+$/, '')}...`;
}

/**
 * The reason of a slow consumer's 1013, naming its subscription and the cursor to resume it after. The cursor is what
 * the client resumes from, so when both pass the 123 bytes a reason holds (the graphql-ws client names a subscription
 * by a UUID), the id is cut, not the cursor.
 */
function slowReason(id: string, cursor: string): string {
  const head = 'Try again later: slow consumer; resume ';
  const tail = ` after ${cursor}`;
  const text = `${head}${id}${tail}`;
  const room = 123 - Buffer.byteLength(head) - Buffer.byteLength(tail);
  if (Buffer.byteLength(text) <= 123 || room < 4) return closeReason(text);
  return `${head}${closeReason(id, room)}${tail}`;
}

/**
 * Ends a connection whose JWT expired: 4403, as a new connection with the token would get, and the code graphql-ws
 * clients retry (4401 they do not), asking connectionParams for a fresh token.
 */
function expire(socket: WebSocket, reason: string): void {
  socket.close(CloseCode.Forbidden, closeReason(`Forbidden: ${reason}; reconnect with a new token`));
}

const ALL_OPERATIONS = ['query', 'mutation', 'subscription'] as OperationTypeNode[];

/** How much shorter `{"id":<id>,"type":"complete"}` is than `{"id":<id>,"type":"next","payload":` (see `frames`). */
const COMPLETE_SHORTER = Buffer.byteLength('next","payload":') - Buffer.byteLength('complete"}');

/** The length of a WebSocket frame's header for a message of `n` bytes, as ws's Sender writes it (unmasked). */
const headerLength = (n: number): number => (n > 65535 ? 10 : n > 125 ? 4 : 2);

/**
 * A server's text frame header (RFC 6455 §5.2: FIN, opcode 1, no mask, the shortest length encoding; ws's Sender.frame
 * for a server without permessage-deflate) for a message of `n` bytes, written at `at`; returns where the message goes.
 */
function writeHeader(out: Buffer, at: number, n: number): number {
  out[at] = 0x81;
  if (n > 65535) {
    out[at + 1] = 127;
    out[at + 2] = 0;
    out[at + 3] = 0;
    out.writeUIntBE(n, at + 4, 6);
    return at + 10;
  }
  if (n > 125) {
    out[at + 1] = 126;
    out.writeUInt16BE(n, at + 2);
    return at + 4;
  }
  out[at + 1] = n;
  return at + 2;
}

/**
 * A WebSocket with the TCP socket under it (from the upgrade), whether the sinks corked that socket in this tick, and
 * once admitted its caller: one object per connection, held by each of its subscriptions' sinks.
 */
class Connection {
  corked = false;
  /** The tick's first result for this socket, held for its handle (DELIVERY_DIRECT_WRITE), until the tick ends. */
  held: Buffer | null = null;
  /** Writes of held results to the handle that libuv has not finished (the socket could not take them at once). */
  below = 0;
  /** Set when `connection_init` is admitted, and again when a reload admits its credential. */
  caller: Caller | undefined = undefined;
  /** Set when `connection_init` is admitted: the connection, held for its credential to be checked after a reload. */
  holding: Holding | undefined = undefined;
  /** The protocol's side of the connection, set when it is admitted: its running subscriptions by id. */
  protocol: ProtocolConnection<Connection> | undefined = undefined;
  /** Set when `connection_init` is admitted: cancels the end scheduled at its credential's expiry. */
  unexpire: (() => void) | undefined = undefined;

  constructor(
    readonly ws: WebSocket,
    readonly raw: Duplex,
    /**
     * The upgrade's request id (its X-Request-Id when sane, else one made for it, answered in the 101), once per
     * connection: named `connection` on its operations' log lines, whose `ws:<id>` other connections may share.
     */
    readonly requestId: string,
  ) {}
}

/**
 * A connection held for its credential (src/server/held-credentials.ts). Refused after a reload: 4403, as a new
 * connection with it would get; its subscriptions end with it. A JWT whose keys could not be fetched is not refused
 * but unchecked: 1013, as `connect` answers it, and the client reconnects once the keys can be fetched. Admitted: its
 * caller is the reloaded one. A class: its methods are not two closures made for every connection.
 */
class HeldConnection implements Holding {
  /** Held while a reload checks the credential: every subscription of the connection then writes nothing. */
  readonly delivery = new Delivery();

  constructor(
    private readonly connection: Connection,
    readonly authorization: Parameters<Authenticate>[0],
    readonly caller: Caller,
    private readonly endForbidden: (connection: Connection, caller: Caller) => void,
  ) {}

  refused(failure: AuthFailure): void {
    // The reload first: a close reason holds 123 bytes, and a JWT's refusal alone fills them.
    if (failure.reason === 'unavailable')
      this.connection.ws.close(
        1013,
        closeReason(`Try again later (the configuration was reloaded): ${failure.message}`),
      );
    else
      this.connection.ws.close(
        CloseCode.Forbidden,
        closeReason(`Forbidden (the configuration was reloaded): ${failure.message}`),
      );
  }

  admitted(caller: Caller): void {
    this.connection.caller = caller;
    this.endForbidden(this.connection, caller);
  }
}

/** A TCP socket's handle, as Node's stream writes to it. */
interface StreamHandle {
  writeBuffer(request: WriteRequest, data: Buffer): number;
}

/** A write request to a handle: Node's WriteWrap, with the fields its C++ side and Node's own writes set. */
interface WriteRequest {
  handle: StreamHandle;
  oncomplete: (this: WriteRequest, status: number) => void;
  async: boolean;
  bytes: number;
  /** The frame, kept while libuv still writes it (a write that did not finish at once). */
  buffer: Buffer | null;
  connection: Connection;
}

/** What Node's streams use to write to a handle (`internalBinding('stream_wrap')`), as `process.binding` offers it. */
interface HandleWrites {
  WriteWrap: new () => WriteRequest;
  /** Filled by each write: whether it finished at once (`kLastWriteWasAsync` 0) or libuv goes on with it. */
  streamBaseState: Int32Array;
  kLastWriteWasAsync: number;
}

/**
 * Node's writes to a stream handle, or null where Node does not offer them (its permission model refuses
 * `process.binding`; a Node without this binding): every result then goes through the socket's stream. The binding is
 * deprecated for programs (DEP0111, documentation-only) and stable in Node 20 to 26, which the tests run.
 */
function handleWrites(): HandleWrites | null {
  try {
    const binding = (process as unknown as { binding(name: string): Partial<HandleWrites> }).binding('stream_wrap');
    const { WriteWrap, streamBaseState, kLastWriteWasAsync } = binding;
    if (typeof WriteWrap !== 'function' || !(streamBaseState instanceof Int32Array)) return null;
    if (typeof kLastWriteWasAsync !== 'number') return null;
    return { WriteWrap, streamBaseState, kLastWriteWasAsync };
  } catch {
    return null;
  }
}

/** A failed write to a handle as Node's stream reports one (`errno`, `code`, `syscall`), to destroy the socket with. */
function writeError(status: number): NodeJS.ErrnoException {
  const code = getSystemErrorName(status);
  return Object.assign(new Error(`write ${code}`), { errno: status, code, syscall: 'write' });
}

/** A handle's write that libuv finished later: a failure destroys the socket, as Node's stream does. */
function afterHandleWrite(this: WriteRequest, status: number): void {
  this.buffer = null;
  this.connection.below -= 1;
  if (status < 0) this.connection.raw.destroy(writeError(status));
}

/** A subscribe of a connection whose credential a reload refused (the connection is closed with it). */
const unauthenticated = (): GraphQLError =>
  new GraphQLError('the credential of this connection is no longer accepted', {
    extensions: { code: ErrorCode.UNAUTHENTICATED },
  });

/** Interval of server pings that keep idle connections (and proxies) alive; a peer that does not answer one within it is terminated. */
const KEEP_ALIVE_MS = 12_000;

/**
 * graphql-ws's protocol (graphql-transport-ws, served by src/server/ws-protocol.ts) on the HTTP port's `/graphql` path.
 * The API key comes from the upgrade request's Authorization header or from connectionParams.authorization; a missing
 * key closes with 4401, a wrong one with 4403.
 */
export function createWsServer(options: WsOptions) {
  // No permessage-deflate (ws's default, said here: frames then go to the corked socket at once, in order).
  // closeTimeout is an option of ws since 8.19 (pinned), which @types/ws does not declare yet.
  const serverOptions: ServerOptions & { closeTimeout: number } = {
    noServer: true,
    maxPayload: options.maxMessageBytes ?? 1024 * 1024,
    perMessageDeflate: false,
    // How long a closed connection waits for the peer's close frame before its socket is destroyed (ws: 30 s). A peer
    // that vanished answers none, and at shutdown the gateway waits for every connection: 30 s outlast the drain and
    // the exit deadline (SHUTDOWN), which ended the process with 1 before what follows the drain ran.
    closeTimeout: 5_000,
    // The subprotocol graphql-ws clients ask for (graphql-transport-ws); any other is closed 4406 once open.
    handleProtocols,
  };
  const wss = new WebSocketServer(serverOptions);
  const present = streamPresenter(options.logger);
  const operationFailed = (err: unknown, id: string, pc: ProtocolConnection<Connection>) => [
    streamFailure(err, options.logger, `ws:${id}`, pc.state.requestId),
  ];
  /** Each upgrade's request id, from the upgrade to its 101 (the `headers` event) and its Connection. */
  const upgradeIds = new WeakMap<IncomingMessage, string>();
  // The upgrade's answer names its request id, as every HTTP answer does (a client that sent none learns the one made).
  wss.on('headers', (headers: string[], req: IncomingMessage) => {
    const id = upgradeIds.get(req);
    if (id !== undefined) headers.push(`X-Request-Id: ${id}`);
  });
  const credentials = options.held;
  /** What each running subscription's stream runs and for whom, to check its scopes again after a reload. */
  const running = new WeakMap<object, { ran: Ran; opened: Caller }>();
  /**
   * Each running subscription of the connection that needs a scope its app no longer holds ends with an `error`
   * message (FORBIDDEN naming the field and the scope), which ends that operation alone (graphql-transport-ws): its
   * other subscriptions may still be allowed. It leaves the map first, so the protocol writes no `complete` for it,
   * and its stream stops (a shared execution goes on for the other members of its group).
   */
  const endForbidden = (connection: Connection, caller: Caller): void => {
    const protocol = connection.protocol;
    if (!protocol) return;
    for (const [id, stream] of protocol.subscriptions) {
      const run = running.get(stream);
      const error = run && options.pipeline.forbiddenNow(caller, run.ran, run.opened);
      if (!error) continue;
      protocol.subscriptions.delete(id);
      (stream as AsyncIterator<ExecutionResult>).return?.()?.catch(() => undefined);
      protocol.error(id, [error]);
    }
  };
  /** The connections corked in this tick, uncorked at its end. */
  const corked: Connection[] = [];
  const sweep = (options.keepAliveSweep ?? true) ? new KeepAliveSweep(KEEP_ALIVE_MS) : null;
  const uncork = () => {
    // A write during an uncork (a socket's error closing it, say) may cork another: it is appended and visited here.
    for (const connection of corked) {
      connection.corked = false;
      // The held result first: whatever was written to the socket after it in this tick is in the corked stream.
      const held = connection.held;
      if (held !== null) {
        connection.held = null;
        writeHeld(connection, held);
      }
      connection.raw.uncork();
    }
    corked.length = 0;
  };
  /** DELIVERY_DIRECT_WRITE: Node's writes to a handle, or null (off, or not offered). */
  const direct = (options.directWrite ?? true) && (options.oneWrite ?? true);
  const writes = direct ? handleWrites() : null;
  if (direct && writes === null)
    options.logger.info('DELIVERY_DIRECT_WRITE: this Node offers no write to a socket handle; results use its stream');
  /**
   * Writes a held result to the socket's TCP handle, as Node's stream would once uncorked, without its stream:
   * no buffered request, no `writev` of one chunk, no callback a tick later (docs/decisions/150). A socket destroyed
   * meanwhile (terminated, failed) drops it, as its stream drops what it buffered; a write that fails destroys the
   * socket, as its stream does.
   */
  const writeHeld = (connection: Connection, frame: Buffer): void => {
    const raw = connection.raw;
    const handle = (raw as Duplex & { _handle?: StreamHandle | null })._handle;
    if (raw.destroyed || raw.writableEnded || !handle) return;
    const request = new writes!.WriteWrap();
    request.handle = handle;
    request.oncomplete = afterHandleWrite;
    request.async = false;
    request.bytes = 0;
    request.buffer = null;
    request.connection = connection;
    const status = handle.writeBuffer(request, frame);
    if (status !== 0) raw.destroy(writeError(status));
    else if (writes!.streamBaseState[writes!.kLastWriteWasAsync] !== 0) {
      // libuv writes the rest once the socket can take it, from the frame's memory: it is kept until then, and the
      // socket's next results go through its stream, behind it, counted in `bufferedAmount`.
      request.buffer = frame;
      connection.below += 1;
    }
  };
  /**
   * A result's payload as it goes on the wire: its JSON (masked and with its warnings) and `}`, UTF-8
   * encoded, made once per result object, so once per group for a shared result (src/execution/shared.ts).
   */
  const encoded = new WeakMap<ExecutionResult, Buffer>();

  const bufferLimit = options.subscriberBufferBytes ?? 8 * 1024 * 1024;
  /**
   * A subscription's sink and its own state: its subscription id, its connection, its context and the cursor of the last
   * result written. A class, so that a waiting subscription keeps one object and `next` is shared.
   */
  class Subscriber implements ResultSink {
    /** `extensions.cursor` of the last result written, named when it is closed as a slow consumer. */
    lastCursor: unknown = undefined;

    constructor(
      readonly id: string,
      /** The WebSocket's connection, found once at subscribe time: a delivery looks nothing up to cork its socket. */
      readonly connection: Connection,
      readonly context: GraphQLContext,
      /** The connection's subscriptions by id (src/server/ws-protocol.ts), this one's entry among them. */
      readonly subscriptions: Map<string, unknown>,
    ) {}

    /**
     * Writes a subscription's result as one WebSocket message holding `{"id":…,"type":"next","payload":…}`: byte for
     * byte the message graphql-ws would write (`JSON.stringify({ id, type: 'next', payload })`; a test compares), built
     * from the shared payload's bytes (encoded once per group) and the subscription's own text around it, framed as ws's Sender
     * frames it (`frames` below, or ws's `send` with DELIVERY_ONE_WRITE off). The TCP socket under the WebSocket is
     * corked until the end of the tick, so what else is written to it in that tick (the protocol's `complete` after the
     * last result with DELIVERY_COMPLETE_WITH_LAST off, another subscription's result) leaves in the same write
     * (docs/decisions/030, 093).
     */
    next(result: ExecutionResult): void {
      this.write(result, false);
    }

    /**
     * Writes the result as its `next` message, and with `complete` the subscription's `complete` after it
     * (`{"id":…,"type":"complete"}`, as graphql-ws writes it); false when nothing was written (the socket
     * closing, or closed as slow).
     */
    protected write(result: ExecutionResult, complete: boolean): boolean {
      const connection = this.connection;
      const socket = connection.ws;
      if (socket.readyState !== socket.OPEN) return false;
      // A slow consumer is closed, never skipped: the client resumes with `after` and the last cursor it got.
      if (socket.bufferedAmount > bufferLimit) {
        closeSlow(this);
        return false;
      }
      this.lastCursor = result.extensions?.cursor;
      const out = deliverable(result, this.context, options.logger);
      let payload = encoded.get(out);
      if (payload === undefined) {
        payload = Buffer.from(`${JSON.stringify(out)}}`);
        encoded.set(out, payload);
      }
      const id = JSON.stringify(this.id);
      const raw = connection.raw;
      if (!connection.corked) {
        if (corked.length === 0) process.nextTick(uncork);
        connection.corked = true;
        corked.push(connection);
        raw.cork();
        // The tick's first result for a socket with nothing queued, in its stream or below it, is held for its handle
        // (DELIVERY_DIRECT_WRITE): what is written to the socket after it in this tick waits in the corked stream,
        // and `uncork` writes the held result first. With bytes queued, results go behind them through the stream,
        // which counts them in `bufferedAmount` for the slow consumer's limit.
        if (writes !== null && connection.below === 0 && raw.writableLength === 0) {
          connection.held = frames(id, payload, complete);
          return true;
        }
      }
      if (oneWrite) {
        raw.write(frames(id, payload, complete));
        return true;
      }
      socket.send(Buffer.concat([Buffer.from(`{"id":${id},"type":"next","payload":`), payload]), { binary: false });
      if (complete) socket.send(`{"id":${id},"type":"complete"}`);
      return true;
    }
  }

  /**
   * DELIVERY_ONE_WRITE: the `next` message (`{"id":<id>,"type":"next","payload":` and `payload`) and, with `complete`,
   * the `complete` message (`{"id":<id>,"type":"complete"}`), each behind the frame header ws's Sender would write, in
   * one buffer: one write to the TCP socket instead of two `send`s (a header and a message each, four chunks). Safe
   * because the server has no permessage-deflate: ws's Sender then writes every frame of the protocol synchronously to the
   * same socket and never queues one, so the frames keep their order. `id` is the JSON of the subscription's id. The
   * subscription's text is written straight into the one buffer: a subscription's prefix kept as a buffer of its own
   * was made for each mobile-ID subscription's one result, and copied twice (docs/decisions/111).
   */
  const frames = (id: string, payload: Buffer, complete: boolean): Buffer => {
    const next = `{"id":${id},"type":"next","payload":`;
    const nextBytes = Buffer.byteLength(next);
    const n = nextBytes + payload.length;
    const c = complete ? nextBytes - COMPLETE_SHORTER : 0;
    const out = Buffer.allocUnsafe(headerLength(n) + n + (complete ? headerLength(c) + c : 0));
    let at = writeHeader(out, 0, n);
    at += out.write(next, at);
    out.set(payload, at);
    if (complete) {
      at = writeHeader(out, at + payload.length, c);
      out.write(`{"id":${id},"type":"complete"}`, at);
    }
    return out;
  };
  const oneWrite = options.oneWrite ?? true;

  /** DELIVERY_COMPLETE_WITH_LAST: a Subscriber that writes its last result with the `complete` (decision 089). */
  class LastResultSubscriber extends Subscriber {
    /**
     * The last result, and then the `complete` the protocol writes when the stream ends (`{"id":…,"type":"complete"}`,
     * byte for byte), in the same corked write. The subscription leaves its connection's map of subscriptions now, so
     * the protocol, seeing the stream end, writes no second `complete` (only an id still there gets one), and a client
     * may use the id again at once. Nothing written (the socket closing, a slow consumer): the subscription ends as it
     * always did. True when written: the loop over the stream (`follow` in src/server/ws-protocol.ts) is then
     * left waiting, never to resume, and is collected with the stream (docs/decisions/096).
     */
    last(result: ExecutionResult): boolean {
      if (!this.write(result, true)) return false;
      this.subscriptions.delete(this.id);
      return true;
    }
  }
  const SubscriberKind = (options.completeWithLast ?? true) ? LastResultSubscriber : Subscriber;

  /**
   * 1013 Try Again Later (RFC 6455 §7.4.2; graphql-ws clients reconnect on it) with the subscription's last cursor in
   * the reason; what was written before the close still reaches the client, each result with its own cursor.
   */
  const closeSlow = (subscriber: Subscriber): void => {
    const { connection, id, lastCursor: last } = subscriber;
    const socket = connection.ws;
    options.logger.warn(
      {
        operationId: id,
        connection: connection.requestId,
        unsentBytes: socket.bufferedAmount,
        lastCursor: last ?? null,
      },
      'closing a slow WebSocket subscriber: more unsent bytes than SUBSCRIBER_BUFFER_BYTES',
    );
    options.onClosed?.('slow_consumer');
    socket.close(1013, slowReason(id, typeof last === 'string' ? last : '(none sent)'));
  };

  /** What an operation's outcome from the pipeline is on the wire. */
  const operated = (outcome: StreamOutcome): Operated =>
    'refused' in outcome ? { errors: outcome.refused } : 'stream' in outcome ? outcome : { result: outcome.result };

  const protocol = graphqlTransportWs<Connection>(
    {
      connect(pc, params, request) {
        const connection = pc.state;
        const socket = connection.ws;
        const fromParams = params?.authorization ?? params?.Authorization;
        const header = authorizationOf(request) ?? (typeof fromParams === 'string' ? fromParams : undefined);
        // The configuration the credential is checked under: a JWT's verification awaits its keys, and a reload
        // meanwhile must not pass the old configuration's answer off as the new one's.
        const checkedUnder = credentials.generation();
        const admitted = (result: AuthResult): boolean => {
          if (!result.ok) {
            if (result.reason === 'missing') socket.close(CloseCode.Unauthorized, 'Unauthorized: send the API key');
            // 1013 Try Again Later (RFC 6455 §7.4.2, IANA registry): the JWT's keys could not be fetched, not the app's fault.
            else if (result.reason === 'unavailable')
              socket.close(1013, closeReason(`Try again later: ${result.message}`));
            else socket.close(CloseCode.Forbidden, closeReason(`Forbidden: ${result.message}`));
            return false;
          }
          // Closed while its credential was checked (a JWT awaiting its keys): its close has run, so nothing may be
          // held or scheduled for it now, which nothing would release or cancel.
          if (socket.readyState !== socket.OPEN) return false;
          connection.caller = result.caller;
          connection.protocol = pc;
          const hold = (connection.holding = new HeldConnection(connection, header, result.caller, endForbidden));
          // A connection opened with a JWT ends when the token expires (expire); both end with it (`closed`).
          connection.unexpire = onExpiry(options.expiry, result.caller, (reason) => expire(socket, reason));
          credentials.hold(hold, checkedUnder);
          return true;
        };
        // An unexpected error of a JWT's verification is logged under the upgrade's request id.
        const log: RequestLog = {
          get logger() {
            return options.logger.child({ requestId: connection.requestId });
          },
        };
        const result = options.authenticate(header, log);
        return result instanceof Promise ? result.then(admitted) : admitted(result);
      },
      async subscribe(pc, id, payload) {
        const connection = pc.state;
        let caller = connection.caller!;
        // A token that expired before its scheduled end fired runs nothing more: the connection ends as at its expiry.
        const expired = expiredNow(options.expiry, caller);
        if (expired !== null) {
          expire(connection.ws, expired);
          return { errors: [unauthenticated()] };
        }
        // A reload since the connection authenticated: the operation runs as the live configuration knows its
        // credential (a removed key's is refused, and nothing runs). One comparison when nothing was reloaded.
        if (credentials.stale(connection.holding!)) {
          const now = await credentials.recheck(connection.holding!);
          if (!now) return { errors: [unauthenticated()] };
          caller = now;
        }
        // The generation the caller is known under: a reload while the operation is set up checks it once it runs.
        const checkedUnder = credentials.generation();
        // The context the operation runs with, made here so that each result written carries its warnings.
        const context = options.context(caller, `ws:${id}`, connection.requestId);
        const subscriber = new SubscriberKind(id, connection, context, pc.subscriptions);
        const request = payload as typeof payload & { documentId?: unknown };
        const outcome = await options.pipeline.runOperation({
          caller,
          params: {
            query: typeof request.query === 'string' ? request.query : undefined,
            documentId: typeof request.documentId === 'string' ? request.documentId : undefined,
            operationName: payload.operationName ?? undefined,
            variables: payload.variables ?? undefined,
            extensions: payload.extensions,
          },
          transport: 'ws',
          requestId: `ws:${id}`,
          context,
          allow: ALL_OPERATIONS,
          variables: 'in-run',
          present,
          // A subscription's results are written by its sink (above), not by the protocol.
          sink: subscriber,
        });
        if ('stream' in outcome) {
          running.set(outcome.stream, { ran: outcome.ran, opened: caller });
          outcome.stream.delivery = connection.holding!.delivery;
          // A stream that ended on its own check of the expiry (its scheduled end not run yet: a timer firing late, a
          // clock moved) ends the connection as that end does: 4403, and no `complete` (nothing is written to a
          // closing socket).
          if (caller.expiresAt !== undefined)
            outcome.stream.sourceEnded = () => {
              const reason = expiredNow(options.expiry, caller);
              if (reason !== null) expire(connection.ws, reason);
            };
          // Not in the connection's map yet, so a reload's check passed it by: it is checked here.
          if (checkedUnder !== credentials.generation()) {
            // A check that throws ends the connection (4500) before the protocol holds this stream: ended here.
            const now = await credentials.recheck(connection.holding!).catch((err: unknown) => {
              outcome.stream.return(undefined).catch(() => undefined);
              throw err;
            });
            const error = now ? options.pipeline.forbiddenNow(now, outcome.ran, caller) : null;
            if (!now || error) {
              outcome.stream.return(undefined).catch(() => undefined);
              return { errors: error ? [error] : [unauthenticated()] };
            }
          }
        }
        if ('refused' in outcome)
          options.logger.debug(
            { id, connection: connection.requestId, errors: outcome.refused.map((e) => e.message) },
            'subscription error',
          );
        return operated(outcome);
      },
      // A result JSON cannot write, and a failure of the gateway's own that a subscription's stream threw (it turns
      // what its source and its executions throw into a result): each masked by the one rule, logged with its id.
      unwritable: operationFailed,
      streamFailed: operationFailed,
      closed(pc) {
        const connection = pc.state;
        if (connection.holding !== undefined) credentials.release(connection.holding);
        connection.unexpire?.();
      },
      failed(err, id, pc) {
        // The operation's request id, as its context names it (`ws:<id>`), when a subscribe message's handling threw;
        // the connection's always.
        const connection = pc.state.requestId;
        logUnexpected(
          options.logger,
          err,
          id === undefined ? { connection } : { requestId: `ws:${id}`, connection },
          'a WebSocket connection failed; closed 4500',
        );
      },
      refused(err, closeCode, pc) {
        // Bad input, as a refused webhook is: said once, at info, with the connection's request id; nothing to chase.
        options.logger.info(
          { connection: pc.state.requestId, code: err.code, closeCode, reason: err.message },
          `a WebSocket client broke the protocol; closed ${closeCode}`,
        );
      },
    },
    { keepAliveMs: sweep ? 0 : KEEP_ALIVE_MS },
  );

  return {
    wss,
    /** The most bytes one connection has not sent yet (gateway_subscriber_lag, read at the scrape). */
    lag(): number {
      let most = 0;
      for (const client of wss.clients) most = Math.max(most, client.bufferedAmount);
      return most;
    },
    handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
      const requestId = requestIdOf(req);
      upgradeIds.set(req, requestId);
      wss.handleUpgrade(req, socket, head, (ws) => {
        sweep?.opened(ws, socket);
        protocol.open(ws, req, new Connection(ws, socket, requestId));
      });
    },
    async close(): Promise<void> {
      sweep?.stop();
      for (const client of wss.clients) client.close(1001, 'Going away: the gateway is shutting down');
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}
