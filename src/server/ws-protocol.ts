// The graphql-transport-ws protocol (graphql-ws's PROTOCOL.md) over ws's WebSockets, on the wire as graphql-ws 6's
// server speaks it (test/server/ws-protocol.test.ts compares the two message by message), with a subscription kept
// as one entry of its connection's map rather than as graphql-ws's suspended message handlers (docs/decisions/126).
import type { IncomingMessage } from 'node:http';
import { GraphQLError, type ExecutionResult } from 'graphql';
import {
  CloseCode,
  GRAPHQL_TRANSPORT_WS_PROTOCOL,
  MessageType,
  parseMessage,
  type SubscribeMessage,
  type SubscribePayload,
} from 'graphql-ws';
import type { RawData, WebSocket } from 'ws';

/** What a subscribe message came to: errors (its `error` message), one result (`next`, then `complete`), or a stream. */
export type Operated =
  | { readonly errors: readonly GraphQLError[] }
  | { readonly result: ExecutionResult }
  /**
   * Each value the stream yields is written as a `next`; its end writes the `complete` (unless the subscription left
   * its connection's map before: a client's `complete`, or the hooks wrote its last message themselves).
   */
  | { readonly stream: AsyncIterator<ExecutionResult> };

/** The gateway's part of the protocol: who may connect, and what an operation comes to. */
export interface ProtocolHooks<S> {
  /**
   * `connection_init`: true admits the connection (`connection_ack`); false refuses it, closed 4403 unless the hook
   * closed it already with a code of its own. `params` is the message's payload when it is an object.
   */
  connect(
    connection: ProtocolConnection<S>,
    params: Record<string, unknown> | undefined,
    request: IncomingMessage,
  ): boolean | Promise<boolean>;
  /** A `subscribe` message of an admitted connection. */
  subscribe(connection: ProtocolConnection<S>, id: string, payload: SubscribePayload): Promise<Operated>;
  /** The socket closed (after its subscriptions were told to end): what the hooks hold for the connection may go. */
  closed?(connection: ProtocolConnection<S>): void;
  /**
   * A message's handling threw, or the socket failed: the connection is closed 4500 after this. `id`: the
   * subscribe message's, when its handling threw.
   */
  failed(err: unknown, id: string | undefined, connection: ProtocolConnection<S>): void;
  /**
   * The client broke the WebSocket protocol (a text frame that is not UTF-8, a message over the socket's maximum, a bad
   * frame): ws has closed the socket already, with `closeCode`. Or it sent a message only a server sends: the socket is
   * closed 4500 after this, as graphql-ws closes it. The client's fault, not the gateway's: without this hook, it is
   * `failed`'s.
   */
  refused?(err: Error & { code: string }, closeCode: number, connection: ProtocolConnection<S>): void;
  /**
   * A subscribe message's one result could not be written (JSON.stringify threw): the errors its `error` carries.
   * Without it, the connection is closed 4500 as graphql-ws closes it.
   */
  unwritable?(err: unknown, id: string, connection: ProtocolConnection<S>): readonly GraphQLError[];
  /**
   * A subscription's stream threw (or a value it yielded could not be written): the errors its `error` carries.
   * Without it, the thrown error's own message, as graphql-ws writes it.
   */
  streamFailed?(err: unknown, id: string, connection: ProtocolConnection<S>): readonly GraphQLError[];
}

/** One WebSocket speaking the protocol: what graphql-ws's server keeps per connection (its `Context`). */
export class ProtocolConnection<S> {
  initReceived = false;
  acknowledged = false;
  /**
   * The wait for `connection_init` (graphql-ws's `connectionInitWaitTimeout`), until it ends: dropped then, so that
   * the timer and its callback are not kept for the connection's life.
   */
  initWait: NodeJS.Timeout | null = null;
  /** graphql-ws's keep-alive (`keepAliveMs` > 0): the ping's interval, and the wait for its pong. */
  ping: NodeJS.Timeout | null = null;
  pongWait: NodeJS.Timeout | null = null;
  /**
   * The connection's subscriptions by id: a mark of its own while its operation is set up, then its stream. An id
   * leaves when its subscription ends (its `complete` written, or the client's), and may then be used again: each
   * subscription finds its own entry by identity, so that one completed by the client while it was set up neither
   * takes nor ends the entry of a later subscription under the same id.
   */
  readonly subscriptions = new Map<string, AsyncIterator<ExecutionResult> | SettingUp>();

