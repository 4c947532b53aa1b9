import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import * as ws from 'ws';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { postNotification, SUBSCRIPTION } from '../helpers/mobile-id.js';
import { subscribers, waitFor } from '../helpers/wait.js';

// DELIVERY_ONE_WRITE (docs/decisions/093): a subscription's `next` (and with its last result its `complete`) is framed
// by the gateway into one buffer and one write to the TCP socket, instead of ws's `send` per message. What goes on the
// wire must be what ws writes: here a raw TCP client reads every byte after the handshake, with the switch on and off,
// and each frame must be byte for byte ws's own framing (its Sender.frame) of the message it carries. The messages
// themselves are compared between the shortcut and the plain path in test/server/delivery-shortcuts.test.ts, and
// results needing 16- and 64-bit lengths reach ws's own client parser in test/server/ws-large-results.test.ts.

const KEY = 'app-key-one-write';
const FRAME_OPTIONS = { fin: true, opcode: 1, mask: false, readOnly: false, rsv1: false } as const;
/** ws's own framing (its Sender, exported by ws though its types leave it out). */
const { Sender } = ws as unknown as {
  Sender: { frame(data: Buffer, options: typeof FRAME_OPTIONS | Record<string, unknown>): Buffer[] };
};

/** A server frame's message and the bytes it took, read from `bytes` at `at` (RFC 6455 §5.2), or null if incomplete. */
function frameAt(bytes: Buffer, at: number): { text: string; end: number } | null {
  if (bytes.length < at + 2) return null;
  const short = bytes[at + 1]! & 0x7f;
  const header = short === 127 ? 10 : short === 126 ? 4 : 2;
  if (bytes.length < at + header) return null;
  const n = short === 127 ? bytes.readUIntBE(at + 4, 6) : short === 126 ? bytes.readUInt16BE(at + 2) : short;
  if (bytes.length < at + header + n) return null;
  return { text: bytes.subarray(at + header, at + header + n).toString('utf8'), end: at + header + n };
}

/**
 * A graphql-ws connection over a plain TCP socket: the upgrade and the client's (masked) frames written by hand, every
 * byte the server sends after its 101 kept as it arrived.
 */
async function rawConnection(gw: TestGateway) {
  const { port } = new URL(gw.url);
  const socket = net.connect(Number(port), '127.0.0.1');
  let received = Buffer.alloc(0);
  let body = -1;
  let onData: (() => void) | null = null;
  socket.on('data', (chunk: Buffer) => {
    received = Buffer.concat([received, chunk]);
    if (body < 0) {
      const end = received.indexOf('\r\n\r\n');
      if (end >= 0) body = end + 4;
    }
    onData?.();
  });
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  socket.write(
    [
      'GET /graphql HTTP/1.1',
      `Host: 127.0.0.1:${port}`,
      'Upgrade: websocket',
      'Connection: Upgrade',
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
      'Sec-WebSocket-Version: 13',
      'Sec-WebSocket-Protocol: graphql-transport-ws',
      `Authorization: Bearer ${KEY}`,
      '',
      '',
    ].join('\r\n'),
  );
  const send = (message: unknown) =>
    socket.write(Buffer.concat(Sender.frame(Buffer.from(JSON.stringify(message)), { ...FRAME_OPTIONS, mask: true })));
  /** The server's frames so far, each with its bytes as received. */
  const frames = () => {
    const out: Array<{ text: string; bytes: Buffer }> = [];
    if (body < 0) return out;
    for (let at = body; ;) {
      const f = frameAt(received, at);
      if (f === null) return out;
      out.push({ text: f.text, bytes: received.subarray(at, f.end) });
      at = f.end;
    }
  };
  const until = (done: (texts: string[]) => boolean) =>
    new Promise<void>((resolve) => {
      onData = () => {
        if (done(frames().map((f) => f.text))) resolve();
      };
      onData();
    });
  send({ type: 'connection_init', payload: {} });
  await until((texts) => texts.some((t) => t.includes('"connection_ack"')));
  return {
    send,
    frames,
    until,
    socket,
    /** The client's port: the gateway's socket of this connection has it as its remote port. */
    port: socket.localPort!,
    /** Every byte after the 101 response. */
    wire: () => received.subarray(body),
    close: () => socket.destroy(),
  };
}

