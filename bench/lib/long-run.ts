/**
 * What the memory tool (bench/experiments/memory.ts) and the soak (bench/soak.ts) share: one gateway process over the
 * upstream stub, on SQLite or on an embedded PostgreSQL, and the requests of every kind an app sends it, each
 * checked for its answer.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createClient, type Client } from 'graphql-ws';
import { request } from 'undici';
import WebSocket from 'ws';

import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../scripts/embedded-postgres.js';
import { SUBSCRIPTION } from '../scenarios/fanout.js';
import { CREATE_NETWORK } from '../scenarios/mutation.js';
import { PROJECT_TREE } from '../scenarios/query.js';
import { notificationBody, WEBHOOK_PATH } from '../scenarios/webhook.js';
import { API_KEY, gatewayEnv, NOTIFICATION_TOKEN } from './env.js';
import { graphql } from './harness.js';
import { freePort, spawnNode, type Proc } from './processes.js';

export type Database = 'sqlite' | 'postgres';

export interface LongRunGateway {
  origin: string;
  proc: Proc;
  /** The inspector port when started with `inspect`. */
  inspectPort: number | null;
  database: Database;
  stop(): Promise<void>;
}

/** Stops of every long-run gateway not stopped yet: a run that fails or is interrupted leaves no process behind. */
const live = new Set<() => Promise<void>>();

export async function stopAll(): Promise<void> {
  for (const stop of [...live]) await stop();
}