  constructor(
    readonly socket: WebSocket,
    readonly state: S,
    /**
     * The upgrade request, until `connection_init` is answered: `connect` reads it, and it is not kept after (its
     * headers and parser state would stay with every connection for its life, as graphql-ws's context keeps them).
     */
    public upgrade: IncomingMessage | undefined,
  ) {}

  /** Its timers end with it (the socket closed). */
  stopTimers(): void {
    if (this.initWait) clearTimeout(this.initWait);
    this.initWait = null;
    if (this.pongWait) clearTimeout(this.pongWait);
    if (this.ping) clearInterval(this.ping);
  }

  /** Writes a message's text, unless the socket is no longer open (graphql-ws's `send` then writes nothing too). */
  send(text: string): void {
    const socket = this.socket;
    if (socket.readyState === socket.OPEN) socket.send(text);
  }

  /** `{"id":…,"type":"next","payload":…}`, graphql-ws's JSON.stringify of the message, key for key. */
  next(id: string, payload: ExecutionResult): void {
    this.send(JSON.stringify({ id, type: MessageType.Next, payload }));
  }

  /** `{"id":…,"type":"error","payload":[…]}` with each error's toJSON, as graphql-ws writes it. */
  error(id: string, errors: readonly GraphQLError[]): void {
    if (errors.length === 0) throw new Error('an error message needs at least one GraphQL error');
    this.send(JSON.stringify({ id, type: MessageType.Error, payload: errors.map((e) => e.toJSON()) }));
  }

  /** `{"id":…,"type":"complete"}`. */
  complete(id: string): void {
    this.send(`{"id":${JSON.stringify(id)},"type":"complete"}`);
  }
}

/** Where a socket holds its connection, for the listeners every connection shares. */
const CONNECTION = Symbol('graphql-transport-ws connection');
type Owned<S> = WebSocket & { [CONNECTION]: ProtocolConnection<S> };

/** The entry of a subscription while its operation is set up (see ProtocolConnection.subscriptions). */
class SettingUp {}

/** graphql-ws's error for what a subscription's stream threw: its message, and its extensions when it has them. */
function asGraphQLError(err: unknown): GraphQLError {
  const original = err instanceof Error ? err : new Error(String(err));
  return new GraphQLError(original.message, { originalError: original });
}

/**
 * The close code ws sent for a frame of the peer's it refused, or null for any other error. ws's receiver names each
 * refusal `WS_ERR_…` and keeps the code it closed with under its own symbol (`status-code`), read here by its
 * description: ws exports neither.
 */
function peerFault(err: Error): number | null {
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string' || !code.startsWith('WS_ERR_')) return null;
  const status = Object.getOwnPropertySymbols(err).find((s) => s.description === 'status-code');
  const closeCode = status === undefined ? undefined : (err as unknown as Record<symbol, unknown>)[status];
  return typeof closeCode === 'number' ? closeCode : null;
}

/** The one reason a close for an internal error gives (graphql-ws's in production; its development mode said more). */
const INTERNAL = 'Internal server error';

/**
 * Serves the protocol on each WebSocket handed to the returned `open` (after ws's upgrade, whose `handleProtocols`
 * must be graphql-ws's). `keepAliveMs` > 0 pings every connection at that interval and terminates one whose pong does
 * not come within it (graphql-ws's `useServer` keep-alive); 0 leaves the keep-alive to the caller.
 */
