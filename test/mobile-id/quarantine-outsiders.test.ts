// The quarantine's outsiders (docs/decisions/055): refusals of requests that came with no valid token and named no
// auth_req_id (junk bearer tokens from anyone) are a bucket of their own, with their own per-minute cap and row bound,
// so they neither use up a budget of nor push out the refusals that came on configured tokens, on an app's tokens, or
// that named an auth_req_id. Two apps and an operator over real HTTP.
import { describe, expect, it } from 'vitest';

import { RejectionQuarantine } from '../../src/mobile-id/quarantine.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { postNotification } from '../helpers/mobile-id.js';

const gateway = gatewaysPerTest();
const env = {
  GATEWAY_API_KEYS: 'app-a:key-a-0123456789,app-b:key-b-0123456789',
  OPERATOR_API_KEYS: 'ops:ops-key-0123456789',
};
const REJECTIONS = `query($first: Int) { mobileIdRejections(first: $first) { authReqId reason httpStatus } }`;
const ISSUE = `mutation($id: String) { issueMobileIdNotificationToken(authReqId: $id) { token } }`;

async function rejections(
  gw: TestGateway,
  key: string,
): Promise<Array<{ authReqId: string | null; reason: string; httpStatus: number }>> {
  const res = await gw.graphql(REJECTIONS, { first: 500 }, { key });
  expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
  return res.data!.mobileIdRejections;
}

/** A notification refused on the sandbox's configured token, and one refused on app-a's token for another auth_req_id. */
async function realRefusals(gw: TestGateway, tag: string): Promise<void> {
  const sb = gw.gateway.sandbox.mobileId!;
  const bad = await sb.buildNotification({ authReqId: `configured-${tag}`, fields: { token_type: 'mac' } });
  expect((await postNotification(gw, bad.body)).status).toBe(400);
  const issued = (await gw.graphql(ISSUE, { id: `mine-${tag}` }, { key: 'key-a-0123456789' })).data!
    .issueMobileIdNotificationToken.token as string;
  const elsewhere = await sb.buildNotification({ authReqId: `other-${tag}` });
  expect((await postNotification(gw, elsewhere.body, { token: issued })).status).toBe(401);
}

describe('outsiders in the quarantine', () => {
  it('junk bearer tokens from outsiders use up only their own per-minute budget: refusals on configured or expired app tokens, or naming an auth_req_id, are all kept', async () => {
    const gw = await gateway(env);
    const late = (await gw.graphql(ISSUE, { id: 'late' }, { key: 'key-a-0123456789' })).data!
      .issueMobileIdNotificationToken.token as string;
    await gw.gateway.services.store.db
      .updateTable('notification_tokens')
      .set({ expires_at: Date.now() - 1000 })
      .where('auth_req_id', '=', 'late')
      .execute();
    for (let i = 0; i < 120; i++)
      expect((await postNotification(gw, { auth_req_id: 'junk' }, { token: `junk-${i}` })).status).toBe(401);
    await realRefusals(gw, 'after-flood');
    expect(
      (
        await postNotification(gw, (await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'late' })).body, {
          token: late,
        })
      ).status,
    ).toBe(401);
    const rows = await rejections(gw, 'ops-key-0123456789');
    expect(rows.filter((r) => r.authReqId === null && r.reason === 'UNAUTHORIZED')).toHaveLength(100);
    expect(rows.slice(0, 3)).toEqual([
      { authReqId: 'late', reason: 'UNAUTHORIZED', httpStatus: 401 },
      { authReqId: 'other-after-flood', reason: 'UNAUTHORIZED', httpStatus: 401 },
      { authReqId: 'configured-after-flood', reason: 'MALFORMED', httpStatus: 400 },
    ]);
    // The refusals on app-a's tokens are app-a's to read; app-b reads none of them, and no app reads outsiders' noise.
    expect((await rejections(gw, 'key-a-0123456789')).map((r) => r.authReqId)).toEqual(['late', 'other-after-flood']);
    expect(await rejections(gw, 'key-b-0123456789')).toEqual([]);
  });

  it('outsiders’ noise never evicts the refusals that came on configured tokens or named an auth_req_id, however much of it is kept', async () => {
    const gw = await gateway(env);
    await realRefusals(gw, 'old');
    for (let i = 0; i < 30; i++)
      expect((await postNotification(gw, { auth_req_id: 'junk' }, { token: `junk-${i}` })).status).toBe(401);
    // The operator's view bounded to 2 rows, each app's to 5, outsiders' noise to 10: the noise is trimmed on its own.
    await new RejectionQuarantine(gw.gateway.services.store.db, 86_400_000).purge(Date.now(), 2, 5, 10);
    const rows = await rejections(gw, 'ops-key-0123456789');
    expect(rows.filter((r) => r.authReqId === null)).toHaveLength(10);
    expect(
      rows
        .filter((r) => r.authReqId !== null)
        .map((r) => r.authReqId)
        .sort(),
    ).toEqual(['configured-old', 'other-old']);
  });

  it('a notification on an app’s expired token is kept as that app’s refusal, naming its auth_req_id, not as outsiders’ noise', async () => {
    const gw = await gateway(env);
    const token = (await gw.graphql(ISSUE, { id: 'late' }, { key: 'key-a-0123456789' })).data!
      .issueMobileIdNotificationToken.token as string;
    await gw.gateway.services.store.db
      .updateTable('notification_tokens')
      .set({ expires_at: Date.now() - 1000 })
      .where('auth_req_id', '=', 'late')
      .execute();
    const n = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'late' });
    const answer = await postNotification(gw, n.body, { token });
    // The sender is told what any unknown token gets.
    expect(answer.status).toBe(401);
    expect(answer.json).toEqual({
      error: 'invalid_token',
      error_description: 'the client_notification_token is not valid or has expired',
    });
    expect(await rejections(gw, 'key-a-0123456789')).toEqual([
      { authReqId: 'late', reason: 'UNAUTHORIZED', httpStatus: 401 },
    ]);
    expect(await rejections(gw, 'key-b-0123456789')).toEqual([]);
  });
});
