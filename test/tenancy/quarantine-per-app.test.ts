// The quarantine of refused mobile-ID notifications cannot be flushed by one app: each app's rows (refusals on tokens
// it issued) are bounded apart from every other app's and from the operator's view. Real HTTP, the sandbox.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { RejectionQuarantine } from '../../src/mobile-id/quarantine.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { postNotification } from '../helpers/mobile-id.js';

const SHOP = 'quarantine-shop-key-0123456789';
const CRM = 'quarantine-crm-key-9876543210';
const OPS = 'quarantine-ops-key-5555555555';
const ISSUE = `mutation { issueMobileIdNotificationToken { token } }`;
const REJECTIONS = `query { mobileIdRejections(first: 500) { authReqId reason } }`;

const start = gatewaysPerTest();

async function malformed(gw: TestGateway, token: string | undefined, count: number, prefix: string): Promise<void> {
  for (let i = 0; i < count; i++) {
    // A failure without error_description: refused as MALFORMED (400), kept in the quarantine.
    const res = await postNotification(gw, { auth_req_id: `${prefix}-${i}`, error: 'access_denied' }, { token });
    expect(res.status).toBe(400);
  }
}

async function rejections(gw: TestGateway, key: string): Promise<string[]> {
  const res = await gw.graphql(REJECTIONS, {}, { key });
  expect(res.errors).toBeUndefined();
  return (res.data!.mobileIdRejections as Array<{ authReqId: string }>).map((r) => r.authReqId);
}

describe('the quarantine per app', () => {
  it("an app flooding the quarantine on its own token pushes out only its own rows, never another app's or the operator's", async () => {
    const gw = await start({ GATEWAY_API_KEYS: `shop:${SHOP},crm:${CRM}`, OPERATOR_API_KEYS: `ops:${OPS}` });
    const tokenOf = async (key: string) =>
      (await gw.graphql(ISSUE, {}, { key })).data!.issueMobileIdNotificationToken.token as string;
    const run = randomUUID().slice(0, 8);
    await malformed(gw, undefined, 3, `operator-${run}`);
    await malformed(gw, await tokenOf(CRM), 3, `crm-${run}`);
    await malformed(gw, await tokenOf(SHOP), 30, `shop-${run}`);

    // The purge bounds every owner apart (here 10 rows each, to keep the test small).
    await new RejectionQuarantine(gw.gateway.services.store.db, 86_400_000).purge(Date.now(), 10, 10);

    const shop = await rejections(gw, SHOP);
    expect(shop).toEqual(Array.from({ length: 10 }, (_, i) => `shop-${run}-${29 - i}`));
    expect(await rejections(gw, CRM)).toEqual([2, 1, 0].map((i) => `crm-${run}-${i}`));
    const all = await rejections(gw, OPS);
    expect(all.filter((id) => id.startsWith('operator-'))).toEqual([2, 1, 0].map((i) => `operator-${run}-${i}`));
    expect(all).toHaveLength(16);
  });
});