export function graphqlTransportWs<S>(
  hooks: ProtocolHooks<S>,
  options: { connectionInitWaitMs?: number; keepAliveMs?: number } = {},
): {
  /** Serves the protocol on an upgraded WebSocket, with the caller's `state` kept on its connection. */
  open(socket: WebSocket, request: IncomingMessage, state: S): ProtocolConnection<S>;
} {
  const initWaitMs = options.connectionInitWaitMs ?? 3_000;
  const keepAliveMs = options.keepAliveMs ?? 0;

  const internal = (connection: ProtocolConnection<S>, err: unknown, id?: string): void => {
    hooks.failed(err, id, connection);
    connection.socket.close(CloseCode.InternalServerError, INTERNAL);
  };

  /** A `subscribe` message. It never rejects: what its handling throws closes the connection 4500. */
  async function subscribe(connection: ProtocolConnection<S>, message: SubscribeMessage): Promise<void> {
    const id = message.id;
    const subscriptions = connection.subscriptions;
    try {
      if (!connection.acknowledged) return connection.socket.close(CloseCode.Unauthorized, 'Unauthorized');
      if (subscriptions.has(id))
        return connection.socket.close(CloseCode.SubscriberAlreadyExists, `Subscriber for ${id} already exists`);
      const mark = new SettingUp();
      subscriptions.set(id, mark);
      let operated: Operated;
      try {
        operated = await hooks.subscribe(connection, id, message.payload);
      } catch (err) {
        if (subscriptions.get(id) === mark) subscriptions.delete(id);
        throw err;
      }
      // A stream is followed by a function of its own, so that what waits with it is the subscription, not its message.
      if ('stream' in operated) return follow(connection, id, mark, operated.stream);
      // Completed by the client while it was set up (its id perhaps taken again since): nothing is written.
      if (subscriptions.get(id) !== mark) return;
      try {
        if ('errors' in operated) return connection.error(id, operated.errors);
        try {
          connection.next(id, operated.result);
        } catch (err) {
          // A result JSON cannot write (a BigInt, a cycle): nothing was sent, so the operation gets its `error`
          // as the hooks word it, and the connection and its other subscriptions go on.
          if (!hooks.unwritable) throw err;
          return connection.error(id, hooks.unwritable(err, id, connection));
        }
        connection.complete(id);
      } finally {
        subscriptions.delete(id);
      }
    } catch (err) {
      internal(connection, err, id);
    }
  }

  /**
   * A subscription's stream, read until it ends: each value it yields is a `next`, its end the `complete`. Not an async
   * function: a waiting subscription holds the stream's promise and the two callbacks below, not a suspended function
   * with its generator, registers and promises (the gateway's streams settle that promise only at their end).
   */
  function follow(
    connection: ProtocolConnection<S>,
    id: string,
    mark: SettingUp,
    stream: AsyncIterator<ExecutionResult>,
  ): void {
    const subscriptions = connection.subscriptions;
    // Completed by the client while it was set up (its id perhaps taken again since): the stream is ended unread.
    if (subscriptions.get(id) !== mark) {
      stream.return?.(undefined)?.catch(() => undefined);
      return;
    }
    subscriptions.set(id, stream);
    const failed = (err: unknown): void => {
      if (subscriptions.get(id) !== stream) return;
      // The operation ends with its error: its stream is ended too (what it holds, its app's live count, given back),
      // as a stream whose `next` rejected may still wait for its source.
      stream.return?.(undefined)?.catch(() => undefined);
      try {
        connection.error(id, hooks.streamFailed ? hooks.streamFailed(err, id, connection) : [asGraphQLError(err)]);
      } catch (unwritten) {
        subscriptions.delete(id);
        return internal(connection, unwritten, id);
      }
      subscriptions.delete(id);
    };
    const stepped = (step: IteratorResult<ExecutionResult>): void => {
      if (step.done) {
        if (subscriptions.get(id) !== stream) return;
        try {
          connection.complete(id);
        } catch (err) {
          subscriptions.delete(id);
          return internal(connection, err, id);
        }
        subscriptions.delete(id);
        return;
      }
      let next: Promise<IteratorResult<ExecutionResult>>;
      try {
        connection.next(id, step.value);
        next = stream.next();
      } catch (err) {
        return failed(err);
      }
      next.then(stepped, failed);
    };
    let first: Promise<IteratorResult<ExecutionResult>>;
    try {
      first = stream.next();
    } catch (err) {
      return failed(err);
    }
    first.then(stepped, failed);
  }

  /**
   * A message, handled at once; the messages that wait for something (`connection_init`, `ping`, `subscribe`) go on in
   * a function of their own, which closes the connection 4500 with what it throws, as this does. Not an async
   * function: a subscribe or a complete is one promise fewer, and no turn of the microtask queue, before it is handled.
   */
  function onMessage(connection: ProtocolConnection<S>, data: string): void {
    const socket = connection.socket;
    let message;
    try {
      message = parseMessage(data);
    } catch {
      return socket.close(CloseCode.BadRequest, 'Invalid message received');
    }
    switch (message.type) {
      case MessageType.ConnectionInit:
        return void init(connection, message.payload).catch((err: unknown) => internal(connection, err));
      case MessageType.Ping:
        return void pong(connection, message.payload).catch((err: unknown) => internal(connection, err));
      case MessageType.Pong:
        return;
      case MessageType.Subscribe:
        return void subscribe(connection, message);
      case MessageType.Complete: {
        const stream = connection.subscriptions.get(message.id);
        connection.subscriptions.delete(message.id);
        if (stream instanceof SettingUp) return;
        stream?.return?.(undefined)?.catch((err: unknown) => internal(connection, err));
        return;
      }
      default: {
        // A message only a server sends (`connection_ack`, `next`, `error`), which anyone who can open a socket may send,
        // before connection_init too: closed 4500 as graphql-ws closes it, but the client's protocol error, not the
        // gateway's failure, so told to `refused` rather than `failed` (which logs an unexpected error).
        const err = Object.assign(new Error(`Unexpected message of type ${message.type} received`), {
          code: 'GRAPHQL_WS_UNEXPECTED_MESSAGE',
        });
        if (!hooks.refused) throw err;
        hooks.refused(err, CloseCode.InternalServerError, connection);
        return socket.close(CloseCode.InternalServerError, INTERNAL);
      }
    }
  }

  /** `connection_init`: the hook admits the connection (`connection_ack`) or refuses it. */
  async function init(connection: ProtocolConnection<S>, payload: unknown): Promise<void> {
    const socket = connection.socket;
    if (connection.initReceived)
      return socket.close(CloseCode.TooManyInitialisationRequests, 'Too many initialisation requests');
    connection.initReceived = true;
    if (connection.initWait) clearTimeout(connection.initWait);
    connection.initWait = null;
    const params =
      payload && typeof payload === 'object' && !Array.isArray(payload)
        ? (payload as Record<string, unknown>)
        : undefined;
    const admitted = await hooks.connect(connection, params, connection.upgrade!);
    connection.upgrade = undefined;
    if (!admitted) return socket.close(CloseCode.Forbidden, 'Forbidden');
    connection.acknowledged = true;
    connection.send('{"type":"connection_ack"}');
  }

  /**
   * `ping`: a turn of the microtask queue later, as graphql-ws answers (after its onPing hook), so that a pong follows
   * the ack of a connection_init sent before the ping.
   */
  async function pong(connection: ProtocolConnection<S>, payload: unknown): Promise<void> {
    await Promise.resolve();
    connection.send(payload ? JSON.stringify({ type: MessageType.Pong, payload }) : '{"type":"pong"}');
  }

  // The socket's listeners, one of each for every connection (ws calls them with the socket as `this`, which holds its
  // connection): closures made per connection, with `once`'s wrapper and state, were ~600 B a connection.
  function onSocketError(this: WebSocket, err: Error): void {
    const connection = (this as Owned<S>)[CONNECTION];
    const closeCode = peerFault(err);
    if (closeCode !== null && hooks.refused)
      return hooks.refused(err as Error & { code: string }, closeCode, connection);
    internal(connection, err);
  }

  function onSocketMessage(this: WebSocket, data: RawData): void {
    const connection: ProtocolConnection<S> = (this as Owned<S>)[CONNECTION];
    try {
      onMessage(connection, String(data));
    } catch (err) {
      internal(connection, err);
    }
  }

  /** ws emits `close` once. */
  function onSocketClose(this: WebSocket): void {
    const connection: ProtocolConnection<S> = (this as Owned<S>)[CONNECTION];
    connection.stopTimers();
    const streams = [...connection.subscriptions.values()];
    connection.subscriptions.clear();
    for (const stream of streams)
      if (!(stream instanceof SettingUp))
        stream.return?.(undefined)?.catch((err: unknown) => hooks.failed(err, undefined, connection));
    hooks.closed?.(connection);
  }

  return {
    open(socket, request, state) {
      const connection = new ProtocolConnection(socket, state, request);
      (socket as Owned<S>)[CONNECTION] = connection;
      socket.on('error', onSocketError);
      if (socket.protocol !== GRAPHQL_TRANSPORT_WS_PROTOCOL) {
        socket.close(CloseCode.SubprotocolNotAcceptable, 'Subprotocol not acceptable');
        return connection;
      }
      if (initWaitMs > 0)
        connection.initWait = setTimeout(() => {
          connection.initWait = null;
          if (!connection.initReceived)
            socket.close(CloseCode.ConnectionInitialisationTimeout, 'Connection initialisation timeout');
        }, initWaitMs);
      if (keepAliveMs > 0)
        connection.ping = setInterval(() => {
          if (socket.readyState !== socket.OPEN) return;
          connection.pongWait = setTimeout(() => socket.terminate(), keepAliveMs);
          socket.once('pong', () => {
            if (connection.pongWait) clearTimeout(connection.pongWait);
            connection.pongWait = null;
          });
          socket.ping();
        }, keepAliveMs);
      socket.on('message', onSocketMessage);
      socket.on('close', onSocketClose);
      return connection;
    },
  };
}
