// Two replicas on one PostgreSQL racing one idempotency key, each request over another transport (an app that retried
// on a second connection while its first request was still running): one claim wins, the upstream is held with the
// first request until the other has been sent, and then exactly one creation was made; the other replica's answer is
// the replay of the first. An equal input written differently races as the same request; another input with the key is
// IDEMPOTENCY_KEY_REUSED, on either replica, also while the first request runs on the other. Each replica has its own
// sandbox upstream: a second creation, on either one, would be counted.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { upstreamKey } from '../../src/upstream/idempotency.js';
import type { TestGateway } from '../helpers/gateway.js';
import { operationOver, type Answer, type Transport } from '../helpers/operation.js';
import { startReplicas, type Replicas } from '../helpers/postgres.js';

interface Race {
  field: string;
  upstream: 'cloud' | 'verification';
  query: string;
  input: (n: string) => Record<string, unknown>;
  same: (n: string) => Record<string, unknown>;
  other: (n: string) => Record<string, unknown>;
  transports: [Transport, Transport];
}

const RACES: Race[] = [
  {
    field: 'createProject',
    upstream: 'cloud',
    query: `mutation($input: CreateProjectInput!, $key: UUID) {
      createProject(input: $input, idempotencyKey: $key) { project { id } idempotencyKey replayed } }`,
    input: (n) => ({ name: n }),
    same: (n) => ({ description: '', name: ` ${n}` }),
    other: (n) => ({ name: `${n}-other` }),
    transports: ['post', 'ws'],
  },
  {
    field: 'registerVerification',
    upstream: 'verification',
    query: `mutation($input: RegisterVerificationInput!, $key: UUID) {
      registerVerification(input: $input, idempotencyKey: $key) { verification { id } idempotencyKey replayed } }`,
    input: (n) => ({ workflowId: 'wf-kyc', applicant: { lastName: 'Petrova' }, externalId: n }),
    same: (n) => ({ externalId: `${n} `, callback: true, applicant: { lastName: 'Petrova' }, workflowId: 'wf-kyc' }),
    other: (n) => ({ workflowId: 'wf-kyc', applicant: { lastName: 'Ivanova' }, externalId: n }),
    transports: ['sse', 'post'],
  },
];

const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id } idempotencyKey replayed } }`;

function payload(answer: Answer, field: string): Record<string, any> {
  expect(answer.errors, answer.raw).toBeUndefined();
  return (answer.data as Record<string, any>)[field];
}

const sandboxOf = (gw: TestGateway, upstream: Race['upstream']) => gw.gateway.sandbox[upstream]!;

describe('two replicas on PostgreSQL racing one idempotency key', () => {
  let replicas: Replicas;
  beforeAll(async () => {
    replicas = await startReplicas('race_same_key', { IDEMPOTENCY_WAIT: '60s', SANDBOX_CALLBACK_DELAY_MS: '600000' });
  }, 120_000);
  afterAll(() => replicas?.close());

  it.each(RACES.map((race) => ({ race, field: race.field })))(
    '$field: one creation, the other replica replays it; another input is REUSED',
    async ({ race }) => {
      const { a, b } = replicas;
      const key = randomUUID();
      const n = `race-${key}`;
      const sentUnder = () =>
        [a, b]
          .flatMap((gw) => sandboxOf(gw, race.upstream).requests)
          .filter((r) => r.method === 'POST' && r.headers['idempotency-key'] === upstreamKey('open', key)).length;
      const held = [a, b].map((gw) => sandboxOf(gw, race.upstream).faults.hold());
      const arrived = () => held.reduce((sum, h) => sum + h.arrived(), 0);
      const [overA, overB] = race.transports;
      const first = operationOver(overA, a, null, { query: race.query, variables: { input: race.input(n), key } });
      const second = operationOver(overB, b, null, { query: race.query, variables: { input: race.same(n), key } });
      await expect.poll(arrived, { timeout: 20_000 }).toBe(1);
      for (const h of held) h.release();
      const answers = [payload(await first, race.field), payload(await second, race.field)];
      expect(answers.map((p) => p.replayed).sort()).toEqual([false, true]);
      expect(answers[0]).toEqual({ ...answers[1], replayed: answers[0]!.replayed });
      for (const [gw, transport] of [
        [a, overB],
        [b, overA],
      ] as const) {
        const reused = await operationOver(transport, gw, null, {
          query: race.query,
          variables: { input: race.other(n), key },
        });
        expect(reused.errors?.[0]?.extensions?.code, reused.raw).toBe('IDEMPOTENCY_KEY_REUSED');
      }
      expect(arrived()).toBe(1);
      expect(sentUnder()).toBe(1);
    },
    60_000,
  );

  it.each(RACES.map((race) => ({ race, field: race.field })))(
    '$field: another input with the key at the same moment on the other replica is REUSED, sending nothing',
    async ({ race }) => {
      const { a, b } = replicas;
      const key = randomUUID();
      const n = `race-other-${key}`;
      const held = [a, b].map((gw) => sandboxOf(gw, race.upstream).faults.hold());
      const arrived = () => held.reduce((sum, h) => sum + h.arrived(), 0);
      const [overA, overB] = race.transports;
      const both = [
        operationOver(overA, a, null, { query: race.query, variables: { input: race.input(n), key } }),
        operationOver(overB, b, null, { query: race.query, variables: { input: race.other(n), key } }),
      ];
      // Whichever claimed the key is held at its upstream; the other is answered meanwhile, without waiting for it.
      await expect.poll(arrived, { timeout: 20_000 }).toBe(1);
      const first = await Promise.race(both);
      expect(first.errors?.[0]?.extensions?.code, first.raw).toBe('IDEMPOTENCY_KEY_REUSED');
      for (const h of held) h.release();
      const codes = (await Promise.all(both)).map((answer) => answer.errors?.[0]?.extensions?.code ?? 'created');
      expect(codes.sort()).toEqual(['IDEMPOTENCY_KEY_REUSED', 'created']);
      expect(arrived()).toBe(1);
    },
    60_000,
  );

  it('provisionKafkaCluster: one provisioning, each step created once across both replicas', async () => {
    const { a, b } = replicas;
    const key = randomUUID();
    const input = {
      project: { name: `race-${key}` },
      network: { title: 'net' },
      subnet: { title: 'sub', cidr: '10.65.0.0/24' },
      cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
    };
    const same = { ...input, subnet: { cidr: '10.65.0.0/24 ', title: ' sub' }, region: 'MSK' };
    const creations = () =>
      [a, b].flatMap((gw) => gw.gateway.sandbox.cloud!.requests).filter((r) => r.method === 'POST' && r.status === 201)
        .length;
    const before = creations();
    const answers = await Promise.all([
      operationOver('post', a, null, { query: PROVISION, variables: { input, key } }),
      operationOver('ws', b, null, { query: PROVISION, variables: { input: same, key } }),
    ]);
    const [fromA, fromB] = answers.map((answer) => payload(answer, 'provisionKafkaCluster'));
    expect(fromA!.provisioning.id).toBe(fromB!.provisioning.id);
    expect([fromA!.replayed, fromB!.replayed].sort()).toEqual([false, true]);
    await Promise.all([a, b].map((gw) => gw.gateway.services.provisioning.idle()));
    // The project, the network, the subnet and the cluster.
    expect(creations() - before).toBe(4);
  }, 60_000);
});
