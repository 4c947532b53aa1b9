// One error rule on every transport (docs/contract.md, "Errors"): an error reaches the client only when the gateway
// raised it on purpose with a code of the contract. Anything else (a database that refused a connection, a bug) is
// answered INTERNAL_SERVER_ERROR with nothing of its own inside, and logged in full. Each seam below throws an error
// whose message looks like a secret; no byte of it may reach the client on POST /graphql (the direct path and Apollo's
// pipeline), GET /graphql, graphql-ws or graphql-sse, and the log must have it.
import { afterEach, describe, expect, it, vi } from 'vitest';

import { IdempotencyRecords } from '../../src/store/idempotency.js';
import { Ledger } from '../../src/store/ledger.js';
import { gatewaysPerTest, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { operationOver } from '../helpers/operation.js';

const start = gatewaysPerTest();
const disposers: Array<() => void | Promise<void>> = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const d of disposers.splice(0)) await d();
});

const KEY = 'masking-every-transport-key-01';
const SECRET = 'connect ECONNREFUSED 10.9.8.7:5432 password=hunter2-7f3a';
type Transport = 'http direct' | 'http apollo' | 'get' | 'ws' | 'sse';
const TRANSPORTS: Transport[] = ['http direct', 'http apollo', 'get', 'ws', 'sse'];

async function startFor(transport: Transport): Promise<TestGateway> {
  if (transport !== 'http apollo') return start({ GATEWAY_API_KEYS: KEY });
  const gw = await startTestGateway({ GATEWAY_API_KEYS: KEY }, { testing: { directPath: false } });
  disposers.push(() => gw.close());
  return gw;
}

/** How each transport's operation is sent. */
const VIA = { 'http direct': 'post', 'http apollo': 'post', get: 'get', ws: 'ws', sse: 'sse' } as const;

const SEAMS = [
  {
    name: 'the store under a query',
    query: '{ projects { id } }',
    fail: () => vi.spyOn(Ledger.prototype, 'list').mockRejectedValue(new Error(SECRET)),
  },
  {
    name: 'the store under a creation',
    query: `mutation { createProject(input: { name: "masked", description: "" }) { project { id } } }`,
    fail: () => vi.spyOn(IdempotencyRecords.prototype, 'claimFree').mockRejectedValue(new Error(SECRET)),
  },
];

describe.each(TRANSPORTS)('an unexpected error over %s', (transport) => {
  it.each(SEAMS.filter((s) => transport !== 'get' || s.query.startsWith('{')))(
    'from $name reaches the client as INTERNAL_SERVER_ERROR with nothing of its message, and the log in full',
    async (seam) => {
      const gw = await startFor(transport);
      seam.fail();
      const { raw, errors = [] } = await operationOver(VIA[transport], gw, KEY, { query: seam.query });
      expect(errors, raw).toHaveLength(1);
      expect(errors[0]).toMatchObject({
        message: 'Internal server error',
        extensions: { code: 'INTERNAL_SERVER_ERROR' },
      });
      for (const part of ['ECONNREFUSED', '10.9.8.7', 'hunter2']) expect(raw).not.toContain(part);
      expect(gw.logs()).toContain('hunter2-7f3a');
    },
  );
});
