// A composite provisioning retried while its steps are at the upstream, and resumed after a step's answer was lost
// (docs/graphql-api.md, Idempotency and retries): calls with its key sent at once over every transport name the one
// provisioning and start no second run; several resumes of a failed provisioning at once run its remaining steps once;
// and a step whose creation the upstream did but whose answer never came is resumed under the same upstream key, so
// the upstream replays it instead of creating it twice.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { upstreamCreations } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { operationOver, type Answer, type Transport } from '../helpers/operation.js';

const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id } idempotencyKey replayed }
}`;
/** As PROVISION, with the provisioning as the call answers it: a resume's claimed state. */
const RESUME = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) {
    provisioning { id state steps { name state error { code } } }
    idempotencyKey
    replayed
  }
}`;
const STATE = `query($id: ID!) { provisioning(id: $id) { state steps { name state idempotencyKey } } }`;

const input = (n: string) => ({
  project: { name: 'p' },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.63.0.0/24' },
  cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
  topics: [{ name: n }],
});

type Resumed = {
  provisioning: { id: string; state: string; steps: Array<{ name: string; state: string; error: unknown }> };
  replayed: boolean;
};
const resumed = (answer: Answer): Resumed => payload(answer) as unknown as Resumed;

/** The project, the network, the subnet, the cluster and the topic. */
const STEPS = 5;
const TRANSPORTS: Transport[] = ['post', 'ws', 'sse', 'sse-single', 'post', 'ws'];

function payload(answer: Answer): { provisioning: { id: string }; idempotencyKey: string; replayed: boolean } {
  expect(answer.errors, answer.raw).toBeUndefined();
  return (answer.data as Record<string, any>).provisionKafkaCluster;
}

