// A replica cut off from PostgreSQL by a silent network (a partition: nothing answered, nothing closed) while the
// others still reach it. Its LISTEN connection stops answering its probe and is dropped; the connections it opens to
// reconnect meanwhile are never answered either. Once the network is back, it must listen again (ready, and the other
// replicas' events delivered to its subscribers), not wait for good on a connection attempt the silence swallowed.
import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { collect, postNotification, SUBSCRIPTION, wsClient } from '../helpers/mobile-id.js';
import { pgRelay } from '../helpers/pg-relay.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { waitFor, waitForSubscribers } from '../helpers/wait.js';

describe('a replica whose network to PostgreSQL goes silent, then comes back', () => {
  let pg: TestPostgres;
  let link: ReturnType<typeof pgRelay>;
  /** Reaches PostgreSQL through the relay. */
  let a: TestGateway;
  /** Reaches it directly. */
  let b: TestGateway;

  beforeAll(async () => {
    pg = await startPostgres();
    const direct = await pg.createDatabase('listen_partition');
    const url = new URL(direct);
    link = pgRelay(Number(url.port));
    url.port = String(await link.listening);
    const key = randomBytes(32).toString('hex');
    a = await startTestGateway({ DATABASE_URL: url.toString(), TOKEN_ENCRYPTION_KEY: key });
    b = await startTestGateway({ DATABASE_URL: direct, TOKEN_ENCRYPTION_KEY: key });
  }, 120_000);
  afterAll(async () => {
    // The silent connections are cut first, so that the gateway's pool ends.
    link?.close();
    await a?.close();
    await b?.close();
    await pg?.stop();
  });

  const readyz = async (gw: TestGateway) => {
    const res = await request(`${gw.url}/readyz`);
    await res.body.dump();
    return res.statusCode;
  };

  it('listens again once the network is back, and delivers what another replica took meanwhile', async () => {
    const authReqId = `partition-${randomBytes(4).toString('hex')}`;
    const onA = collect(wsClient(a), SUBSCRIPTION, { id: authReqId });
    await waitForSubscribers(a, 'mobile-id', authReqId);
    expect(await readyz(a)).toBe(200);

    link.silence();
    // The LISTEN connection's probe goes unanswered (10 s, answered within 10 s), and a reconnection is tried and held.
    await waitFor(
      () => a.logs().includes('the event LISTEN connection dropped') && link.heldWith('gateway-events'),
      60_000,
      'the LISTEN connection dropped and a reconnection held by the silence',
    );
    // Taken by the other replica while A cannot hear of it.
    const hook = await postNotification(b, {
      auth_req_id: authReqId,
      error: 'access_denied',
      error_description: 'the user declined',
    });
    expect(hook.status, hook.text).toBe(204);
    link.restore();

    await waitFor(async () => (await readyz(a)) === 200, 60_000, 'A ready again');
    await waitFor(() => onA.results.length > 0 || onA.errors.length > 0, 30_000, 'the event on A');
    expect(onA.errors).toEqual([]);
    expect(onA.results).toHaveLength(1);
    expect(onA.results[0].data.mobileIdAuthentication).toMatchObject({
      __typename: 'MobileIdAuthenticationFailed',
      authReqId,
    });
    onA.stop();
  }, 150_000);
});