/** The upstream stub, the gateway as `npm run bench` starts it (NODE_ENV=production, LOG_LEVEL=warn) and, for `postgres`, an embedded PostgreSQL. */
export async function startLongRunGateway(
  database: Database,
  options: { inspect?: boolean; nodeArgs?: string[] } = {},
): Promise<LongRunGateway> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-long-run-'));
  const stopping: Array<() => Promise<void>> = [async () => fs.rmSync(root, { recursive: true, force: true })];
  const stop = async () => {
    live.delete(stop);
    for (const s of stopping.reverse()) await s().catch(() => undefined);
    stopping.length = 0;
  };
  live.add(stop);
  try {
    const stub = await spawnNode('upstream', {
      script: 'bench/servers/upstream.ts',
      cpus: null,
      readiness: { line: true },
    });
    stopping.push(() => stub.stop());
    let pg: EmbeddedPostgres | null = null;
    const dbEnv: Record<string, string> = {};
    if (database === 'postgres') {
      pg = await startEmbeddedPostgres();
      stopping.push(() => pg!.stop());
      dbEnv.DATABASE_URL = await pg.createDatabase('long_run');
    }
    const port = await freePort();
    const inspectPort = options.inspect ? await freePort() : null;
    const origin = `http://127.0.0.1:${port}`;
    const proc = await spawnNode(`gateway (${database})`, {
      script: 'src/main.ts',
      cpus: null,
      nodeArgs: [...(inspectPort ? [`--inspect=127.0.0.1:${inspectPort}`] : []), ...(options.nodeArgs ?? [])],
      env: { ...gatewayEnv({ port, dataDir: path.join(root, 'data'), stubUrl: String(stub.ready.url) }), ...dbEnv },
      readiness: { url: `${origin}/readyz` },
    });
    stopping.push(() => proc.stop());
    return { origin, proc, inspectPort, database, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

const JSON_HEADERS = { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` };
const NOTIFY_HEADERS = { 'content-type': 'application/json', authorization: `Bearer ${NOTIFICATION_TOKEN}` };

/** The kinds of request the memory tool measures one by one and the soak mixes. */
export const KINDS = [
  'mutation',
  'query',
  'notification',
  'ws',
  'ws-cancel',
  'sse',
  'sse-cancel',
  'identification',
] as const;
export type Kind = (typeof KINDS)[number];

export const KIND_DESCRIPTIONS: Record<Kind, string> = {
  mutation: '`createNetwork` with a fresh idempotency key (a first call upstream, a ledger row, an idempotency record)',
  query: 'the project tree (project → 3 networks → 3 subnets each) from the ledger',
  notification:
    'a mobile-ID notification with a fresh `auth_req_id` that nobody waits for (stored, acknowledged, published)',
  ws: 'on one of 8 open graphql-ws connections: subscribe to a fresh `authReqId`, send its notification, get the event, the server completes',
  'ws-cancel': 'a new graphql-ws connection subscribes to an `authReqId` that never comes, then closes',
  sse: 'a graphql-sse stream (distinct connections) subscribes to a fresh `authReqId`, gets its notification, completes',
  'sse-cancel': 'a graphql-sse stream subscribes to an `authReqId` that never comes; the client aborts it',
  identification:
    '`createIdentification` (identity sandbox) naming a workflow id never seen before (each gets its own callback address)',
};

async function expectOk(res: Awaited<ReturnType<typeof request>>, status: number, what: string): Promise<string> {
  const text = await res.body.text();
  if (res.statusCode !== status) throw new Error(`${what}: answered ${res.statusCode}: ${text.slice(0, 300)}`);
  if (status === 200 && text.includes('"errors"')) throw new Error(`${what}: ${text.slice(0, 300)}`);
  return text;
}

export function notification(authReqId: string): string {
  return notificationBody().replace('{{uuid}}', authReqId);
}

/** One request of each kind against `origin`, ready to run many times. */
export class Operations {
  private readonly clients: Client[] = [];
  private next = 0;

  private constructor(
    private readonly origin: string,
    /** The project the tree query reads (fixed size). */
    private readonly projectId: string,
    /** The project the mutations add networks to (grows; the tree query never reads it). */
    private readonly mutationProjectId: string,
  ) {}

  static async prepare(origin: string): Promise<Operations> {
    const createProject = async (name: string) =>
      (
        await graphql<{ createProject: { project: { id: string } } }>(
          origin,
          API_KEY,
          'mutation($input: CreateProjectInput!) { createProject(input: $input) { project { id } } }',
          {
            input: { name, description: 'memory and soak' },
          },
        )
      ).createProject.project.id;
    const projectId = await createProject('long-run-tree');
    for (let n = 0; n < 3; n++) {
      const net = await graphql<{ createNetwork: { network: { id: string } } }>(
        origin,
        API_KEY,
        'mutation($input: CreateNetworkInput!) { createNetwork(input: $input) { network { id } } }',
        {
          input: { projectId, title: `net-${n}` },
        },
      );
      for (let s = 0; s < 3; s++) {
        await graphql(
          origin,
          API_KEY,
          'mutation($input: CreateSubnetInput!) { createSubnet(input: $input) { subnet { id } } }',
          {
            input: {
              projectId,
              networkId: net.createNetwork.network.id,
              title: `subnet-${n}-${s}`,
              cidr: `10.${n}.${s}.0/24`,
            },
          },
        );
      }
    }
    return new Operations(origin, projectId, await createProject('long-run-mutations'));
  }

  private get wsUrl(): string {
    return `${this.origin.replace(/^http/, 'ws')}/graphql`;
  }

  private newClient(lazy: boolean): Client {
    return createClient({
      url: this.wsUrl,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${API_KEY}` },
      lazy,
      retryAttempts: 0,
    });
  }

  run(kind: Kind): Promise<void> {
    switch (kind) {
      case 'mutation':
        return this.mutation();
      case 'query':
        return this.query();
      case 'notification':
        return this.notify(randomUUID());
      case 'ws':
        return this.wsRoundTrip();
      case 'ws-cancel':
        return this.wsCancel();
      case 'sse':
        return this.sse(true);
      case 'sse-cancel':
        return this.sse(false);
      case 'identification':
        return this.identification();
    }
  }

  async mutation(): Promise<void> {
    const body = JSON.stringify({
      query: CREATE_NETWORK,
      variables: { input: { projectId: this.mutationProjectId, title: 'long-run-net' }, key: randomUUID() },
    });
    await expectOk(
      await request(`${this.origin}/graphql`, { method: 'POST', headers: JSON_HEADERS, body }),
      200,
      'mutation',
    );
  }

  async identification(): Promise<void> {
    const body = JSON.stringify({
      query:
        'mutation($input: CreateIdentificationInput!) { createIdentification(input: $input) { identification { id } } }',
      variables: { input: { workflowId: `workflow-${randomUUID()}`, applicantExternalId: 'long-run' } },
    });
    await expectOk(
      await request(`${this.origin}/graphql`, { method: 'POST', headers: JSON_HEADERS, body }),
      200,
      'identification',
    );
  }

  async query(): Promise<void> {
    const body = JSON.stringify({ query: PROJECT_TREE, variables: { id: this.projectId } });
    await expectOk(
      await request(`${this.origin}/graphql`, { method: 'POST', headers: JSON_HEADERS, body }),
      200,
      'query',
    );
  }

  async notify(authReqId: string): Promise<void> {
    await expectOk(
      await request(`${this.origin}${WEBHOOK_PATH}`, {
        method: 'POST',
        headers: NOTIFY_HEADERS,
        body: notification(authReqId),
      }),
      204,
      'notification',
    );
  }

  /** Subscribes on one of 8 long-lived connections, sends the notification, waits for the event and the server's complete. */
  async wsRoundTrip(): Promise<void> {
    if (this.clients.length < 8) this.clients.push(this.newClient(false));
    const client = this.clients[this.next++ % this.clients.length]!;
    const authReqId = randomUUID();
    let events = 0;
    const done = new Promise<void>((resolve, reject) => {
      client.subscribe(
        { query: SUBSCRIPTION, variables: { authReqId } },
        {
          next: (r) => {
            if (r.errors) reject(new Error(`ws: ${JSON.stringify(r.errors)}`));
            events += 1;
          },
          error: (e) => reject(e instanceof Error ? e : new Error(`ws: ${JSON.stringify(e)}`)),
          complete: () => (events === 1 ? resolve() : reject(new Error(`ws: ${events} events before complete`))),
        },
      );
    });
    // If the notification fails, the subscription still ends (at close): its outcome is this failure's, not an unhandled one.
    done.catch(() => undefined);
    await this.notify(authReqId);
    await done;
  }

  /** A fresh connection subscribes to an id that never comes, and goes away once the subscription is set up. */
  async wsCancel(): Promise<void> {
    const client = this.newClient(false);
    const connected = new Promise<void>((resolve, reject) => {
      client.on('connected', () => resolve());
      client.on('error', (e) => reject(e instanceof Error ? e : new Error('ws: connection failed')));
    });
    client.subscribe(
      { query: SUBSCRIPTION, variables: { authReqId: `never-${randomUUID()}` } },
      { next: () => undefined, error: () => undefined, complete: () => undefined },
    );
    await connected;
    // A query on the same connection answers after the subscription's subscribe message was handled (messages are handled in order).
    await new Promise<void>((resolve, reject) => {
      client.subscribe({ query: '{ __typename }' }, { next: () => undefined, error: reject, complete: resolve });
    });
    await client.dispose();
  }

  /** graphql-sse, distinct connections mode: one event stream per operation. */
  async sse(deliver: boolean): Promise<void> {
    const authReqId = deliver ? randomUUID() : `never-${randomUUID()}`;
    const controller = new AbortController();
    const res = await request(`${this.origin}/graphql/stream`, {
      method: 'POST',
      headers: { ...JSON_HEADERS, accept: 'text/event-stream' },
      body: JSON.stringify({ query: SUBSCRIPTION, variables: { authReqId } }),
      signal: controller.signal,
    });
    if (res.statusCode !== 200)
      throw new Error(`sse: answered ${res.statusCode}: ${(await res.body.text()).slice(0, 300)}`);
    if (!deliver) {
      // The stream is open (the operation was accepted and subscribed before the headers went out): the app gives up.
      controller.abort();
      await res.body.dump().catch(() => undefined);
      return;
    }
    await this.notify(authReqId);
    let text = '';
    for await (const chunk of res.body) {
      text += (chunk as Buffer).toString('utf8');
      if (text.includes('event: complete')) break;
    }
    if (!text.includes(authReqId) || text.includes('"errors"')) throw new Error(`sse: ${text.slice(0, 300)}`);
  }

  async close(): Promise<void> {
    await Promise.all(this.clients.map((c) => c.dispose()));
    this.clients.length = 0;
  }
}

/** Runs `n` operations of `kind` with `concurrency` at a time; returns the first failure's message, or null. */
export async function runMany(
  ops: Operations,
  kind: Kind,
  n: number,
  concurrency = 8,
): Promise<{ failed: number; sample: string | null }> {
  let started = 0;
  let failed = 0;
  let sample: string | null = null;
  const worker = async () => {
    while (started < n) {
      started += 1;
      try {
        await ops.run(kind);
      } catch (err) {
        failed += 1;
        sample ??= (err as Error).message;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { failed, sample };
}
