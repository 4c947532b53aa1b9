// Variables a mutation or a query cannot take are refused before the operation is admitted whenever admitting spends
// rate-limit points: on every transport (POST on the direct path and on Apollo's, graphql-ws, SSE in both modes) such
// a refusal spends no point of RATE_LIMIT_CREATIONS or RATE_LIMIT_READS, sends nothing upstream, and is answered as a
// gateway without limits answers it.
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { M, upstreamCreations } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { MUTATION_SURFACES, operationOver } from '../helpers/operation.js';

const KEY = 'bad-variables-app-key-0123';

/** Operations whose variables graphql-js refuses, and the bucket each would spend from. */
const REFUSED: ReadonlyArray<{ name: string; bucket: 'creations' | 'reads'; query: string; variables: object }> = [
  {
    name: 'a malformed idempotency key',
    bucket: 'creations',
    query: M.project,
    variables: { input: { name: 'p' }, key: 'nope' },
  },
  {
    name: 'a string where an Int is due',
    bucket: 'creations',
    query: M.network,
    variables: { input: { projectId: randomUUID(), title: 'n', bandwidthMbps: 'lots' }, key: randomUUID() },
  },
  {
    name: 'a bad item deep in a list',
    bucket: 'creations',
    query: M.user,
    variables: {
      input: {
        projectId: randomUUID(),
        clusterId: randomUUID(),
        name: 'u',
        password: 'Pw-1',
        acls: [{}, { pattern: 7 }],
      },
    },
  },
  {
    // The cost is read from the directives before the variables are coerced: a missing `if` must not throw there.
    name: 'a required variable of @skip left out',
    bucket: 'creations',
    query: `mutation($input: CreateProjectInput!, $hide: Boolean!) { createProject(input: $input) @skip(if: $hide) { replayed } }`,
    variables: { input: { name: 'p' } },
  },
  {
    name: 'a read with a string where an Int is due',
    bucket: 'reads',
    query: 'query($n: Int) { projects(first: $n) { id } }',
    variables: { n: 'x' },
  },
];

async function spent(gw: TestGateway, bucket: string): Promise<number> {
  const text = await (await request(`${gw.url}/metrics`)).body.text();
  const re = new RegExp(
    `^gateway_rate_limit_points_total\\{app="shop",bucket="${bucket}",outcome="allowed"\\} (\\d+)$`,
    'm',
  );
  return Number(re.exec(text)?.[1] ?? 0);
}

describe.each(MUTATION_SURFACES)('bad variables on $path', ({ options, transports }) => {
  let limited: TestGateway;
  let open: TestGateway;
  beforeAll(async () => {
    const apps = { GATEWAY_API_KEYS: `shop:${KEY}` };
    limited = await startTestGateway({ ...apps, RATE_LIMIT_CREATIONS: '50/1h', RATE_LIMIT_READS: '50/1h' }, options);
    open = await startTestGateway(apps, options);
  });
  afterAll(async () => {
    await limited.close();
    await open.close();
  });

  it.each(transports.flatMap((t) => REFUSED.map((r) => ({ transport: t, ...r }))))(
    '$transport, $name: BAD_USER_INPUT, no point spent, nothing sent',
    async ({ transport, bucket, query, variables }) => {
      const before = await spent(limited, bucket);
      const sent = upstreamCreations(limited).length;
      const answer = await operationOver(transport, limited, KEY, { query, variables: variables as never });
      expect(answer.errors?.[0]?.extensions?.code, answer.raw).toBe('BAD_USER_INPUT');
      expect(await spent(limited, bucket)).toBe(before);
      expect(upstreamCreations(limited).length).toBe(sent);
      // Answered as without limits (over HTTP: the same 400 and body).
      const unlimited = await operationOver(transport, open, KEY, { query, variables: variables as never });
      expect(answer.raw).toBe(unlimited.raw);
      expect(answer.status).toBe(unlimited.status);
    },
  );

  it('a valid operation still spends its point', async () => {
    const before = await spent(limited, 'creations');
    const answer = await operationOver(transports[0]!, limited, KEY, {
      query: M.project,
      variables: { input: { name: 'ok' } },
    });
    expect(answer.errors, answer.raw).toBeUndefined();
    expect(await spent(limited, 'creations')).toBe(before + 1);
  });
});
