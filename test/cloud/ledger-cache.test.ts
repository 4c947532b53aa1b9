// The cloud ledger's records kept in memory once read (LEDGER_CACHE_RECORDS, docs/decisions/070) against the switch
// off: the same ledger rows in both gateways, the same answers byte for byte over HTTP, new rows seen at once, and an
// app's own records never answered from memory.
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const A = 'ledger-cache-key-a';
const B = 'ledger-cache-key-b';

const TREE = `query($id: ID!) {
  project(id: $id) {
    id name description createdAt raw
    networks {
      id title description bandwidthMbps defaultFirewallAction region zone createdAt raw
      subnets { id title cidr networkId createdAt raw network { id title } }
      ipAddresses { id title address raw }
    }
    kafkaClusters { id title }
    virtualMachines { id title }
  }
}`;
const NODE = `query($id: ID!) { a: node(id: $id) { __typename id } }`;

async function post(url: string, query: string, variables: Record<string, unknown>, key = A): Promise<string> {
  const res = await request(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ query, variables }),
  });
  return `${res.statusCode} ${await res.body.text()}`;
}

describe('cloud ledger records kept in memory answer as reading every row (LEDGER_CACHE_RECORDS on and off)', () => {
  let off: TestGateway;
  let on: TestGateway;
  /** Keeps 4 records: most reads find some records in memory and read the others. */
  let small: TestGateway;
  const projectId = randomUUID();
  const networks = [randomUUID(), randomUUID()];
  const at = (i: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, i));

  /** The same rows in both gateways' ledgers. */
  const record = async (
    id: string,
    kind: 'project' | 'network' | 'subnet' | 'ip_address',
    parentId: string | null,
    i: number,
    spec: Record<string, unknown>,
  ) => {
    for (const gw of [off, on, small])
      await gw.gateway.services.ledger.record({
        id,
        kind,
        projectId,
        parentId,
        title: `${kind}-${i}`,
        spec,
        response: { id, kind, metadata: { title: `${kind}-${i}` }, address: `10.0.0.${i}` },
        idempotencyKey: null,
        createdBy: 'test',
        createdAt: at(i),
      });
  };

  beforeAll(async () => {
    const env = { GATEWAY_API_KEYS: `${A},${B}`, SANDBOX_CALLBACK_DELAY_MS: '600000' };
    [off, on, small] = await Promise.all([
      startTestGateway({ ...env, LEDGER_CACHE_RECORDS: '0' }),
      startTestGateway(env),
      startTestGateway({ ...env, LEDGER_CACHE_RECORDS: '4' }),
    ]);
    await record(projectId, 'project', null, 0, { name: 'p', description: 'the project' });
    for (const [n, networkId] of networks.entries()) {
      await record(networkId, 'network', null, 10 - n, {
        title: `net-${n}`,
        description: '',
        bandwidthMbps: 100 + n,
        defaultFirewallAction: 'ALLOW',
        region: 'MSK',
        zone: 'MSK_AVNTG',
      });
      for (let s = 0; s < 3; s++)
        await record(randomUUID(), 'subnet', networkId, 20 + 3 * n + s, {
          networkId,
          title: `sub-${n}-${s}`,
          cidr: `10.${n}.${s}.0/24`,
        });
      await record(randomUUID(), 'ip_address', networkId, 40 + n, { networkId, description: '' });
    }
  });
  afterAll(async () => {
    await Promise.all([off?.close(), on?.close(), small?.close()]);
  });

  const same = async (query: string, variables: Record<string, unknown>, key = A) => {
    const answer = await post(off.url, query, variables, key);
    expect(answer).toMatch(/^200 /);
    // Twice: the second answer comes from the records kept by the first (with 4 kept, the others from the store).
    for (const gw of [on, small])
      for (let i = 0; i < 2; i++) expect(await post(gw.url, query, variables, key)).toBe(answer);
    return answer;
  };

  it('answers a project tree, raw answers included, byte for byte as the switch off does', async () => {
    const answer = await same(TREE, { id: projectId });
    expect(answer).toContain('sub-1-2');
    expect(answer).not.toContain('"errors"');
  });

  it('answers node(id) for each kind and an unknown id as the switch off does', async () => {
    for (const id of [projectId, ...networks, randomUUID()]) await same(NODE, { id });
  });

  it('sees a resource recorded after the tree was read', async () => {
    await same(TREE, { id: projectId });
    await record(randomUUID(), 'subnet', networks[0]!, 5, {
      networkId: networks[0],
      title: 'late',
      cidr: '10.9.9.0/24',
    });
    const answer = await same(TREE, { id: projectId });
    // Oldest first: recorded later, created earlier than its siblings.
    expect(answer.indexOf('"late"')).toBeLessThan(answer.indexOf('sub-0-0'));
  });

  it('reads one statement per level below the project when every record is in memory, as many as the switch off', async () => {
    const query = `query($id: ID!) { project(id: $id) { networks { subnets { id } } } }`;
    const statements = async (gw: TestGateway) => {
      const before = gw.gateway.services.store.stats.queries;
      expect(await post(gw.url, query, { id: projectId })).toMatch(/^200 .*"subnets"/);
      return gw.gateway.services.store.stats.queries - before;
    };
    // The switch off: project, networks, subnets.
    expect(await statements(off)).toBe(3);
    expect(await statements(off)).toBe(3);
    await statements(on);
    // Networks' ids, subnets' ids; the project's record from memory.
    expect(await statements(on)).toBe(2);
  });

  it("never answers an app's own record from memory, and another app sees it as an unknown id", async () => {
    const IDENTIFY = `mutation { createIdentification(input: { workflowId: "wf-cache" }) { identification { id } } }`;
    for (const gw of [off, on]) {
      const created = await post(gw.url, IDENTIFY, {}, A);
      const id = (
        JSON.parse(created.slice(4)) as { data: { createIdentification: { identification: { id: string } } } }
      ).data.createIdentification.identification.id;
      const query = `query($id: ID!) { node(id: $id) { id } }`;
      const unknown = await post(gw.url, query, { id: randomUUID() }, B);
      for (let i = 0; i < 2; i++) {
        const before = gw.gateway.services.store.stats.queries;
        expect(await post(gw.url, query, { id }, A)).toBe(`200 {"data":{"node":{"id":"${id}"}}}\n`);
        expect(gw.gateway.services.store.stats.queries - before).toBeGreaterThanOrEqual(1);
        expect(await post(gw.url, query, { id }, B)).toBe(unknown);
      }
    }
  });
});
