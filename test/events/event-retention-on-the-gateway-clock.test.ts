// A webhook event is kept for EVENT_RETENTION on the clock the retention purge reads (the gateway's, which a test
// moves): it is stamped on that clock when it is taken in, so that it is neither purged before its time when that
// clock runs ahead of the wall's, nor kept past it when that clock runs behind. The event is a verification callback
// posted to the address the gateway handed to the verification sandbox.
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { VERIFICATION_EVENT_KIND } from '../../src/identity/service.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { testClock } from '../helpers/jwt.js';

const KEY = 'key-retention-clock';
const DAY_MS = 86_400_000;
const RETENTION_MS = 7 * DAY_MS;

const start = gatewaysPerTest();

async function startOn(clock: { now: () => number }): Promise<TestGateway> {
  return start(
    { GATEWAY_API_KEYS: KEY, EVENT_RETENTION: '7d', SANDBOX_CALLBACK_DELAY_MS: '600000' },
    { testing: { clock: clock.now } },
  );
}

/** Registers a verification and posts its completion callback; the gateway logs it as an event. */
async function verificationEvent(t: TestGateway): Promise<void> {
  const res = await t.graphql(
    `mutation($input: RegisterVerificationInput!) { registerVerification(input: $input) { verification { externalId } } }`,
    { input: { workflowId: 'wf-retention', applicant: { lastName: 'Clock' } } },
    { key: KEY },
  );
  expect(res.errors).toBeUndefined();
  const url = t.gateway.sandbox.verification!.verifications().at(-1)!.callbackUrl!;
  const answer = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ status: 'COMPLETED' }),
  });
  await answer.body.text();
  expect(answer.statusCode).toBeLessThan(300);
}

async function storedEvents(t: TestGateway): Promise<number> {
  const row = await t.gateway.services.store.db
    .selectFrom('events')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('kind', '=', VERIFICATION_EVENT_KIND)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** What the 'purge expired events' job runs, at the gateway clock's now. */
const purge = (t: TestGateway, now: number) => t.gateway.services.events.log.purgeExpired(now);

describe('a webhook event kept for EVENT_RETENTION on the gateway clock', () => {
  it('is kept until its retention has passed on a gateway clock a month ahead of the wall', async () => {
    const clock = testClock(Date.now() + 30 * DAY_MS);
    const t = await startOn(clock);
    await verificationEvent(t);
    expect(await storedEvents(t)).toBe(1);

    clock.advance(RETENTION_MS - 60_000);
    await purge(t, clock.now());
    expect(await storedEvents(t)).toBe(1);

    clock.advance(60_000);
    await purge(t, clock.now());
    expect(await storedEvents(t)).toBe(0);
  });

  it('is purged once its retention has passed on a gateway clock a month behind the wall', async () => {
    const clock = testClock(Date.now() - 30 * DAY_MS);
    const t = await startOn(clock);
    await verificationEvent(t);
    expect(await storedEvents(t)).toBe(1);

    clock.advance(RETENTION_MS);
    await purge(t, clock.now());
    expect(await storedEvents(t)).toBe(0);
  });
});
