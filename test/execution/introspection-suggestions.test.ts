// With introspection off, an error names no schema element the request did not name: graphql-js's "Did you mean …?"
// is left out of validation and variable errors, over POST (the direct path and Apollo's), GET, graphql-ws and
// graphql-sse. With introspection on, the suggestions are there (the same requests, so the check can fail).
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

/** Requests each naming something close to, but not, a schema element. */
const MISNAMED = [
  { what: 'a field', query: '{ projectz { id } }', variables: {}, hint: /Did you mean "project" or "projects"\?/ },
  { what: 'an argument', query: '{ projects(firs: 1) { id } }', variables: {}, hint: /Did you mean "first"\?/ },
  {
    what: 'a type',
    query: 'query($id: Strin!) { project(id: $id) { id } }',
    variables: { id: 'x' },
    hint: /Did you mean "String"\?/,
  },
  {
    what: 'an enum value in a variable',
    query:
      'mutation($e: IdentificationEnvironment!) { createIdentification(input: { workflowId: "wf", environment: $e }) { identification { id } } }',
    variables: { e: 'PRODUCTON' },
    hint: /Did you mean the enum value "PRODUCTION"\?/,
    // A mutation is never run from a GET.
    only: ['post', 'apollo', 'ws', 'sse'],
  },
] as const satisfies ReadonlyArray<{
  what: string;
  query: string;
  variables: Record<string, unknown>;
  hint: RegExp;
  only?: readonly string[];
}>;

const applies = (m: (typeof MISNAMED)[number], transport: Transport) =>
  !('only' in m) || (m.only as readonly string[]).includes(transport);

type Transport = 'post' | 'apollo' | 'get' | 'ws' | 'sse';

/** The error messages of an answer, one a line. */
function messages(answer: unknown): string {
  const errors =
    (answer as { errors?: Array<{ message?: string }> } | null)?.errors ??
    (Array.isArray(answer) ? (answer as Array<{ message?: string }>) : []);
  return errors.map((e) => e.message ?? JSON.stringify(e)).join('\n') || JSON.stringify(answer);
}

async function run(
  gw: TestGateway,
  transport: Transport,
  query: string,
  variables: Record<string, unknown>,
): Promise<string> {
  if (transport === 'post' || transport === 'apollo') return messages(await gw.graphql(query, variables));
  if (transport === 'get') {
    const url = `${gw.url}/graphql?query=${encodeURIComponent(query)}&variables=${encodeURIComponent(JSON.stringify(variables))}`;
    const res = await request(url, { headers: { 'apollo-require-preflight': 'true', accept: 'application/json' } });
    return messages(JSON.parse(await res.body.text()));
  }
  const client =
    transport === 'ws'
      ? wsClient(gw)
      : createSseClient({ url: `${gw.url}/graphql/stream`, singleConnection: false, retryAttempts: 0 });
  disposers.push(() => client.dispose());
  return new Promise((resolve) => {
    client.subscribe(
      { query, variables },
      {
        next: (v) => resolve(messages(v)),
        error: (e) => resolve(e instanceof Error ? e.message : messages(e)),
        complete: () => undefined,
      },
    );
  });
}

const TRANSPORTS: Transport[] = ['post', 'apollo', 'get', 'ws', 'sse'];

async function gatewayFor(transport: Transport, env: Record<string, string>): Promise<TestGateway> {
  if (transport !== 'apollo') return start(env);
  // Every POST through Apollo's own pipeline, not the direct path.
  const gw = await startTestGateway(env, { testing: { directPath: false } });
  disposers.push(() => gw.close());
  return gw;
}

describe('errors with introspection off', () => {
  it.each(TRANSPORTS)('name no schema element the request did not name, over %s', async (transport) => {
    const gw = await gatewayFor(transport, { GRAPHQL_INTROSPECTION: 'false' });
    for (const m of MISNAMED) {
      if (!applies(m, transport)) continue;
      const answer = await run(gw, transport, m.query, m.variables);
      expect(answer, `${m.what} over ${transport}`).not.toMatch(/Did you mean/);
      expect(answer, `${m.what} over ${transport}`).toMatch(
        /Cannot query field|Unknown argument|Unknown type|got invalid value/,
      );
    }
  });

  it.each(TRANSPORTS)('still suggest names with introspection on, over %s', async (transport) => {
    const gw = await gatewayFor(transport, { GRAPHQL_INTROSPECTION: 'true' });
    for (const m of MISNAMED) {
      if (!applies(m, transport)) continue;
      expect(await run(gw, transport, m.query, m.variables), `${m.what} over ${transport}`).toMatch(m.hint);
    }
  });
});
