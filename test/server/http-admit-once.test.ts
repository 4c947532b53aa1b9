// POST /graphql decides between its direct path and Apollo's pipeline from the request's shape, before any work
// (docs/decisions/065): an operation the admit stage refuses (FORBIDDEN, a refused cost) is answered by the direct
// path, byte for byte as Apollo answers it, and admitted once, so the app's activity is counted once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { appsFile, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { rawGraphQL, type RawAnswer } from '../helpers/raw-http.js';

const post = (url: string, body: unknown, key: string): Promise<RawAnswer> =>
  rawGraphQL(url, JSON.stringify(body), {
    'content-type': 'application/json',
    authorization: `Bearer ${key}`,
    'x-request-id': 'same-id',
  });

describe('a refused operation on the direct path of POST /graphql', () => {
  let apollo: TestGateway;
  let direct: TestGateway;
  /** Each gateway's calls of the activity hook (AppActivity.seen), by app. */
  const seen = new Map<TestGateway, string[]>();

  beforeAll(async () => {
    const file = appsFile('admit-once-', [
      { name: 'kyc', scopes: ['identity:read'], key: 'kyc-key' },
      { name: 'reader', scopes: ['cloud:read'], key: 'reader-key' },
    ]);
    [apollo, direct] = await Promise.all([
      startTestGateway({ GATEWAY_APPS_FILE: file }, { testing: { directPath: false } }),
      startTestGateway({ GATEWAY_APPS_FILE: file }),
    ]);
    for (const gw of [apollo, direct]) {
      const activity = gw.gateway.services.apps.activity;
      const calls: string[] = [];
      seen.set(gw, calls);
      const original = activity.seen.bind(activity);
      activity.seen = (app, source, scopes) => {
        calls.push(app);
        original(app, source, scopes);
      };
    }
  });
  afterAll(async () => {
    await Promise.all([apollo?.close(), direct?.close()]);
  });

  /** Sends `body` to both gateways: the direct one must answer it itself, with Apollo's bytes, having admitted it once. */
  async function refusedOnce(body: unknown, key: string, app: string) {
    const plans = direct.gateway.directPath!;
    const before = { ...plans.stats };
    for (const calls of seen.values()) calls.length = 0;
    const a = await post(apollo.url, body, key);
    const p = await post(direct.url, body, key);
    expect(p).toEqual(a);
    expect(seen.get(apollo)).toEqual([app]);
    expect(seen.get(direct)).toEqual([app]);
    expect(plans.stats.direct).toBe(before.direct + 1);
    expect(plans.stats.apollo).toBe(before.apollo);
    return p;
  }

  it('FORBIDDEN (a field the app’s scopes do not cover) is admitted once and counted once', async () => {
    const answer = await refusedOnce({ query: '{ projects { id } }' }, 'kyc-key', 'kyc');
    expect(answer.status).toBe(403);
    expect(JSON.parse(answer.body).errors[0].extensions).toMatchObject({
      code: 'FORBIDDEN',
      field: 'Query.projects',
      scope: 'cloud:read',
    });
  });

  it('a refused cost is admitted once and counted once', async () => {
    const answer = await refusedOnce(
      { query: '{ projects(first: 100000) { id networks { id subnets { id } } } }' },
      'reader-key',
      'reader',
    );
    expect(answer.status).toBe(400);
    expect(answer.body).toContain('GRAPHQL_MAX_COST');
  });

  it('an admitted operation is counted once', async () => {
    for (const calls of seen.values()) calls.length = 0;
    const p = await post(direct.url, { query: '{ projects { id } }' }, 'reader-key');
    expect(p.status).toBe(200);
    expect(seen.get(direct)).toEqual(['reader']);
  });
});