describe('provisionKafkaCluster retried while it runs, and resumed after a lost answer', () => {
  /**
   * For the 'slow' fault alone: its answer comes after 30 s and the attempt gives up long before; the steps answered
   * at once around it are answered within the timeout even if the machine stalls for a few seconds meanwhile.
   */
  let gw: TestGateway;
  /**
   * An attempt timeout far longer than a step stays held at the upstream: the held step ends when the test releases
   * it, never on a timer that a stall of the machine while the retries are sent could let run out first. Every case
   * whose failure is not a timeout runs here.
   */
  let holding: TestGateway;
  beforeAll(async () => {
    const env = { UPSTREAM_MAX_RETRIES: '0', UPSTREAM_CIRCUIT_BREAKER: 'off' };
    [gw, holding] = await Promise.all([
      startTestGateway({ ...env, UPSTREAM_TIMEOUT: '3s' }),
      startTestGateway({ ...env, UPSTREAM_TIMEOUT: '60s' }),
    ]);
  });
  afterAll(() => Promise.all([gw?.close(), holding?.close()]));

  const provision = (transport: Transport, n: string, key: string, to = gw) =>
    operationOver(transport, to, null, { query: PROVISION, variables: { input: input(n), key } });
  const state = async (id: string, to = gw) => {
    await to.gateway.services.provisioning.idle();
    return (await to.graphql(STATE, { id })).data!.provisioning as {
      state: string;
      steps: Array<{ name: string; state: string; idempotencyKey: string | null }>;
    };
  };
  /** Each step's resource made once upstream, each under its own key, in `sent`. */
  const oncePerStep = (sent: ReturnType<typeof upstreamCreations>) =>
    expect(new Set(sent.filter((r) => r.status === 201).map((r) => r.headers['idempotency-key'])).size).toBe(STEPS);

  it('calls with its key at once over every transport, a step held at the upstream: one provisioning, one run', async () => {
    const sandbox = holding.gateway.sandbox.cloud!;
    const key = randomUUID();
    const n = `t-${key.slice(0, 8)}`;
    const before = upstreamCreations(holding).length;
    const made = sandbox.resources().length + sandbox.projects().length;
    const held = sandbox.faults.hold();
    const answers = (await Promise.all(TRANSPORTS.map((t) => provision(t, n, key, holding)))).map(payload);
    expect(new Set(answers.map((a) => a.provisioning.id)).size).toBe(1);
    expect(answers.filter((a) => !a.replayed)).toHaveLength(1);
    // Retried once more while the first step is still at the upstream: the same provisioning, nothing sent.
    await expect.poll(() => held.arrived(), { timeout: 20_000 }).toBeGreaterThanOrEqual(1);
    const arrived = held.arrived();
    for (const t of TRANSPORTS.slice(0, 4))
      expect(payload(await provision(t, n, key, holding))).toEqual({
        ...answers.find((a) => !a.replayed)!,
        replayed: true,
      });
    expect(held.arrived()).toBe(arrived);
    held.release();
    expect((await state(answers[0]!.provisioning.id, holding)).state).toBe('SUCCEEDED');
    const sent = upstreamCreations(holding).slice(before);
    expect(sent).toHaveLength(STEPS);
    oncePerStep(sent);
    expect(sandbox.resources().length + sandbox.projects().length - made).toBe(STEPS);
  });

  it('several resumes of a failed provisioning at once, over every transport: the failed step and the rest run once', async () => {
    const sandbox = holding.gateway.sandbox.cloud!;
    const key = randomUUID();
    const n = `t-${key.slice(0, 8)}`;
    const before = upstreamCreations(holding).length;
    const made = sandbox.resources().length;
    // The cluster step (after the network and the subnet) fails once.
    sandbox.faults.enqueueFor(
      (path, method) => method === 'POST' && path === '/ocs/v1/services' && sandbox.resources().length === made + 2,
      '503',
    );
    const failed = payload(await provision('post', n, key, holding));
    expect((await state(failed.provisioning.id, holding)).state).toBe('FAILED');
    // The resumed cluster step is held at the upstream: every resume below arrives while the one resumed run is
    // still running, whatever order the transports deliver them in.
    const held = sandbox.faults.hold();
    const resume = (t: Transport) =>
      operationOver(t, holding, null, { query: RESUME, variables: { input: input(n), key } }).then(resumed);
    const resumes = await Promise.all(TRANSPORTS.map(resume));
    expect(new Set(resumes.map((a) => a.provisioning.id))).toEqual(new Set([failed.provisioning.id]));
    expect(resumes.filter((a) => !a.replayed)).toHaveLength(1);
    // The one that resumed it answers the provisioning as it claimed it: RUNNING, the failed step reset to PENDING.
    const started = resumes.find((a) => !a.replayed)!;
    expect(started.provisioning.state).toBe('RUNNING');
    expect(started.provisioning.steps.find((s) => s.name === 'kafkaCluster')).toEqual({
      name: 'kafkaCluster',
      state: 'PENDING',
      error: null,
    });
    await expect.poll(() => held.arrived(), { timeout: 20_000 }).toBe(1);
    // Resumed again over every transport while the cluster step is at the upstream: replayed, no second run.
    const again = await Promise.all(TRANSPORTS.map(resume));
    expect(again.map((a) => [a.provisioning.id, a.replayed])).toEqual(
      TRANSPORTS.map(() => [failed.provisioning.id, true]),
    );
    expect(held.arrived()).toBe(1);
    const running = await holding.graphql(STATE, { id: failed.provisioning.id });
    expect((running.data!.provisioning as { state: string }).state).toBe('RUNNING');
    held.release();
    expect((await state(failed.provisioning.id, holding)).state).toBe('SUCCEEDED');
    const sent = upstreamCreations(holding).slice(before);
    // Project, network, subnet, the cluster refused, then the cluster and the topic: one resume ran.
    expect(sent.map((r) => r.status)).toEqual([201, 201, 201, 503, 201, 201]);
    oncePerStep(sent);
  });

  it.each(['reset-after', 'slow'] as const)(
    'a step whose creation the upstream did, its answer lost (%s): resumed under the same key, created once',
    async (fault) => {
      // Only the 'slow' answer needs the short timeout.
      const to = fault === 'slow' ? gw : holding;
      const sandbox = to.gateway.sandbox.cloud!;
      const key = randomUUID();
      const n = `t-${key.slice(0, 8)}`;
      const before = upstreamCreations(to).length;
      const made = sandbox.resources().length;
      // The network step: the upstream creates the network, and the gateway never reads its answer.
      sandbox.faults.enqueueFor((path, method) => method === 'POST' && path === '/ocs/v1/services', fault);
      const failed = payload(await provision('ws', n, key, to));
      const first = await state(failed.provisioning.id, to);
      expect(first.state, JSON.stringify(first.steps)).toBe('FAILED');
      expect(first.steps.find((s) => s.name === 'network')!.state).toBe('FAILED');
      expect(sandbox.resources().length - made).toBe(1);
      const resumed = payload(await provision('sse', n, key, to));
      expect(resumed).toEqual({ ...failed, replayed: false });
      const done = await state(failed.provisioning.id, to);
      expect(done.state).toBe('SUCCEEDED');
      // The network, the subnet, the cluster and the topic: the network once, the upstream replaying it.
      expect(sandbox.resources().length - made).toBe(STEPS - 1);
      const network = done.steps.find((s) => s.name === 'network')!.idempotencyKey;
      const sent = upstreamCreations(to).slice(before);
      expect(sent.filter((r) => r.headers['idempotency-key'] === network)).toHaveLength(2);
    },
  );
});
