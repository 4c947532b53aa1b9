import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { createChain } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

describe('passwords are never stored or logged', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ LOG_LEVEL: 'trace' });
    await createChain(gw);
    // a failing upstream call logs too: make sure its log lines carry no password either
    gw.gateway.sandbox.cloud!.faults.enqueue('503');
    await gw.graphql(`mutation($i: CreateKafkaUserInput!) { createKafkaUser(input: $i) { kafkaUser { id } } }`, {
      i: {
        projectId: (await gw.graphql('{ projects { id } }')).data!.projects[0].id,
        clusterId: (await gw.graphql('{ projects { kafkaClusters { id } } }')).data!.projects[0].kafkaClusters[0].id,
        name: 'second',
        password: 'S3cret-kafka-pass!',
      },
    });
    await gw.close();
  });
  afterAll(() => gw.close());

  it('the Kafka user and VM passwords were really sent upstream', () => {
    const bodies = JSON.stringify(gw.gateway.sandbox.cloud!.requests.map((r) => r.body));
    expect(bodies).toContain('S3cret-kafka-pass!');
    expect(bodies).toContain('Vm-pa55word!');
  });

  it('appear nowhere in the SQLite files (database, WAL and shared memory)', () => {
    const files = fs.readdirSync(gw.dataDir).filter((f) => f.startsWith('gateway.sqlite'));
    expect(files).toContain('gateway.sqlite');
    for (const f of files) {
      const bytes = fs.readFileSync(path.join(gw.dataDir, f));
      expect(bytes.includes(Buffer.from('S3cret-kafka-pass!')), f).toBe(false);
      expect(bytes.includes(Buffer.from('Vm-pa55word!')), f).toBe(false);
    }
  });

  it('appear in no log line, even at trace level', () => {
    const logs = gw.logs();
    expect(logs.length).toBeGreaterThan(1000);
    expect(logs).not.toContain('S3cret-kafka-pass!');
    expect(logs).not.toContain('Vm-pa55word!');
  });
});
