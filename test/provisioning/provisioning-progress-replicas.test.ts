import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';

import type { TestGateway } from '../helpers/gateway.js';
import { startReplicas, type Replicas } from '../helpers/postgres.js';

const PROVISION = `mutation($input: ProvisionKafkaClusterInput!) {
  provisionKafkaCluster(input: $input) { provisioning { id state } }
}`;
const PROGRESS = `subscription($id: ID!) { provisioningProgress(id: $id) { state steps { name state } } }`;

const input = {
  project: { name: 'replicated' },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.60.0.0/24' },
  ipAddress: { title: 'public' },
  cluster: { title: 'kafka', instanceType: 'C2_MEDIUM' },
  topics: [{ name: 'orders', replicationFactor: 3 }],
  users: [{ name: 'svc', password: 'Repl1cated-secret' }],
};

/** Every provisioningProgress message a subscriber on `gw` receives, as `STATE:<steps done>`, until the stream completes. */
async function follow(gw: TestGateway, id: string, onFirst?: () => void): Promise<string[]> {
  const client = createClient({
    url: gw.url.replace('http', 'ws') + '/graphql',
    webSocketImpl: WebSocket,
    retryAttempts: 0,
  });
  const seen: string[] = [];
  try {
    for await (const msg of client.iterate<{ provisioningProgress: { state: string; steps: { state: string }[] } }>({
      query: PROGRESS,
      variables: { id },
    })) {
      expect(msg.errors).toBeUndefined();
      const p = msg.data!.provisioningProgress;
      seen.push(`${p.state}:${p.steps.filter((s) => s.state === 'DONE').length}`);
      if (seen.length === 1) onFirst?.();
    }
  } finally {
    await client.dispose();
  }
  return seen;
}

describe('provisioningProgress across replicas (PostgreSQL event log)', () => {
  let replicas: Replicas | undefined;
  let a: TestGateway;
  let b: TestGateway;
  beforeAll(async () => {
    replicas = await startReplicas('provisioning_replicas');
    ({ a, b } = replicas);
  }, 120_000);
  afterAll(() => replicas?.close());

  it('a provisioning that replica A runs streams every step to a subscriber on replica B, and a late subscriber gets its final state', async () => {
    // Replica A's cloud holds its requests until the subscriber on B has its first message, so that B is connected
    // while the steps run however long a loaded machine takes to connect it (a latency of the upstream would be a
    // race with the connection).
    const cloudOfA = a.gateway.sandbox.cloud!;
    const held = cloudOfA.faults.hold();
    const started = await a.graphql(PROVISION, { input });
    expect(started.errors).toBeUndefined();
    const id = started.data!.provisionKafkaCluster.provisioning.id as string;

    let doneWhenBConnected = -1;
    let seenOnB: string[];
    try {
      seenOnB = await follow(b, id, () => {
        doneWhenBConnected = cloudOfA.requests.length;
        held.release();
      });
    } finally {
      // Let go in any case: a held step would keep the gateway from closing.
      held.release();
    }

    expect(seenOnB.at(-1)).toBe('SUCCEEDED:7');
    // B ran nothing itself: every later state crossed from A through the event log and LISTEN/NOTIFY.
    expect(b.gateway.sandbox.cloud!.requests).toHaveLength(0);
    expect(doneWhenBConnected).toBeLessThan(7);
    expect(seenOnB.length).toBeGreaterThan(1);
    const counts = seenOnB.map((s) => Number(s.split(':')[1]));
    expect([...counts].sort((x, y) => x - y)).toEqual(counts);

    // A subscriber that comes after the end gets the current (final) state at once, then completion.
    expect(await follow(b, id)).toEqual(['SUCCEEDED:7']);
    expect(await follow(a, id)).toEqual(['SUCCEEDED:7']);
  });
});
