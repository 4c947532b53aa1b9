// GATEWAY_APPS_FILE (docs/decisions/046): apps with their scopes and the SHA-256 of their keys, in YAML or JSON. A
// bad file stops start-up naming the line; a key listed by digest signs its app in with the file's scopes; a key is
// rotated by listing both digests for a while; the operator's list of apps shows who does what, never a key.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { parseAppsFile } from '../../src/auth/apps-file.js';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { gatewaysPerTest, tempDataDir } from '../helpers/gateway.js';

const start = gatewaysPerTest();
const sha = (key: string) => createHash('sha256').update(key).digest('hex');

function write(text: string, name = 'apps.yaml'): string {
  const file = path.join(tempDataDir('apps-file-'), name);
  fs.writeFileSync(file, text);
  return file;
}

/** The ConfigError loadConfig throws for this apps file. */
function refusal(text: string, name?: string): string {
  try {
    loadConfig({ GATEWAY_APPS_FILE: write(text, name) });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('the apps file was accepted');
}

const A = sha('key-a');
const B = sha('key-b');

describe('a bad apps file stops start-up naming the line', () => {
  it('a YAML syntax error', () => {
    expect(refusal(`apps:\n  - name: shop\n    scopes: [cloud:read\n`)).toMatch(
      /^GATEWAY_APPS_FILE: .*apps\.yaml line [34]: /,
    );
  });

  it('an unknown scope, naming the scopes there are', () => {
    const message = refusal(
      `apps:\n  - name: shop\n    scopes:\n      - cloud:read\n      - cloud:admin\n    keys:\n      - sha256: ${A}\n`,
    );
    expect(message).toMatch(
      /apps\.yaml line 5: apps\.0\.scopes\.1 is not a scope; the scopes are cloud:read, cloud:write, cloud:approve, identity:read/,
    );
  });

  it('a key given in clear instead of its SHA-256', () => {
    const message = refusal(
      `apps:\n  - name: shop\n    scopes: [cloud:read]\n    keys:\n      - sha256: my-secret-key\n`,
    );
    expect(message).toMatch(/line 5: apps\.0\.keys\.0\.sha256 must be the SHA-256 of the key as 64 hex digits/);
    expect(message).not.toContain('my-secret-key');
  });

  it('an app listed twice, and one key digest under two apps', () => {
    const twice = `apps:\n  - name: shop\n    scopes: [cloud:read]\n    keys: [{ sha256: ${A} }]\n  - name: shop\n    scopes: [cloud:write]\n    keys: [{ sha256: ${B} }]\n`;
    expect(refusal(twice)).toMatch(/line 5: app shop is listed twice \(first at line 2\)/);
    const shared = `apps:\n  - name: shop\n    scopes: [cloud:read]\n    keys: [{ sha256: ${A} }]\n  - name: till\n    scopes: [cloud:write]\n    keys: [{ sha256: ${A} }]\n`;
    expect(refusal(shared)).toMatch(/line 7: this key digest is already one of shop's keys/);
  });

  it('a JSON file, with the line of the bad entry', () => {
    const json = JSON.stringify(
      {
        apps: [
          { name: 'shop', scopes: ['cloud:read'], keys: [{ sha256: A }] },
          { name: 'bad name!', scopes: ['cloud:read'], keys: [{ sha256: B }] },
        ],
      },
      null,
      2,
    );
    const line = json.split('\n').findIndex((l) => l.includes('bad name!')) + 1;
    expect(refusal(json, 'apps.json')).toMatch(
      new RegExp(`apps\\.json line ${line}: apps\\.1\\.name must be 1 to 64 letters`),
    );
  });

  it('a field the format does not have, a missing file, and an app also named in GATEWAY_API_KEYS', () => {
    expect(refusal(`apps:\n  - name: shop\n    scopes: [cloud:read]\n    key: ${A}\n`)).toMatch(
      /line 2: apps\.0\.keys is missing \(expected array\)/,
    );
    expect(
      refusal(`apps:\n  - name: shop\n    scopes: [cloud:read]\n    keys: [{ sha256: ${A} }]\n    scope: operator\n`),
    ).toMatch(/line 2: apps\.0 Unrecognized key: "scope"/);
    expect(() => loadConfig({ GATEWAY_APPS_FILE: '/nonexistent/apps.yaml' })).toThrow(
      /GATEWAY_APPS_FILE: \/nonexistent\/apps\.yaml cannot be read: ENOENT/,
    );
    const file = write(`apps:\n  - name: shop\n    scopes: [cloud:read]\n    keys: [{ sha256: ${A} }]\n`);
    expect(() => loadConfig({ GATEWAY_APPS_FILE: file, GATEWAY_API_KEYS: 'shop:other-key' })).toThrow(
      /app shop is also named in GATEWAY_API_KEYS/,
    );
    expect(() => loadConfig({ GATEWAY_APPS_FILE: file, GATEWAY_API_KEYS: 'till:key-a' })).toThrow(/one key is one app/);
  });

  it('reads JSON and YAML alike', () => {
    const yaml = parseAppsFile(
      `apps:\n  - name: shop\n    scopes: [cloud:read, cloud:read, identity:write]\n    keys: [{ sha256: ${A.toUpperCase()}, note: issued 2026-11 }]\n`,
      'a.yaml',
    );
    const json = parseAppsFile(
      JSON.stringify({ apps: [{ name: 'shop', scopes: ['cloud:read', 'identity:write'], keys: [{ sha256: A }] }] }),
      'a.json',
    );
    expect(yaml).toEqual(json);
    expect(json).toEqual([{ name: 'shop', scopes: ['cloud:read', 'identity:write'], keyDigests: [A] }]);
  });
});

describe('apps of the file', () => {
  it('a key listed by its digest signs its app in with the file’s scopes, and an unlisted key is refused', async () => {
    const gw = await start({
      GATEWAY_APPS_FILE: write(`apps:\n  - name: shop\n    scopes: [identity:read]\n    keys: [{ sha256: ${A} }]\n`),
    });
    expect(
      (await gw.graphql('{ verificationResults(externalIds: ["x"]) { externalId } }', {}, { key: 'key-a' })).errors,
    ).toBeUndefined();
    const forbidden = await gw.graphql('{ projects { id } }', {}, { key: 'key-a' });
    expect(forbidden.errors?.[0]?.extensions).toMatchObject({
      code: 'FORBIDDEN',
      field: 'Query.projects',
      scope: 'cloud:read',
    });
    const unknown = await gw.graphql('{ projects { id } }', {}, { key: 'key-b' });
    expect(unknown.status).toBe(401);
    expect(unknown.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });

  it('rotating a key: while both digests are listed, the old and the new key are the same app and see the same records', async () => {
    const gw = await start({
      GATEWAY_APPS_FILE: write(
        `apps:\n  - name: kyc\n    scopes: [identity:read, identity:write]\n    keys:\n      - sha256: ${A}\n        note: old\n      - sha256: ${B}\n        note: new\n`,
      ),
    });
    const registered = await gw.graphql<{ registerVerification: { verification: { externalId: string } } }>(
      'mutation { registerVerification(input: { workflowId: "wf-1", applicant: { firstName: "Ada" } }) { verification { externalId } } }',
      {},
      { key: 'key-a' },
    );
    expect(registered.errors).toBeUndefined();
    const externalId = registered.data!.registerVerification.verification.externalId;
    const read = (key: string) =>
      gw.graphql<{ node: unknown }>(
        'query($id: ID!) { verificationResults(externalIds: [$id]) { externalId } }',
        { id: externalId },
        { key },
      );
    const viaOld = await read('key-a');
    const viaNew = await read('key-b');
    expect(viaNew).toEqual(viaOld);
    expect(viaNew.errors).toBeUndefined();
  });

  it('the operator’s list of apps gives names, scopes, sources and last activity, never a key or a digest', async () => {
    const gw = await start({
      GATEWAY_API_KEYS: 'shop:shop-key-0123456789,bare-key-0123456789',
      OPERATOR_API_KEYS: 'ops:ops-key-0123456789',
      GATEWAY_APPS_FILE: write(
        `apps:\n  - name: watcher\n    scopes: [mobile-id:read]\n    keys: [{ sha256: ${A} }, { sha256: ${B} }]\n`,
      ),
    });
    await gw.graphql('{ mobileIdAuthentication(authReqId: "x") { __typename } }', {}, { key: 'key-b' });
    const res = await gw.graphql<{
      apps: Array<{ name: string; source: string; scopes: string[]; keys: number; lastActivityAt: string | null }>;
    }>('{ apps { name source scopes keys lastActivityAt } }', {}, { key: 'ops-key-0123456789' });
    expect(res.errors).toBeUndefined();
    const byName = new Map(res.data!.apps.map((a) => [a.name, a]));
    expect(byName.get('watcher')).toMatchObject({ source: 'APPS_FILE', scopes: ['mobile-id:read'], keys: 2 });
    expect(byName.get('watcher')!.lastActivityAt).toEqual(expect.any(String));
    expect(byName.get('shop')).toMatchObject({ source: 'API_KEYS', keys: 1, lastActivityAt: null });
    expect(byName.get('shop')!.scopes).toEqual([
      'cloud:read',
      'cloud:write',
      'identity:read',
      'identity:write',
      'mobile-id:read',
      'mobile-id:write',
    ]);
    expect(byName.get('ops')).toMatchObject({ source: 'OPERATOR_KEYS', keys: 1 });
    expect(byName.get('ops')!.scopes).toContain('operator');
    const bare = res.data!.apps.find((a) => a.name.startsWith('key-'));
    expect(bare).toMatchObject({ source: 'API_KEYS', keys: 1 });
    const text = JSON.stringify(res.data);
    for (const secret of [
      'shop-key-0123456789',
      'bare-key-0123456789',
      'ops-key-0123456789',
      A,
      B,
      sha('bare-key-0123456789').slice(0, 16),
    ])
      expect(text).not.toContain(secret);
  });

  it('last activity is written to the database and read back by a gateway started on the same data', async () => {
    const file = write(
      `apps:\n  - name: watcher\n    scopes: [mobile-id:read]\n    keys: [{ sha256: ${A} }]\n  - name: admin\n    scopes: [operator]\n    keys: [{ sha256: ${B} }]\n`,
    );
    const dataDir = tempDataDir();
    const first = await start({ GATEWAY_APPS_FILE: file, DATA_DIR: dataDir });
    await first.graphql('{ mobileIdAuthentication(authReqId: "x") { __typename } }', {}, { key: 'key-a' });
    await first.close();
    const second = await start({ GATEWAY_APPS_FILE: file, DATA_DIR: dataDir });
    const res = await second.graphql<{ apps: Array<{ name: string; lastActivityAt: string | null }> }>(
      '{ apps { name lastActivityAt } }',
      {},
      { key: 'key-b' },
    );
    const watcher = res.data!.apps.find((a) => a.name === 'watcher');
    expect(watcher?.lastActivityAt).toEqual(expect.any(String));
  });
});