/** A raw connection with `count` subscriptions waiting (op-1, op-2, …), and each one's delivery (the 204 checked). */
async function waiting(gw: TestGateway, count = 1) {
  const c = await rawConnection(gw);
  const ids = Array.from({ length: count }, () => `req-${randomUUID()}`);
  ids.forEach((authReqId, i) =>
    c.send({ id: `op-${i + 1}`, type: 'subscribe', payload: { query: SUBSCRIPTION, variables: { id: authReqId } } }),
  );
  await waitFor(() => ids.every((id) => subscribers(gw, 'mobile-id', id) === 1), 20_000, 'the subscriptions');
  const deliver = async (i = 0) => {
    const n = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: ids[i]!, outcome: 'SUCCESS' });
    expect((await postNotification(gw, n.body, { headers: n.headers })).status).toBe(204);
  };
  return { c, ids, deliver };
}

/**
 * Replaces, once, the `writeBuffer` of the TCP handle under this connection's socket on the gateway's side (found as
 * the gateway corks it for a result) with `write`, which gets the real one.
 */
function onNextHandleWrite(
  port: number,
  write: (real: (request: unknown, data: Buffer) => number, request: unknown, data: Buffer) => number,
) {
  let replaced = false;
  return vi.spyOn(net.Socket.prototype, 'cork').mockImplementation(function (this: net.Socket) {
    Writable.prototype.cork.call(this);
    const handle = (this as net.Socket & { _handle?: Record<string, unknown> })._handle;
    if (this.remotePort !== port || replaced || !handle) return;
    replaced = true;
    const real = (handle.writeBuffer as (request: unknown, data: Buffer) => number).bind(handle);
    handle.writeBuffer = (request: unknown, data: Buffer) => {
      delete handle.writeBuffer;
      return write(real, request, data);
    };
  });
}

