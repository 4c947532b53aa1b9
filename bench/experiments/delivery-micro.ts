/**
 * What a single delivery's in-process stages cost, in µs of CPU per delivery (docs/decisions/062): opening the sealed
 * subject, executing the subscription's selection (graphql-js, and graphql-jit's compiled form), presenting and
 * encoding the `next` payload, with the gateway's own schema and the bench's subscription (bench/scenarios/fanout.ts).
 *
 *   npx tsx bench/experiments/delivery-micro.ts [iterations, default 50000]
 */
import { execute, parse } from 'graphql';
import { compileQuery, isCompiledQuery } from 'graphql-jit';

import { APP_GRANTS, type Caller } from '../../src/auth/caller.js';
import type { EventRecord } from '../../src/events/index.js';
import { deliverable } from '../../src/execution/present.js';
import { SharedExecution } from '../../src/execution/shared.js';
import { createContext } from '../../src/graphql/context.js';
import { mobileIdResolvers } from '../../src/graphql/mobile-id.js';
import { buildSchema } from '../../src/graphql/schema.js';
import { createLogger } from '../../src/logger.js';
import { authenticationView } from '../../src/mobile-id/views.js';
import { sealingContext, SecretBox } from '../../src/secret.js';
import { SUBSCRIPTION } from '../scenarios/fanout.js';

const N = Number(process.argv[2] ?? 50_000);
const schema = buildSchema([mobileIdResolvers] as Record<string, unknown>[]);
const box = new SecretBox(Buffer.alloc(32, 7));
const logger = createLogger({ level: 'silent' } as never);
const caller: Caller = { scope: 'app:bench', app: 'bench', grants: APP_GRANTS };
const scope = 'app:bench';
const authReqId = '6f1c2b0e-8d1e-4c1a-9f3e-2a5b7c9d0e1f';
const ctx = (field: string) => sealingContext('mobile-id', scope, authReqId, field);
const success = {
  v: 2,
  outcome: 'success',
  authReqId,
  tokenType: 'Bearer',
  accessToken: box.seal('bench-access-token', ctx('access_token')),
  idToken: box.seal('a.b.c', ctx('id_token')),
  expiresIn: 3600,
  expiresAt: Date.now() + 3_600_000,
  claims: { iss: 'https://mobileid.example', sub: null, acr: '2', amr: ['sim'] },
  sealedPersonal: box.seal(JSON.stringify({ sub: '79001234567', fields: {} }), ctx('personal')),
  verifiedWith: null,
  jwksUri: null,
  leadingKycMatch: null,
  correlationId: null,
  extra: {},
  sealedExtra: {},
  droppedExtra: null,
};
const event = (): EventRecord => ({
  seq: 1,
  kind: 'mobile-id',
  key: authReqId,
  dedupeKey: 'd',
  fingerprint: 'f',
  payload: success,
  meta: { requestId: 'bench', transactionId: null, contentType: 'application/json', gatewayRequestId: 'r' },
  scope,
  receivedAt: new Date(),
});
const context = {
  caller,
  warnings: null,
  services: { mobileId: { authentication: (e: EventRecord) => authenticationView(e, box, Date.now()) } },
} as never;
const document = parse(SUBSCRIPTION);
const variableValues = { authReqId };
const compiled = compileQuery(schema, document);
if (!isCompiledQuery(compiled)) throw new Error(JSON.stringify(compiled));

function perCall(label: string, fn: () => unknown): string {
  for (let i = 0; i < N / 10; i++) fn();
  const start = process.cpuUsage();
  for (let i = 0; i < N; i++) fn();
  const used = process.cpuUsage(start);
  return `| ${label} | ${((used.user + used.system) / N).toFixed(2)} |`;
}

const rows = ['| stage | µs per delivery |', '|---|---:|'];
rows.push(
  perCall(
    'open the sealed subject (AES-GCM, JSON)',
    () => authenticationView(event(), box, Date.now()) && JSON.parse(box.open(success.sealedPersonal, ctx('personal'))),
  ),
);
rows.push(perCall('view only (no open)', () => authenticationView(event(), box, Date.now())));
rows.push(
  perCall('graphql-js execute of the selection (opens the subject)', () =>
    execute({ schema, document, rootValue: event(), contextValue: context, variableValues }),
  ),
);
rows.push(
  perCall('graphql-jit compiled selection (opens the subject)', () => compiled.query(event(), context, variableValues)),
);
// The intake's clear values on the event's payload (DELIVERY_CLEAR_FROM_INTAKE): nothing to open.
const clearEvent = (): EventRecord => {
  const e = event();
  return {
    ...e,
    payload: { ...success },
    clear: { personal: { sub: '79001234567', fields: {} }, accessToken: 'bench-access-token', idToken: 'a.b.c' },
  };
};
rows.push(
  perCall('graphql-js execute, clear values from the intake', () =>
    execute({ schema, document, rootValue: clearEvent(), contextValue: context, variableValues }),
  ),
);
rows.push(
  perCall('graphql-jit compiled selection, clear values from the intake', () =>
    compiled.query(clearEvent(), context, variableValues),
  ),
);
rows.push(perCall('(the event and its clear values alone)', () => clearEvent()));
// As a single delivery runs it: SharedExecution (compiled) over the subscription's own context, a fresh one per
// delivery (each waiting subscription has its own), the execution's view of it made per event.
const sharedExecution = new SharedExecution(schema);
const services = (context as { services: never }).services;
rows.push(
  perCall('SharedExecution, compiled, a fresh subscription context per delivery (clear values)', () => {
    const own = createContext(services, caller, 'ws:1', logger);
    return sharedExecution.execute(clearEvent(), null, { schema, document, contextValue: own, variableValues });
  }),
);
rows.push(perCall('(a fresh subscription context alone)', () => createContext(services, caller, 'ws:1', logger)));

const result = execute({ schema, document, rootValue: event(), contextValue: context, variableValues }) as {
  data: unknown;
};
console.error(JSON.stringify(result), JSON.stringify(compiled.query(event(), context, variableValues)));
rows.push(
  perCall('present (deliverable) + JSON + UTF-8', () =>
    Buffer.from(
      `${JSON.stringify(deliverable({ data: (result as { data: unknown }).data } as never, context, logger))}}`,
    ),
  ),
);
process.stdout.write(`${rows.join('\n')}\n`);
