import { createClient as createSseClient } from 'graphql-sse';
import { request } from 'undici';

import type { GatewayOptions } from '../../src/gateway/options.js';
import type { TestGateway } from './gateway.js';
import { wsClient } from './mobile-id.js';

/**
 * POST and GET /graphql, graphql-ws (/graphql) and graphql-sse (/graphql/stream: distinct connections, and
 * `sse-single`: single-connection mode, a reserved stream).
 */
export type Transport = 'post' | 'get' | 'ws' | 'sse' | 'sse-single';

export interface AnsweredError {
  readonly message: string;
  readonly locations?: unknown;
  readonly path?: unknown;
  readonly extensions?: Record<string, unknown>;
}

/** What a client got for one operation: its first answer. */
export interface Answer {
  /** The text received: the HTTP body, or the streamed result or error as JSON ('completed': the stream ended). */
  readonly raw: string;
  readonly data?: unknown;
  /**
   * As the answer holds them (absent when it holds none). A streamed error that is no list of GraphQL errors (a
   * closed socket, a refused request) is one error with its reason.
   */
  readonly errors?: AnsweredError[];
  /** HTTP: the status, and the request id the gateway answered with. */
  readonly status?: number;
  readonly requestId?: string;
  /** graphql-ws: the close code, when the gateway closed the socket. */
  readonly closeCode?: number;
}

/**
 * One operation over `transport`, as a real client sends it, with API key `key` (null: none): the tests that hold a
 * rule on every transport compare what each client got. A streaming client is closed after its first answer.
 * `requestId`, over HTTP and graphql-sse, is sent as X-Request-Id: the lines the gateway logs for the request name it.
 */
export async function operationOver(
  transport: Transport,
  gw: TestGateway,
  key: string | null,
  payload: {
    query: string;
    variables?: Record<string, unknown>;
    extensions?: Record<string, unknown>;
    /** A trusted document's id, sent beside the query as the payload's own field (POST, graphql-ws, graphql-sse). */
    documentId?: string;
  },
  requestId?: string,
): Promise<Answer> {
  const auth: Record<string, string> = {
    ...(key ? { authorization: `Bearer ${key}` } : {}),
    ...(requestId !== undefined ? { 'x-request-id': requestId } : {}),
  };
  if (transport === 'post' || transport === 'get') {
    const variables = payload.variables ? `&variables=${encodeURIComponent(JSON.stringify(payload.variables))}` : '';
    const res =
      transport === 'get'
        ? await request(`${gw.url}/graphql?query=${encodeURIComponent(payload.query)}${variables}`, {
            headers: { ...auth, accept: 'application/json', 'apollo-require-preflight': 'true' },
          })
        : await request(`${gw.url}/graphql`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...auth },
            body: JSON.stringify(payload),
          });
    const raw = await res.body.text();
    const body = JSON.parse(raw) as { data?: unknown; errors?: AnsweredError[] };
    return { ...body, raw, status: res.statusCode, requestId: String(res.headers['x-request-id']) };
  }
  const client =
    transport === 'ws'
      ? wsClient(gw, key ? { key } : {})
      : createSseClient({
          url: `${gw.url}/graphql/stream`,
          singleConnection: transport === 'sse-single',
          retryAttempts: 0,
          headers: auth,
        });
  try {
    return await new Promise<Answer>((resolve) => {
      client.subscribe(payload, {
        next: (value) => resolve({ ...(value as object), raw: JSON.stringify(value) }),
        error: (error: unknown) => {
          const raw = JSON.stringify(error);
          if (Array.isArray(error)) return resolve({ raw, errors: error as AnsweredError[] });
          const close = error as { code?: unknown; reason?: string; message?: string };
          resolve({
            raw,
            ...(typeof close.code === 'number' ? { closeCode: close.code } : {}),
            errors: [{ message: String(close.reason ?? close.message ?? error) }],
          });
        },
        complete: () => resolve({ raw: 'completed' }),
      });
    });
  } finally {
    await client.dispose();
  }
}

/**
 * The transports that run a mutation, by the path of POST /graphql: every one on the direct path (GET refuses a
 * mutation), and POST on Apollo's (`directPath: false`), for a `describe.each` that holds a rule of mutations on each.
 */
export const MUTATION_SURFACES: ReadonlyArray<{ path: string; options: GatewayOptions; transports: Transport[] }> = [
  { path: 'the direct path', options: {}, transports: ['post', 'ws', 'sse', 'sse-single'] },
  { path: "Apollo's path", options: { testing: { directPath: false } }, transports: ['post'] },
];

/** `value` as a GraphQL literal, for a document that writes its input inline: capital words are enum values. */
export function graphqlLiteral(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(graphqlLiteral).join(', ')}]`;
  if (value !== null && typeof value === 'object')
    return `{ ${Object.entries(value)
      .map(([k, v]) => `${k}: ${graphqlLiteral(v)}`)
      .join(', ')} }`;
  if (typeof value === 'string' && /^[A-Z][A-Z0-9_]+$/.test(value)) return value;
  return JSON.stringify(value);
}
