/**
 * What each per-request safety check of the admit stage costs, in µs per request (decision 049): the API-key
 * authentication, the scope check, the cost (formula and, for comparison, the per-request walk it replaced) and the
 * whole admission, for the benchmark's mutation and tree query, in this process, with the gateway's own schema.
 *
 *   npx tsx bench/experiments/admission-micro.ts [iterations, default 200000]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'graphql';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';

import { APP_GRANTS, type Caller } from '../../src/auth/caller.js';
import { JwksKeys, JwtAuthenticator } from '../../src/auth/jwt.js';
import { createAuthenticator } from '../../src/auth/keys.js';
import { loadConfig } from '../../src/config/index.js';
import { createAdmission } from '../../src/execution/admit.js';
import { OperationLimits } from '../../src/execution/limits.js';
import { scopeCheck } from '../../src/execution/scopes.js';
import { buildSchema } from '../../src/graphql/schema.js';
import { createLogger } from '../../src/logger.js';
import type { RateLimits } from '../../src/ratelimit/buckets.js';
import { CREATE_NETWORK } from '../scenarios/mutation.js';
import { PROJECT_TREE } from '../scenarios/query.js';

const N = Number(process.argv[2] ?? 200_000);
const schema = buildSchema([]);
const config = loadConfig({ GATEWAY_API_KEYS: 'bench:bench-api-key', DATA_DIR: '/tmp' });
const formula = new OperationLimits(config.graphqlLimits);
const walk = new OperationLimits({ ...config.graphqlLimits, costFormula: false });
const scopes = scopeCheck(schema);
const caller: Caller = { scope: 'app:bench', app: 'bench', grants: APP_GRANTS };
// Rate limits off, as the benchmark runs (and as a gateway without RATE_LIMIT_* does).
const rateLimits = { limited: () => false } as unknown as RateLimits;
const admit = createAdmission({ schema, limits: formula, rateLimits, seen: () => undefined });
const authenticate = createAuthenticator(config, (k) => k);

function perCall(label: string, fn: () => unknown): string {
  for (let i = 0; i < N / 10; i++) fn(); // warm-up
  const start = process.cpuUsage();
  for (let i = 0; i < N; i++) fn();
  const used = process.cpuUsage(start);
  return `| ${label} | ${((used.user + used.system) / N).toFixed(2)} |`;
}

const rows: string[] = ['| check | µs per request |', '|---|---:|'];
rows.push(
  perCall('API-key authentication (sha256 of the key, constant-time compare)', () =>
    authenticate('Bearer bench-api-key'),
  ),
);
for (const [name, text, variables] of [
  ['mutation', CREATE_NETWORK, { input: { projectId: 'p', title: 't' }, key: '6f1c2b0e-8d1e-4c1a-9f3e-2a5b7c9d0e1f' }],
  ['tree query', PROJECT_TREE, { id: 'p' }],
] as const) {
  const document = parse(text);
  const operation = document.definitions[0] as never;
  rows.push(
    perCall(`${name}: scope check (an app without every scope)`, () => scopes(APP_GRANTS, document, operation)),
  );
  rows.push(perCall(`${name}: cost, formula per document`, () => formula.checkCost(schema, document, variables)));
  rows.push(
    perCall(`${name}: cost, walk per request (GRAPHQL_COST_FORMULA=false)`, () =>
      walk.checkCost(schema, document, variables),
    ),
  );
  rows.push(
    perCall(`${name}: whole admission (scopes, cost, rate limits off)`, () =>
      admit(caller, document, operation, variables),
    ),
  );
}

// A JWT app: ES256, verified by jose every time (AUTH_JWT_CACHE_SIZE=0) or once and then from the cache.
const { privateKey, publicKey } = await generateKeyPair('ES256');
const jwksFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'micro-jwks-')), 'jwks.json');
fs.writeFileSync(
  jwksFile,
  JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: 'k', alg: 'ES256', use: 'sig' }] }),
);
const token = await new SignJWT({ azp: 'shop', scope: 'cloud:read' })
  .setProtectedHeader({ alg: 'ES256', kid: 'k' })
  .setIssuer('https://idp')
  .setAudience('gateway')
  .setExpirationTime('2h')
  .sign(privateKey);
async function perAsyncCall(label: string, n: number, fn: () => Promise<unknown>): Promise<string> {
  for (let i = 0; i < n / 10; i++) await fn();
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) await fn();
  const used = process.cpuUsage(start);
  return `| ${label} | ${((used.user + used.system) / n).toFixed(2)} |`;
}
for (const size of ['0', '10000']) {
  const jwtConfig = loadConfig({
    AUTH_JWKS_FILE: jwksFile,
    AUTH_ISSUER: 'https://idp',
    AUTH_AUDIENCE: 'gateway',
    AUTH_APPS: 'shop',
    AUTH_JWT_CACHE_SIZE: size,
    DATA_DIR: '/tmp',
  }).jwtAuth!;
  const jwt = new JwtAuthenticator(
    jwtConfig,
    [
      new JwksKeys({
        source: jwtConfig.issuers[0]!.jwks,
        refreshIntervalMs: jwtConfig.refreshIntervalMs,
        now: Date.now,
        logger: createLogger({ level: 'silent' }),
      }),
    ],
    Date.now,
    new Set(),
  );
  rows.push(
    await perAsyncCall(
      `JWT (ES256), ${size === '0' ? 'verified on every request (AUTH_JWT_CACHE_SIZE=0)' : 'from the cache of verified tokens'}`,
      size === '0' ? 2_000 : 100_000,
      () => jwt.authenticate(token),
    ),
  );
}
process.stdout.write(`${rows.join('\n')}\n`);
