import { request } from 'undici';
import WebSocket from 'ws';

/**
 * A minimal Chrome DevTools Protocol client for a gateway started with `--inspect=127.0.0.1:<port>`: the memory
 * tool forces full garbage collections, reads the heap figures and takes heap snapshots of the real process,
 * with no code of its own in the gateway.
 */
export class Inspector {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (r: unknown) => void; reject: (e: Error) => void }>();
  private readonly handlers = new Map<string, (params: unknown) => void>();

  private constructor(private readonly socket: WebSocket) {
    socket.on('message', (data: Buffer) => {
      const msg = JSON.parse(data.toString('utf8')) as {
        id?: number;
        result?: unknown;
        error?: { message: string };
        method?: string;
        params?: unknown;
      };
      if (msg.id !== undefined) {
        const w = this.waiting.get(msg.id);
        this.waiting.delete(msg.id);
        if (msg.error) w?.reject(new Error(msg.error.message));
        else w?.resolve(msg.result);
      } else if (msg.method) this.handlers.get(msg.method)?.(msg.params);
    });
  }

  static async connect(port: number): Promise<Inspector> {
    const res = await request(`http://127.0.0.1:${port}/json/list`);
    const targets = (await res.body.json()) as Array<{ webSocketDebuggerUrl: string }>;
    const socket = new WebSocket(targets[0]!.webSocketDebuggerUrl, { maxPayload: 1024 * 1024 * 1024 });
    await new Promise<void>((resolve, reject) => {
      socket.once('open', resolve);
      socket.once('error', reject);
    });
    return new Inspector(socket);
  }

  send<T>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve: resolve as (r: unknown) => void, reject });
      this.socket.send(JSON.stringify({ id, method, params }));
    });
  }

  /** Evaluates an expression in the gateway's main thread and returns its JSON value. */
  async evaluate<T>(expression: string): Promise<T> {
    const r = await this.send<{ result: { value: T }; exceptionDetails?: { text: string } }>('Runtime.evaluate', {
      expression,
      returnByValue: true,
    });
    if (r.exceptionDetails) throw new Error(`evaluate: ${r.exceptionDetails.text}`);
    return r.result.value;
  }

  /** Two full collections (the second frees what the first's finalizers released). */
  async collectGarbage(): Promise<void> {
    await this.send('HeapProfiler.collectGarbage');
    await this.send('HeapProfiler.collectGarbage');
  }

  /** Object counts and sizes by constructor (type and name), from a heap snapshot (which collects garbage first). */
  async census(): Promise<Census> {
    const chunks: string[] = [];
    this.handlers.set('HeapProfiler.addHeapSnapshotChunk', (p) => chunks.push((p as { chunk: string }).chunk));
    await this.send('HeapProfiler.takeHeapSnapshot', { reportProgress: false });
    this.handlers.delete('HeapProfiler.addHeapSnapshotChunk');
    return censusOf(JSON.parse(chunks.join('')) as HeapSnapshot);
  }

  close(): void {
    this.socket.close();
  }
}

interface HeapSnapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

/** `type:name` → live objects and their own bytes. */
export type Census = Map<string, { count: number; bytes: number }>;

function censusOf(snap: HeapSnapshot): Census {
  const fields = snap.snapshot.meta.node_fields;
  const stride = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const types = snap.snapshot.meta.node_types[0];
  const out: Census = new Map();
  for (let i = 0; i < snap.nodes.length; i += stride) {
    const type = types[snap.nodes[i + typeAt]!]!;
    // Strings and code are grouped by kind: their names are their contents.
    const name =
      type === 'object' || type === 'closure' || type === 'native' ? snap.strings[snap.nodes[i + nameAt]!]! : '';
    const key = `${type}:${name.slice(0, 60)}`;
    const entry = out.get(key) ?? { count: 0, bytes: 0 };
    entry.count += 1;
    entry.bytes += snap.nodes[i + sizeAt]!;
    out.set(key, entry);
  }
  return out;
}

/** The kinds of object whose count grew most from `before` to `after`. */
export function censusGrowth(
  before: Census,
  after: Census,
  top = 12,
): Array<{ key: string; count: number; bytes: number }> {
  const rows: Array<{ key: string; count: number; bytes: number }> = [];
  for (const [key, a] of after) {
    const b = before.get(key) ?? { count: 0, bytes: 0 };
    if (a.count !== b.count) rows.push({ key, count: a.count - b.count, bytes: a.bytes - b.bytes });
  }
  return rows.sort((x, y) => y.count - x.count).slice(0, top);
}
