// An identification link is a bearer link to a person's session: it is stored only sealed. Its idShort "may appear in
// the link" (spec: Identification response), and the sandbox's link is its address plus /i/<idShort>: stored in clear
// it would give the link away, so it is sealed with the link, and still read back by the app that created it.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const API_KEY = 'short-id-app';
const CREATE = `mutation($key: UUID) {
  createIdentification(input: { workflowId: "wf-onboarding", applicantExternalId: "c-1" }, idempotencyKey: $key) {
    identification { id idShort url } replayed
  }
}`;
const READ = `query($id: ID!) { identification(id: $id) { id idShort url } }`;

describe('the short id of an identification link', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ GATEWAY_API_KEYS: API_KEY });
  });
  afterAll(() => gw.close());

  it('is stored only sealed, and read back by its app as created, replayed and queried', async () => {
    const key = randomUUID();
    const created = await gw.graphql(CREATE, { key }, { key: API_KEY });
    expect(created.errors).toBeUndefined();
    const { id, idShort, url } = created.data!.createIdentification.identification;
    expect(idShort).toMatch(/^[\w-]{6,}$/);
    expect(url).toContain(idShort);
    const replayed = await gw.graphql(CREATE, { key }, { key: API_KEY });
    expect(replayed.data!.createIdentification).toMatchObject({ identification: { id, idShort, url }, replayed: true });
    expect((await gw.graphql(READ, { id }, { key: API_KEY })).data!.identification).toEqual({ id, idShort, url });

    const files = fs.readdirSync(gw.dataDir).filter((f) => f.startsWith('gateway.sqlite'));
    const stored = files.map((f) => fs.readFileSync(path.join(gw.dataDir, f)).toString('latin1')).join('');
    expect(stored).toContain(id);
    expect(stored).not.toContain(idShort);
  });
});
