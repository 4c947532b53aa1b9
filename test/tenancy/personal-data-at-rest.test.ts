// Personal data at rest: rfm answers (the matched names) and identification links (bearer links to a person's
// session) are stored only sealed, in the ledger and in idempotency records; request fingerprints are keyed digests.
// Checked on the SQLite files themselves, over real HTTP against the sandbox.
import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { canonicalJson } from '../../src/fingerprint.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';

const start = gatewaysPerTest();

const RFM = `mutation($key: UUID) { checkRfm(input: { fullName: "Listed Person", birthDate: "1980-02-02" }, idempotencyKey: $key) { result inCatalog replayed } }`;
const IDENTIFY = `mutation($key: UUID) {
  createIdentification(input: { workflowId: "wf-at-rest", applicantExternalId: "customer-at-rest" }, idempotencyKey: $key) {
    identification { id url raw } replayed
  }
}`;
const READ = `query($id: ID!) { identification(id: $id) { url raw } }`;

/**
 * Every byte the store wrote to DATA_DIR (database, WAL, shared memory), as latin1 text to search in. The database
 * file itself is read too: a checkpoint copies the WAL's pages into it, and a WAL restart then writes over them.
 */
function storedBytes(gw: TestGateway): string {
  const files = fs.readdirSync(gw.dataDir).filter((f) => f.startsWith('gateway.sqlite'));
  expect(files).toContain('gateway.sqlite');
  return files.map((f) => fs.readFileSync(path.join(gw.dataDir, f)).toString('latin1')).join('\n');
}

describe('personal data at rest', () => {
  it('stores rfm answers and identification links only sealed, in the ledger and in idempotency records, and replays them in clear', async () => {
    const gw = await start({ SQLITE_SYNCHRONOUS: 'FULL' });
    const rfmKey = randomUUID();
    const rfm = await gw.graphql(RFM, { key: rfmKey });
    expect(rfm.data!.checkRfm).toMatchObject({
      inCatalog: true,
      replayed: false,
      result: { matches: ['Listed Person'] },
    });

    const idKey = randomUUID();
    const created = await gw.graphql(IDENTIFY, { key: idKey });
    const { id, url, raw } = created.data!.createIdentification.identification;
    expect(url).toMatch(/^https?:\/\//);
    expect(JSON.stringify(raw)).toContain(url);

    const bytes = storedBytes(gw);
    // The scan sees what is stored in clear (the workflow is no personal data), so it would see the link too.
    expect(bytes).toContain('wf-at-rest');
    expect(bytes).not.toContain('Listed Person');
    expect(bytes).not.toContain(url);
    expect(bytes).not.toContain(new URL(url).pathname);

    // Replays and reads open them again.
    expect((await gw.graphql(RFM, { key: rfmKey })).data!.checkRfm).toMatchObject({
      replayed: true,
      result: { matches: ['Listed Person'] },
    });
    expect((await gw.graphql(IDENTIFY, { key: idKey })).data!.createIdentification).toMatchObject({
      replayed: true,
      identification: { id, url },
    });
    expect((await gw.graphql(READ, { id })).data!.identification).toEqual({ url, raw });
  });

  it('stores request fingerprints as keyed digests, and still recognises a record stored with an unsalted one', async () => {
    const gw = await start({});
    const key = randomUUID();
    expect((await gw.graphql(RFM, { key })).errors).toBeUndefined();
    const db = gw.gateway.services.store.db;
    const row = await db
      .selectFrom('idempotency_records')
      .select(['fingerprint', 'operation'])
      .where('key', '=', key)
      .executeTakeFirstOrThrow();
    const request = {
      operation: 'checkRfm',
      request: { path: '/api/v1/rfm/is-in-catalog', body: { fullName: 'Listed Person', birthDate: '1980-02-02' } },
    };
    const unsalted = createHash('sha256').update(canonicalJson(request)!).digest('hex');
    expect(row.fingerprint).not.toBe(unsalted);

    // A record written before fingerprints were keyed: the same request with its key is a replay, not a reuse.
    await db.updateTable('idempotency_records').set({ fingerprint: unsalted }).where('key', '=', key).execute();
    expect((await gw.graphql(RFM, { key })).data!.checkRfm.replayed).toBe(true);

    // Such a record whose outcome was unknown: the app's retry with its key sends the request again (it was claimed
    // with the keyed fingerprint, which matched no row, and asked again without end).
    await db
      .updateTable('idempotency_records')
      .set({ state: 'unknown', response: JSON.stringify({ message: 'the outcome is unknown' }) })
      .where('key', '=', key)
      .execute();
    const sent = gw.gateway.sandbox.verification!.requests.length;
    const retried = await gw.graphql(RFM, { key });
    expect(retried.errors).toBeUndefined();
    expect(retried.data!.checkRfm.replayed).toBe(false);
    expect(gw.gateway.sandbox.verification!.requests.length).toBe(sent + 1);
    const after = await db
      .selectFrom('idempotency_records')
      .select(['state', 'fingerprint'])
      .where('key', '=', key)
      .executeTakeFirstOrThrow();
    expect(after).toEqual({ state: 'done', fingerprint: unsalted });
  });
});
