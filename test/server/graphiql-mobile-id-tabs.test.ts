// GraphiQL's mobile-ID tabs, as a newcomer reads them on the page the gateway serves: the tab that waits says where
// the result comes from, and in the sandbox the tab that triggers it is the very next one.
import fs from 'node:fs';
import path from 'node:path';
import { exportJWK, generateKeyPair } from 'jose';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { gatewaysPerTest, tempDataDir, type TestGateway } from '../helpers/gateway.js';

const gateway = gatewaysPerTest();

const WAIT = 'Wait for a mobile-ID result';
const TRIGGER = 'Trigger the mobile-ID result (sandbox)';

/** The tabs the page at `/graphql` opens with, read from the config it embeds (`window.__GATEWAY__`). */
async function tabsOf(gw: TestGateway, key?: string): Promise<{ title: string; query: string }[]> {
  const res = await request(`${gw.url}/graphql`, {
    headers: { accept: 'text/html', ...(key ? { authorization: `Bearer ${key}` } : {}) },
  });
  expect(res.statusCode).toBe(200);
  const html = await res.body.text();
  const config = /window\.__GATEWAY__ = (.*?);<\/script>/s.exec(html);
  expect(config).not.toBeNull();
  return (JSON.parse(config![1]!) as { examples: { title: string; query: string }[] }).examples;
}

describe("GraphiQL's mobile-ID tabs", () => {
  it('in the sandbox, the tab after the one that waits is the one that triggers the result, as the waiting one says', async () => {
    const tabs = await tabsOf(await gateway());
    const titles = tabs.map((t) => t.title);
    expect(titles).toContain(WAIT);
    expect(titles[titles.indexOf(WAIT) + 1]).toBe(TRIGGER);
    expect(tabs.find((t) => t.title === WAIT)!.query).toContain('the next tab');
  });

  it('with a real mobile identity service, the tab that waits sends the reader to no tab that is not there', async () => {
    const { publicKey } = await generateKeyPair('ES256', { extractable: true });
    const dir = tempDataDir();
    const jwks = path.join(dir, 'jwks.json');
    fs.writeFileSync(jwks, JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256' }] }));
    const gw = await gateway({
      DATA_DIR: dir,
      GATEWAY_API_KEYS: 'app',
      GRAPHQL_INTROSPECTION: 'true',
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      MOBILEID_NOTIFICATION_TOKENS: 'notify',
      MOBILEID_JWKS_FILE: jwks,
      MOBILEID_ISSUER: 'https://op.example',
      MOBILEID_CLIENT_ID: 'sp',
    });
    const tabs = await tabsOf(gw);
    expect(tabs.map((t) => t.title)).not.toContain(TRIGGER);
    const wait = tabs.find((t) => t.title === WAIT)!.query;
    expect(wait).not.toContain('next tab');
    expect(wait).toContain('mobile identity service');
  });
});
