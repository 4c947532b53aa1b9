import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { RejectionQuarantine } from '../../src/mobile-id/quarantine.js';
import { startTestGateway } from '../helpers/gateway.js';
import { postNotification, QUERY, storedAccessToken, storedEvents } from '../helpers/mobile-id.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';

describe('mobile-ID notifications on PostgreSQL (DATABASE_URL)', () => {
  let pg: TestPostgres;
  let url: string;
  beforeAll(async () => {
    pg = await startPostgres();
    url = await pg.createDatabase('mobile_id');
  }, 120_000);
  afterAll(() => pg?.stop());

  it('stores, deduplicates, refuses a conflict, purges an expired access token and serves it after a restart', async () => {
    const key = randomBytes(32).toString('hex');
    const clock = { now: Date.now() };
    const a = await startTestGateway(
      { DATABASE_URL: url, TOKEN_ENCRYPTION_KEY: key },
      { testing: { clock: () => clock.now } },
    );
    let accessToken: unknown;
    try {
      const sb = a.gateway.sandbox.mobileId!;
      const n = await sb.buildNotification({ authReqId: 'pg-1', expiresIn: 1 });
      accessToken = n.body.access_token;
      expect((await postNotification(a, n.body)).status).toBe(204);
      expect((await postNotification(a, n.body)).status).toBe(204);
      expect(
        (await postNotification(a, (await sb.buildNotification({ authReqId: 'pg-1', outcome: 'SERVER_ERROR' })).body))
          .status,
      ).toBe(409);
      expect(await storedEvents(a, 'pg-1')).toHaveLength(1);
      expect((await a.graphql(QUERY, { id: 'pg-1' })).data!.mobileIdAuthentication.accessToken).toBe(accessToken);
      expect(storedAccessToken(key, (await storedEvents(a, 'pg-1'))[0]!)).toBe(accessToken);

      clock.now += 1_100;
      expect(await a.gateway.services.mobileId.purgeExpired()).toMatchObject({ accessTokens: 1 });
      const [row] = await storedEvents(a, 'pg-1');
      expect(storedAccessToken(key, row!)).toBeNull();
    } finally {
      await a.close();
    }

    // Another replica (same database, same TOKEN_ENCRYPTION_KEY) reads what the first stored.
    const b = await startTestGateway({ DATABASE_URL: url, TOKEN_ENCRYPTION_KEY: key });
    try {
      const r = (await b.graphql(QUERY, { id: 'pg-1' })).data!.mobileIdAuthentication;
      expect(r).toMatchObject({
        __typename: 'MobileIdAuthenticated',
        authReqId: 'pg-1',
        accessToken: null,
        idToken: expect.stringMatching(/^ey/),
      });
      expect(b.logs()).not.toContain(String(accessToken));
    } finally {
      await b.close();
    }
  });

  it('keeps refused notifications in the quarantine, readable from another replica, and purges past the row limit', async () => {
    const db = await pg.createDatabase('mobile_id_quarantine');
    const a = await startTestGateway({ DATABASE_URL: db });
    const b = await startTestGateway({ DATABASE_URL: db });
    try {
      const sb = a.gateway.sandbox.mobileId!;
      const n = await sb.buildNotification({ authReqId: 'pg-refused', claims: { iss: 'https://someone.example' } });
      expect((await postNotification(a, n.body)).status).toBe(400);
      expect((await postNotification(a, { auth_req_id: 'pg-malformed' })).status).toBe(400);
      const rows = (await b.graphql(`{ mobileIdRejections { authReqId reason httpStatus } }`)).data!.mobileIdRejections;
      expect(rows).toEqual([
        { authReqId: 'pg-malformed', reason: 'MALFORMED', httpStatus: 400 },
        { authReqId: 'pg-refused', reason: 'ID_TOKEN_ISSUER', httpStatus: 400 },
      ]);
      // The quarantine's SQL on PostgreSQL, through an instance of its own over the replicas' database (no private read).
      const quarantine = new RejectionQuarantine(b.gateway.services.store.db, 7 * 86_400_000);
      expect(await quarantine.purge(Date.now(), 1)).toBe(1);
      expect((await b.graphql(`{ mobileIdRejections { authReqId } }`)).data!.mobileIdRejections).toEqual([
        { authReqId: 'pg-malformed' },
      ]);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
