// The quarantine of refused mobile-ID notifications keeps its time on the gateway's clock (which a test moves): a
// refusal is received at that clock's now, is kept for EVENT_RETENTION on it (the purge reads the same clock), and the
// cap on unauthenticated refusals counts that clock's minutes. Refusals are posted over real HTTP.
import { describe, expect, it } from 'vitest';

import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { testClock } from '../helpers/jwt.js';
import { postNotification } from '../helpers/mobile-id.js';

const start = gatewaysPerTest();
const DAY_MS = 86_400_000;
const RETENTION_MS = 7 * DAY_MS;
const REJECTIONS = `query { mobileIdRejections(first: 500) { receivedAt authReqId reason } }`;

async function rejections(gw: TestGateway): Promise<Array<{ receivedAt: string; authReqId: string | null }>> {
  const res = await gw.graphql(REJECTIONS);
  expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
  return res.data!.mobileIdRejections;
}

describe('the quarantine on the gateway clock', () => {
  it('a refusal is received at the gateway clock’s now and purged once EVENT_RETENTION has passed on it', async () => {
    const clock = testClock(Date.now() - 30 * DAY_MS);
    const gw = await start({ EVENT_RETENTION: '7d' }, { testing: { clock: clock.now } });
    const received = clock.now();
    expect((await postNotification(gw, { auth_req_id: 'q-clock', error: 'access_denied' })).status).toBe(400);
    expect(await rejections(gw)).toEqual([
      { receivedAt: new Date(received).toISOString(), authReqId: 'q-clock', reason: 'MALFORMED' },
    ]);

    // What the 'purge expired mobile-ID secrets' job runs, at the gateway clock's now.
    clock.advance(RETENTION_MS);
    await gw.gateway.services.mobileId.purgeExpired(clock.now());
    expect(await rejections(gw)).toHaveLength(1);
    clock.advance(1);
    await gw.gateway.services.mobileId.purgeExpired(clock.now());
    expect(await rejections(gw)).toEqual([]);
  });

  it('the cap on unauthenticated refusals counts the gateway clock’s minutes', async () => {
    const clock = testClock();
    const gw = await start({}, { testing: { clock: clock.now } });
    const junk = async (from: number, to: number) => {
      for (let i = from; i < to; i++)
        expect((await postNotification(gw, { auth_req_id: 'junk' }, { token: `junk-${i}` })).status).toBe(401);
    };
    await junk(0, 105);
    const outsiders = async () => (await rejections(gw)).filter((r) => r.authReqId === null).length;
    expect(await outsiders()).toBe(100);

    // A minute later on the gateway clock, whatever the wall's: the cap counts afresh.
    clock.advance(60_000);
    await junk(105, 110);
    expect(await outsiders()).toBe(105);
  });
});
