// graphql-js stops validating a document past its own budgets: 100 errors, and the work of comparing the selections
// of one field name pair by pair (about 800 selections of one field exhaust it). It then ends its errors with its bare
// "Validation aborted." (or "Too many validation errors, error limit reached. Validation aborted."), which says
// neither what was too much nor what to do. The gateway answers it with its words for a refused document, the same on
// every transport: POST (the direct path and Apollo's), GET, graphql-ws and graphql-sse.
import { createClient as createSseClient } from 'graphql-sse';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';

import { gatewaysPerTest, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { wsClient } from '../helpers/mobile-id.js';

const start = gatewaysPerTest();
const disposers: Array<() => void | Promise<void>> = [];
afterEach(async () => {
  for (const d of disposers.splice(0)) await d();
});

type Transport = 'post' | 'apollo' | 'get' | 'ws' | 'sse';
const TRANSPORTS: Transport[] = ['post', 'apollo', 'get', 'ws', 'sse'];
interface AnswerError {
  message: string;
  extensions?: Record<string, unknown>;
}

/** 800 selections of one field, a valid document: within the token limit, past graphql-js's work budget. */
const REPEATED = `{ ${Array.from({ length: 800 }, () => '__typename').join(' ')} }`;
/** 150 different fields the schema does not have: 150 errors, past graphql-js's 100. */
const UNKNOWN = `{ ${Array.from({ length: 150 }, (_, i) => `nope${i}`).join(' ')} }`;

async function gatewayFor(transport: Transport): Promise<TestGateway> {
  if (transport !== 'apollo') return start();
  // Every POST through Apollo's own pipeline, not the direct path.
  const gw = await startTestGateway({}, { testing: { directPath: false } });
  disposers.push(() => gw.close());
  return gw;
}

/** The errors a transport answers `query` with. */
async function errorsOf(gw: TestGateway, transport: Transport, query: string): Promise<AnswerError[]> {
  if (transport === 'post' || transport === 'apollo') return ((await gw.graphql(query)).errors ?? []) as AnswerError[];
  if (transport === 'get') {
    const res = await request(`${gw.url}/graphql?query=${encodeURIComponent(query)}`, {
      headers: { 'apollo-require-preflight': 'true', accept: 'application/json' },
    });
    return ((JSON.parse(await res.body.text()) as { errors?: AnswerError[] }).errors ?? []) as AnswerError[];
  }
  const client =
    transport === 'ws'
      ? wsClient(gw)
      : createSseClient({ url: `${gw.url}/graphql/stream`, singleConnection: false, retryAttempts: 0 });
  disposers.push(() => client.dispose());
  return new Promise((resolve) => {
    client.subscribe(
      { query },
      {
        next: (v) => resolve((v.errors ?? []) as unknown as AnswerError[]),
        error: (e) => resolve(Array.isArray(e) ? (e as AnswerError[]) : [{ message: String(e) }]),
        complete: () => resolve([]),
      },
    );
  });
}

describe('a document graphql-js stops validating', () => {
  it.each(TRANSPORTS)('too many fields: refused in the gateway’s words, over %s', async (transport) => {
    const gw = await gatewayFor(transport);
    const errors = await errorsOf(gw, transport, REPEATED);
    expect(JSON.stringify(errors)).not.toMatch(/Validation aborted/);
    expect(errors.at(-1)).toEqual({
      message: expect.stringMatching(/^The document has too many fields to validate\b.*select each field once/i),
      extensions: expect.objectContaining({ code: 'GRAPHQL_VALIDATION_FAILED' }),
    });
  });

  it.each(TRANSPORTS)('too many errors: the first 100, then the gateway’s words, over %s', async (transport) => {
    const gw = await gatewayFor(transport);
    const errors = await errorsOf(gw, transport, UNKNOWN);
    expect(errors).toHaveLength(101);
    expect(errors[0]!.message).toMatch(/Cannot query field "nope0"/);
    expect(JSON.stringify(errors)).not.toMatch(/Validation aborted/);
    expect(errors.at(-1)).toEqual({
      message: expect.stringMatching(/^The document has too many errors to validate\b.*first 100/),
      extensions: expect.objectContaining({ code: 'GRAPHQL_VALIDATION_FAILED' }),
    });
  });
});
