// Named API keys (GATEWAY_API_KEYS=shop:<key>,crm:<key>): the name is what /metrics shows, and every key of one
// name is one app (its records and its rate-limit bucket), so a key can be rotated without losing either.
import { createHash, randomUUID } from 'node:crypto';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { ConfigError, loadConfig } from '../../src/config/index.js';
import { gatewaysPerTest } from '../helpers/gateway.js';
import { QUERY } from '../helpers/mobile-id.js';
import { CREATE_PROJECT, post } from '../helpers/ratelimit.js';

const OLD = 'shop-key-old-0123456789';
const NEW = 'shop-key-new-9876543210';
const CRM = 'crm-key-5555555555';
const COMPLETE = `mutation($id: String!) { sandboxCompleteMobileIdAuthentication(authReqId: $id) { accepted } }`;

const start = gatewaysPerTest();

describe('named API keys', () => {
  it('metrics label rate-limit decisions by app name, never by the key or a hash of it', async () => {
    const gw = await start({ GATEWAY_API_KEYS: `shop:${OLD},shop:${NEW},crm:${CRM}`, RATE_LIMIT_CREATIONS: '2/1h' });
    expect((await post(gw, OLD, CREATE_PROJECT, { name: 'n1' })).status).toBe(200);
    expect((await post(gw, CRM, CREATE_PROJECT, { name: 'n2' })).status).toBe(200);
    const text = await (await request(`${gw.url}/metrics`)).body.text();
    expect(text).toContain('gateway_rate_limit_points_total{app="shop",bucket="creations",outcome="allowed"} 1');
    expect(text).toContain('gateway_rate_limit_points_total{app="crm",bucket="creations",outcome="allowed"} 1');
    for (const key of [OLD, NEW, CRM]) {
      expect(text).not.toContain(key);
      expect(text).not.toContain(createHash('sha256').update(key).digest('hex').slice(0, 12));
    }
  });

  it('every key of one name is one app: a new key reads what the old one created, and spends the same rate-limit bucket', async () => {
    const gw = await start({ GATEWAY_API_KEYS: `shop:${OLD},shop:${NEW},crm:${CRM}`, RATE_LIMIT_CREATIONS: '2/1h' });
    const authReqId = `auth-${randomUUID()}`;
    expect(
      (await gw.graphql(COMPLETE, { id: authReqId }, { key: OLD })).data!.sandboxCompleteMobileIdAuthentication
        .accepted,
    ).toBe(true);
    expect((await gw.graphql(QUERY, { id: authReqId }, { key: NEW })).data!.mobileIdAuthentication).toMatchObject({
      authReqId,
    });
    expect((await gw.graphql(QUERY, { id: authReqId }, { key: CRM })).data!.mobileIdAuthentication).toBeNull();

    expect((await post(gw, OLD, CREATE_PROJECT, { name: 'b1' })).status).toBe(200);
    expect((await post(gw, NEW, CREATE_PROJECT, { name: 'b2' })).status).toBe(200);
    expect((await post(gw, NEW, CREATE_PROJECT, { name: 'b3' })).status).toBe(429);
    expect((await post(gw, CRM, CREATE_PROJECT, { name: 'c1' })).status).toBe(200);
  });

  it('one key under two names stops start-up without repeating the key', () => {
    const attempt = () => loadConfig({ GATEWAY_API_KEYS: `shop:${OLD},crm:${OLD}` });
    expect(attempt).toThrow(ConfigError);
    expect(attempt).toThrow(/GATEWAY_API_KEYS.*one key is one app/);
    expect(() => attempt()).not.toThrow(new RegExp(OLD));
  });
});
