// Whether an identification creation is in flight, for a callback that names an identification not stored yet, is
// judged by its lease, and the lease was written on the gateway's clock: it is read on that clock too. The creation
// is held at a real upstream (an HTTP server that answers when the test says), the gateway's clock an hour behind
// the wall's.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { gatewaysPerTest } from '../helpers/gateway.js';

const CREATE = `mutation($input: CreateIdentificationInput!) {
  createIdentification(input: $input) { identification { id } } }`;
const CALLBACK_URL = `query($w: String!) { identificationCallbackUrl(workflowId: $w) }`;

const start = gatewaysPerTest();

describe('an identification creation in flight, on the gateway clock', () => {
  it("a callback naming an identification not stored yet is answered 503 while the creation's lease runs on the gateway's clock", async () => {
    let arrived!: () => void;
    const reached = new Promise<void>((resolve) => (arrived = resolve));
    const held: http.ServerResponse[] = [];
    const upstream = http.createServer((req, res) => {
      req.resume();
      held.push(res);
      arrived();
    });
    const release = () => {
      for (const r of held.splice(0)) r.writeHead(500).end();
    };
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    try {
      const clock = { now: Date.now() - 3_600_000 };
      const gw = await start(
        {
          GATEWAY_API_KEYS: 'shop:key-shop',
          IDENTIFICATION_API_URL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
          IDENTIFICATION_API_TOKEN: 'token',
          SANDBOX_UPSTREAMS: 'cloud,verification,rfm,mobile-id',
          UPSTREAM_TIMEOUT: '10m',
        },
        { testing: { clock: () => clock.now } },
      );
      const workflowId = 'wf-held';
      const created = gw.graphql(CREATE, { input: { workflowId } }, { key: 'key-shop' });
      // The address is stored before the upstream call, which the upstream now holds.
      await reached;
      const address = (await gw.graphql(CALLBACK_URL, { w: workflowId }, { key: 'key-shop' })).data!
        .identificationCallbackUrl as string;
      const res = await request(address, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ id: 'not-stored-yet', workflowId, status: 'COMPLETED' }),
      });
      const body = await res.body.text();
      expect(res.statusCode, body).toBe(503);
      expect(JSON.parse(body)).toMatchObject({ error: 'temporarily_unavailable' });

      release();
      await created;
    } finally {
      release();
      await new Promise<void>((resolve) => upstream.close(() => resolve()));
    }
  });
});