describe.each([
  ['on', 'true', 'true'],
  ['on, DELIVERY_DIRECT_WRITE off', 'true', 'false'],
  ['off', 'false', 'true'],
] as const)('DELIVERY_ONE_WRITE %s', (_name, value, direct) => {
  let gw: TestGateway;
  const env = { GATEWAY_API_KEYS: KEY, DELIVERY_ONE_WRITE: value, DELIVERY_DIRECT_WRITE: direct };

  beforeAll(async () => {
    gw = await startTestGateway(env);
  });
  afterAll(async () => {
    await gw?.close();
  });

  it.each([
    ['with its complete (the last result)', 'true'],
    ['then graphql-ws writes the complete', 'false'],
  ] as const)(
    'a live result %s: every byte on the wire is ws’s framing of the message',
    async (_case, completeWithLast) => {
      // DELIVERY_COMPLETE_WITH_LAST is the gateway's; the second case runs a gateway of its own with it off.
      const t =
        completeWithLast === 'true' ? gw : await startTestGateway({ ...env, DELIVERY_COMPLETE_WITH_LAST: 'false' });
      const c = await rawConnection(t);
      try {
        const ids = [`req-${randomUUID()}`, `req-${randomUUID()}`, `req-${randomUUID()}`];
        // Three subscriptions on one connection: one with an id that JSON escapes, one whose id is longer in UTF-8
        // bytes than in characters (the frame's lengths are bytes).
        const ops = ['op-1', 'op-"2"', 'op-\u00fc\u2713-3'];
        ids.forEach((authReqId, i) =>
          c.send({ id: ops[i], type: 'subscribe', payload: { query: SUBSCRIPTION, variables: { id: authReqId } } }),
        );
        await waitFor(
          () => ids.every((id) => subscribers(t, 'mobile-id', id) === 1),
          20_000,
          'every subscription listening',
        );
        for (const [i, authReqId] of ids.entries()) {
          const n = await t.gateway.sandbox.mobileId!.buildNotification({
            authReqId,
            outcome: i === 0 ? 'CANCELLED_BY_USER' : 'SUCCESS',
          });
          expect((await postNotification(t, n.body, { headers: n.headers })).status).toBe(204);
        }
        await c.until((texts) => texts.filter((x) => x.includes('"type":"complete"')).length === 3);
        const frames = c.frames();
        const messages = frames.map((f) => JSON.parse(f.text) as { id?: string; type: string });
        expect(messages.map((m) => `${m.id ?? ''} ${m.type}`)).toEqual([
          ' connection_ack',
          'op-1 next',
          'op-1 complete',
          'op-"2" next',
          'op-"2" complete',
          'op-\u00fc\u2713-3 next',
          'op-\u00fc\u2713-3 complete',
        ]);
        // Each message as graphql-ws writes it (JSON.stringify of the message), each frame as ws's Sender frames it.
        for (const [i, f] of frames.entries()) {
          expect(f.text).toBe(JSON.stringify(messages[i]));
          expect(f.bytes.equals(Buffer.concat(Sender.frame(Buffer.from(f.text), FRAME_OPTIONS)))).toBe(true);
        }
        expect(c.wire().equals(Buffer.concat(frames.map((f) => f.bytes)))).toBe(true);
      } finally {
        c.close();
        if (t !== gw) await t.close();
      }
    },
  );

  // DELIVERY_DIRECT_WRITE (docs/decisions/150): a connection's first result of a turn, with nothing queued on its
  // socket, is written to the socket's TCP handle, not through its stream. Counted here as the calls of the stream's
  // `write` on the gateway's socket of this connection while a result is delivered: none when held for the handle.
  it('a lone result: written below the socket’s stream only with DELIVERY_DIRECT_WRITE on', async () => {
    const { c, deliver } = await waiting(gw);
    const writes = vi.spyOn(net.Socket.prototype, 'write');
    try {
      await deliver();
      await c.until((texts) => texts.some((x) => x.includes('"type":"complete"')));
      const onThisSocket = writes.mock.contexts.filter((socket) => (socket as net.Socket).remotePort === c.port);
      // Off: ws's two `send`s, a frame's header and its message each.
      expect(onThisSocket).toHaveLength(value === 'true' ? (direct === 'true' ? 0 : 1) : 4);
      expect(c.frames().map((f) => JSON.parse(f.text).type as string)).toEqual(['connection_ack', 'next', 'complete']);
    } finally {
      writes.mockRestore();
      c.close();
    }
  });

  // What is written to the socket after a result in the same turn (a ping of the keep-alive, ws's close of a slow
  // consumer, graphql-ws's own `complete`) reaches the client after it, the held result included: here a ping frame
  // written into the socket from a microtask queued as the gateway corks it for the result, so before the turn ends.
  it('a frame written in the same turn after a result arrives after it', async () => {
    const { c, deliver } = await waiting(gw);
    let injected = false;
    const cork = vi.spyOn(net.Socket.prototype, 'cork').mockImplementation(function (this: net.Socket) {
      Writable.prototype.cork.call(this);
      if (this.remotePort === c.port && !injected) {
        injected = true;
        queueMicrotask(() => this.write(Buffer.from([0x89, 0x00])));
      }
    });
    try {
      await deliver();
      await c.until((texts) => texts.includes(''));
      expect(injected).toBe(true);
      const frames = c.frames();
      expect(frames.map((f) => f.bytes[0])).toEqual([0x81, 0x81, 0x81, 0x89]);
      expect(frames.slice(1, 3).map((f) => JSON.parse(f.text).type as string)).toEqual(['next', 'complete']);
    } finally {
      cork.mockRestore();
      c.close();
    }
  });
});

