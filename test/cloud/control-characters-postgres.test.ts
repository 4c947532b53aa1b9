import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { M } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { storeSnapshot } from '../helpers/store.js';

/**
 * PostgreSQL's text cannot hold U+0000. A name holding it used to be created upstream, then the ledger write failed
 * (INTERNAL_SERVER_ERROR) and the resource was never recorded; it is refused before the wire instead.
 */
describe('a name with U+0000 on PostgreSQL', () => {
  let pg: TestPostgres;
  let gw: TestGateway;
  beforeAll(async () => {
    pg = await startPostgres();
    gw = await startTestGateway({ DATABASE_URL: await pg.createDatabase('gateway') });
  }, 120_000);
  afterAll(async () => {
    await gw?.close();
    await pg?.stop();
  });

  it('is BAD_USER_INPUT on the field, nothing created upstream, nothing stored, the same on a retry', async () => {
    const before = await storeSnapshot(gw);
    const key = randomUUID();
    for (let attempt = 0; attempt < 2; attempt++) {
      const res = await gw.graphql(M.project, { input: { name: 'shop\u0000x' }, key });
      expect(res.data).toBeNull();
      expect(res.errors).toHaveLength(1);
      expect(res.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'input.name' });
      expect(res.errors![0]!.message).toBe(
        'input.name: must be one line of text without control characters; found U+0000 at character 5',
      );
    }
    expect(gw.gateway.sandbox.cloud!.requests).toHaveLength(0);
    expect(gw.gateway.sandbox.cloud!.projects()).toHaveLength(0);
    expect(await storeSnapshot(gw)).toEqual(before);
  });
});
