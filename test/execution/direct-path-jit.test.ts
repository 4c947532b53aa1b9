// The cloud tree's compiled queries (decision 035) against ledger rows whose values the schema's scalars and enums
// must coerce or refuse: every answer equals Apollo's (graphql-js) byte for byte, whichever path produced it.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

function post(url: string, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${url}/graphql`,
      { method: 'POST', headers: { 'content-type': 'application/json', connection: 'close' }, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const ODD_SPECS: Record<string, Record<string, unknown>> = {
  'a numeric string for an Int': { title: 't', bandwidthMbps: '12', defaultFirewallAction: 'ALLOW' },
  'a word for an Int': { title: 't', bandwidthMbps: 'fast', defaultFirewallAction: 'ALLOW' },
  'a fraction for an Int': { title: 't', bandwidthMbps: 1.5, defaultFirewallAction: 'ALLOW' },
  'a boolean for an Int': { title: 't', bandwidthMbps: true, defaultFirewallAction: 'ALLOW' },
  'a number for a String': { title: 42, bandwidthMbps: 1, defaultFirewallAction: 'ALLOW' },
  'an object for a String': { title: { a: 1 }, bandwidthMbps: 1, defaultFirewallAction: 'ALLOW' },
  'an unknown enum value': { title: 't', bandwidthMbps: 1, defaultFirewallAction: 'allow', region: 'nowhere' },
  'nothing at all': {},
};

describe('compiled cloud-tree queries over odd ledger values answer as graphql-js', () => {
  const gws: TestGateway[] = [];
  beforeAll(async () => {
    gws.push(await startTestGateway({}, { testing: { directPath: false } }), await startTestGateway({}));
  });
  afterAll(async () => {
    await Promise.all(gws.map((g) => g.close()));
  });

  it.each(Object.entries(ODD_SPECS))('%s', async (_name, spec) => {
    const id = randomUUID();
    const projectId = randomUUID();
    for (const gw of gws) {
      await gw.gateway.services.ledger.record({
        id: projectId,
        kind: 'project',
        projectId,
        parentId: null,
        title: 'p',
        spec: {},
        response: {},
        idempotencyKey: null,
        createdBy: 'test',
      });
      await gw.gateway.services.ledger.record({
        id,
        kind: 'network',
        projectId,
        parentId: null,
        title: null,
        spec,
        response: {},
        idempotencyKey: null,
        createdBy: 'test',
      });
    }
    const query =
      'query($id: ID!) { project(id: $id) { name networks { id title bandwidthMbps defaultFirewallAction region } } }';
    const body = JSON.stringify({ query, variables: { id: projectId } });
    const stats = gws[1]!.gateway.directPath!.stats;
    const tried = () => stats.compiled + stats.recompiled;
    const before = tried();
    const [a, p] = [await post(gws[0]!.url, body), await post(gws[1]!.url, body)];
    expect(p).toEqual(a);
    // The compiled query ran (and, when its answer held an error, graphql-js answered).
    expect(tried()).toBe(before + 1);
    const nullable = JSON.stringify({
      query: 'query($id: ID!) { project(id: $id) { networks { title } } }',
      variables: { id: projectId },
    });
    expect(await post(gws[1]!.url, nullable)).toEqual(await post(gws[0]!.url, nullable));
  });
});