// DELIVERY_DIRECT_WRITE's own paths (the default gateway): a handle's write that fails, and one libuv finishes later.
describe('DELIVERY_DIRECT_WRITE: the handle’s writes', () => {
  let gw: TestGateway;

  beforeAll(async () => {
    gw = await startTestGateway({ GATEWAY_API_KEYS: KEY });
  });
  afterAll(async () => {
    await gw?.close();
  });

  // What Node's stream does with a write to its handle that fails, the held result's write does: the socket is
  // destroyed, and its subscriptions end with it. Here the handle refuses the write at once (EPIPE), then a write that
  // libuv reports failed later (ECONNRESET).
  it.each([
    ['at once', (): number => -32],
    [
      'later',
      (real: (request: unknown, data: Buffer) => number, request: unknown): number => {
        const { streamBaseState, kLastWriteWasAsync } = stream_wrap();
        streamBaseState[kLastWriteWasAsync] = 1;
        setImmediate(() => (request as { oncomplete(status: number): void }).oncomplete(-104));
        return 0;
      },
    ],
  ] as const)('a handle’s write that fails %s destroys the socket and ends its subscriptions', async (_when, fail) => {
    const { c, ids, deliver } = await waiting(gw, 2);
    const closed = new Promise<void>((resolve) => c.socket.once('close', () => resolve()));
    const cork = onNextHandleWrite(c.port, fail);
    try {
      await deliver(0);
      await closed;
      await waitFor(() => subscribers(gw, 'mobile-id', ids[1]) === 0, 20_000, 'the other subscription ended');
      // The gateway goes on serving.
      const again = await waiting(gw);
      await again.deliver();
      await again.c.until((texts) => texts.some((x) => x.includes('"type":"complete"')));
      again.c.close();
    } finally {
      cork.mockRestore();
      c.close();
    }
  });

  // A held result's write that libuv finishes later (the socket could not take it all at once): until it does, the
  // socket's results go through its stream, behind it, where `bufferedAmount` counts them for the slow consumer's
  // limit; once it has, a result is held for the handle again. The write here is the real one, reported unfinished.
  it('after a handle’s write that libuv finishes later, results go through the stream until it does', async () => {
    const { c, deliver } = await waiting(gw, 3);
    let finish: (() => void) | null = null;
    const cork = onNextHandleWrite(c.port, (real, request, data) => {
      const status = real(request, data);
      const { streamBaseState, kLastWriteWasAsync } = stream_wrap();
      streamBaseState[kLastWriteWasAsync] = 1;
      finish = () => (request as { oncomplete(status: number): void }).oncomplete(0);
      return status;
    });
    const writes = vi.spyOn(net.Socket.prototype, 'write');
    const onThisSocket = () => writes.mock.contexts.filter((x) => (x as net.Socket).remotePort === c.port).length;
    const nexts = (n: number) => c.until((texts) => texts.filter((x) => x.includes('"type":"next"')).length === n);
    try {
      await deliver(0);
      await nexts(1);
      expect(finish).not.toBeNull();
      expect(onThisSocket()).toBe(0);
      await deliver(1);
      await nexts(2);
      expect(onThisSocket()).toBe(1);
      finish!();
      await deliver(2);
      await nexts(3);
      expect(onThisSocket()).toBe(1);
      const messages = c.frames().map((f) => JSON.parse(f.text) as { id?: string; type: string });
      expect(messages.map((m) => `${m.id ?? ''} ${m.type}`)).toEqual([
        ' connection_ack',
        'op-1 next',
        'op-1 complete',
        'op-2 next',
        'op-2 complete',
        'op-3 next',
        'op-3 complete',
      ]);
    } finally {
      writes.mockRestore();
      cork.mockRestore();
      c.close();
    }
  });
});

// Where Node does not offer its writes to a handle (its permission model refuses `process.binding`), the switch is on
// and every result goes through the socket's stream, as with the switch off, and the gateway says so as it starts.
describe('DELIVERY_DIRECT_WRITE where Node refuses process.binding', () => {
  it('writes through the stream, and says so at start', async () => {
    const refused = Object.assign(new Error('Access to this API has been restricted'), { code: 'ERR_ACCESS_DENIED' });
    const binding = vi.spyOn(process as unknown as { binding(name: string): unknown }, 'binding');
    binding.mockImplementation(() => {
      throw refused;
    });
    let t: TestGateway | undefined;
    try {
      t = await startTestGateway({ GATEWAY_API_KEYS: KEY });
    } finally {
      binding.mockRestore();
    }
    const { c, deliver } = await waiting(t);
    const writes = vi.spyOn(net.Socket.prototype, 'write');
    try {
      expect(t.logs()).toContain('DELIVERY_DIRECT_WRITE: this Node offers no write to a socket handle');
      await deliver();
      await c.until((texts) => texts.some((x) => x.includes('"type":"complete"')));
      expect(writes.mock.contexts.filter((x) => (x as net.Socket).remotePort === c.port)).toHaveLength(1);
    } finally {
      writes.mockRestore();
      c.close();
      await t.close();
    }
  });
});

/** Node's stream_wrap binding, whose state a handle's write leaves (as src/server/ws.ts reads it). */
function stream_wrap(): { streamBaseState: Int32Array; kLastWriteWasAsync: number } {
  return (
    process as unknown as { binding(name: string): { streamBaseState: Int32Array; kLastWriteWasAsync: number } }
  ).binding('stream_wrap');
}
