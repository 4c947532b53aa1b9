// A provisioning's run goes on after the answer of the call that launched it (or resumed it), and what it logs then
// names that call's request id (docs/contract.md, INTERNAL_SERVER_ERROR: logged in full with the request id): the id
// of the call's own `request` line, which the client read in `X-Request-Id`. Each case sends its calls with an
// `X-Request-Id` of its own and finds the run's line by it: once, and without the secrets of the error or the input.
// Only an internal throw reaches these lines: ONE method of the running gateway (the cloud service of the steps, the
// store's provisioning rows) is replaced per case, and restored after it.
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { ProvisioningRows } from '../../src/store/provisionings.js';
import { gatewaysPerTest, logLines, type TestGateway } from '../helpers/gateway.js';
import { testClock } from '../helpers/jwt.js';
import { kafkaInput } from '../helpers/resumable.js';
import { waitFor } from '../helpers/wait.js';

const start = gatewaysPerTest();
const KEY = 'run-lines-name-their-request-key-01';
/** A secret the thrown error carries, at a key the log masks: it never reaches a line. */
const SECRET = `s3cret-${randomUUID()}`;
/** The password of the input's Kafka user (kafkaInput). */
const INPUT_SECRET = 'Pr0vision-secret';
const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state } replayed }
}`;

afterEach(() => {
  vi.restoreAllMocks();
});

/** An error marked with `mark`, carrying SECRET where an HTTP client's error would carry a credential. */
function thrown(mark: string): Error {
  return Object.assign(new Error(`unexpected [${mark}]`), { password: SECRET, headers: { authorization: SECRET } });
}

interface Line {
  msg: string;
  requestId?: string;
  provisioning?: string;
  level: number;
}

const lines = (gw: TestGateway, keep: (l: Line) => boolean) => logLines<Line>(gw, keep);

/** The lines that hold the error marked `mark`: the error is logged once, on one line. */
function marked(gw: TestGateway, mark: string): string[] {
  return gw
    .logs()
    .split('\n')
    .filter((l) => l.includes(`[${mark}]`));
}

/** The provisioning mutation, sent with `requestId` as its X-Request-Id; the provisioning's id. */
async function provision(gw: TestGateway, input: unknown, key: string, requestId: string) {
  const res = await gw.graphql(PROVISION, { input, key }, { key: KEY, headers: { 'x-request-id': requestId } });
  expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
  return res.data!.provisionKafkaCluster as { provisioning: { id: string; state: string }; replayed: boolean };
}

/** The call's own `request` line is there, and names `requestId`: the id the run's lines must name. */
function requestLogged(gw: TestGateway, requestId: string): void {
  expect(lines(gw, (l) => l.msg === 'request' && l.requestId === requestId)).toHaveLength(1);
}

function noSecrets(gw: TestGateway): void {
  expect(gw.logs()).not.toContain(SECRET);
  expect(gw.logs()).not.toContain(INPUT_SECRET);
}

describe("a provisioning run's lines name the request that launched it", () => {
  it("a step that throws something unexpected: 'provisioning step failed' names the launching call, once", async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEY });
    vi.spyOn(gw.gateway.services.cloud, 'createNetwork').mockRejectedValue(thrown('step'));
    const launched = `launch-${randomUUID()}`;
    const { id } = (await provision(gw, kafkaInput('step-throws', '10.61.0.0/24'), randomUUID(), launched))
      .provisioning;
    await gw.gateway.services.provisioning.idle();

    requestLogged(gw, launched);
    const failed = lines(gw, (l) => l.msg === 'provisioning step failed');
    expect(failed).toEqual([expect.objectContaining({ level: 50, provisioning: id, requestId: launched })]);
    expect(marked(gw, 'step')).toHaveLength(1);
    noSecrets(gw);
  });

  it("a resumed run: its step's failure names the resuming call, not the one that launched it", async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEY });
    vi.spyOn(gw.gateway.services.cloud, 'createNetwork').mockRejectedValue(thrown('resumed'));
    const input = kafkaInput('resumed-throws', '10.62.0.0/24');
    const key = randomUUID();
    const launched = `launch-${randomUUID()}`;
    const { id } = (await provision(gw, input, key, launched)).provisioning;
    await gw.gateway.services.provisioning.idle();

    const resuming = `resume-${randomUUID()}`;
    const again = await provision(gw, input, key, resuming);
    expect(again.replayed).toBe(false);
    await gw.gateway.services.provisioning.idle();

    requestLogged(gw, resuming);
    expect(lines(gw, (l) => l.msg === 'provisioning step failed')).toEqual([
      expect.objectContaining({ provisioning: id, requestId: launched }),
      expect.objectContaining({ provisioning: id, requestId: resuming }),
    ]);
    noSecrets(gw);
  });

  it("the run's own store failing: 'provisioning run failed unexpectedly' names the launching call, once", async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEY });
    // The run's first write after the claim (its first step RUNNING) throws: the claim itself is an insert.
    vi.spyOn(ProvisioningRows.prototype, 'update').mockRejectedValue(thrown('run'));
    const launched = `launch-${randomUUID()}`;
    const { id } = (await provision(gw, kafkaInput('run-throws', '10.63.0.0/24'), randomUUID(), launched)).provisioning;
    await gw.gateway.services.provisioning.idle();

    requestLogged(gw, launched);
    expect(lines(gw, (l) => l.msg === 'provisioning run failed unexpectedly')).toEqual([
      expect.objectContaining({ level: 50, provisioning: id, requestId: launched }),
    ]);
    expect(marked(gw, 'run')).toHaveLength(1);
    noSecrets(gw);
  });

  it("a heartbeat failing while a step waits upstream: 'provisioning heartbeat failed' names the call", async () => {
    // A heartbeat every 100 ms of the wall's; the step's upstream call waits as long as the upstream holds it.
    const gw = await start({ GATEWAY_API_KEYS: KEY, IDEMPOTENCY_TAKEOVER: '300ms', UPSTREAM_TIMEOUT: '10m' });
    const held = gw.gateway.sandbox.cloud!.faults.hold();
    // Let go in any case: a held step would keep the gateway from closing.
    try {
      vi.spyOn(ProvisioningRows.prototype, 'touch').mockRejectedValue(thrown('heartbeat'));
      const launched = `launch-${randomUUID()}`;
      const { id } = (await provision(gw, kafkaInput('heartbeat-throws', '10.64.0.0/24'), randomUUID(), launched))
        .provisioning;
      await waitFor(
        () => lines(gw, (l) => l.msg === 'provisioning heartbeat failed').length > 0,
        20_000,
        'a heartbeat that failed',
      );
      vi.restoreAllMocks();
      held.release();
      await gw.gateway.services.provisioning.idle();

      requestLogged(gw, launched);
      const beats = lines(gw, (l) => l.msg === 'provisioning heartbeat failed');
      for (const beat of beats) expect(beat).toMatchObject({ level: 40, provisioning: id, requestId: launched });
      noSecrets(gw);
    } finally {
      held.release();
    }
  });

  it("taken over while it paused: its 'taken over' warning names the call that launched it", async () => {
    const clock = testClock();
    const takeoverMs = 600_000;
    const env = { GATEWAY_API_KEYS: KEY, IDEMPOTENCY_TAKEOVER: `${takeoverMs}ms`, UPSTREAM_TIMEOUT: '10m' };
    const a = await start(env, { testing: { clock: clock.now } });
    const b = await start({ ...env, DATA_DIR: a.dataDir }, { testing: { clock: clock.now } });
    const held = a.gateway.sandbox.cloud!.faults.hold();
    try {
      const input = kafkaInput('taken-over', '10.65.0.0/24');
      const key = randomUUID();
      const launched = `launch-${randomUUID()}`;
      const { id } = (await provision(a, input, key, launched)).provisioning;
      await waitFor(() => held.arrived() > 0, 20_000, 'the first step at the upstream');
      clock.advance(takeoverMs + 1_000);
      const resuming = `resume-${randomUUID()}`;
      expect((await provision(b, input, key, resuming)).replayed).toBe(false);
      await b.gateway.services.provisioning.idle();

      held.release();
      await a.gateway.services.provisioning.idle();
      requestLogged(a, launched);
      expect(lines(a, (l) => l.msg.includes('taken over'))).toEqual([
        expect.objectContaining({ level: 40, provisioning: id, requestId: launched }),
      ]);
      noSecrets(a);
    } finally {
      held.release();
    }
  });
});
