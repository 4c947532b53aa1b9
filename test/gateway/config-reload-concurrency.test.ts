// Configuration reloads that meet each other or a file being written (docs/decisions/057): two reloads asked at once
// run one after the other, a file rewritten while a reload reads the others never leaves a mix of two versions in
// force, and a refused reload changes nothing. One real gateway on port 0, real files; the order is set by a spy on
// the reads of the files (what the operator's writes race with), never by a delay.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';

import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';

const OLD_KEY = 'shop-key-old-0123456789abcdef';
const NEW_KEY = 'shop-key-new-0123456789abcdef';
const SRE_KEY = 'sre-key-0123456789abcdef';
const TYPENAME = 'query Typename { __typename }';
const PROJECTS = 'query Projects { projects(first: 1) { id } }';

const digest = (key: string) => createHash('sha256').update(key).digest('hex');
const idOf = (document: string) => `sha256:${digest(document)}`;
const appsFile = (shopKey: string, sreScopes = 'operator, cloud:read') =>
  [
    'apps:',
    '  - name: shop',
    '    scopes: [cloud:read]',
    '    keys:',
    `      - sha256: ${digest(shopKey)}`,
    '  - name: sre',
    `    scopes: [${sreScopes}]`,
    '    keys:',
    `      - sha256: ${digest(SRE_KEY)}`,
    '',
  ].join('\n');
const manifestOf = (documents: string[]) =>
  JSON.stringify(Object.fromEntries(documents.map((d) => [idOf(d), d])), null, 2);

describe('configuration reloads that meet each other, or files being written', () => {
  let files: { apps: string; manifest: string };
  let t: TestGateway;
  /** The first version of the files, and the second, which the tests write at a chosen moment. */
  const writeA = () => {
    fs.writeFileSync(files.apps, appsFile(OLD_KEY));
    fs.writeFileSync(files.manifest, manifestOf([TYPENAME]));
  };
  const writeB = () => {
    fs.writeFileSync(files.apps, appsFile(NEW_KEY));
    fs.writeFileSync(files.manifest, manifestOf([PROJECTS]));
  };

  const postReload = async () => {
    const res = await request(`${t.url}/admin/reload`, {
      method: 'POST',
      headers: { authorization: `Bearer ${SRE_KEY}` },
    });
    return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
  };
  const counted = async () => {
    const text = await (await request(`${t.url}/metrics`)).body.text();
    const count = (result: string) =>
      Number(new RegExp(`^gateway_config_reloads_total\\{result="${result}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
    return { ok: count('ok'), failed: count('failed') };
  };
  const status = async (key: string) => (await t.graphql(TYPENAME, undefined, { key })).status;
  /** Whether the trusted document runs by its id ('ran') or is not in the running manifest. */
  const byId = async (document: string) => {
    const res = await request(`${t.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${SRE_KEY}` },
      body: JSON.stringify({ documentId: idOf(document) }),
    });
    const body = (await res.body.json()) as { data?: unknown; errors?: { extensions: { code: string } }[] };
    return body.errors?.[0]?.extensions.code ?? (body.data ? 'ran' : 'nothing');
  };
  /** What runs: which shop key is admitted, and which version's trusted document. */
  const inForce = async () => ({
    oldKey: await status(OLD_KEY),
    newKey: await status(NEW_KEY),
    typename: await byId(TYPENAME),
    projects: await byId(PROJECTS),
  });
  const A = { oldKey: 200, newKey: 401, typename: 'ran', projects: 'PERSISTED_QUERY_NOT_FOUND' };
  const B = { oldKey: 401, newKey: 200, typename: 'PERSISTED_QUERY_NOT_FOUND', projects: 'ran' };

  /**
   * Runs `then` right after the gateway's next read of `file`, or after each of its reads (`every`). The files are
   * opened first (to refuse one that is no regular file) and read through the descriptor: the descriptors opened on
   * `file` are followed from the open to the read.
   */
  const afterNextRead = (file: string, then: () => void, every = false) => {
    const { openSync, readFileSync, closeSync } = fs;
    const ofFile = new Set<number>();
    let armed = true;
    vi.spyOn(fs, 'openSync').mockImplementation(((...args: Parameters<typeof fs.openSync>) => {
      const fd = openSync(...args);
      if (args[0] === file) ofFile.add(fd);
      return fd;
    }) as typeof fs.openSync);
    vi.spyOn(fs, 'closeSync').mockImplementation(((fd: number) => {
      ofFile.delete(fd);
      closeSync(fd);
    }) as typeof fs.closeSync);
    vi.spyOn(fs, 'readFileSync').mockImplementation(((...args: Parameters<typeof fs.readFileSync>) => {
      const text = readFileSync(...args);
      const read = args[0];
      if (armed && (read === file || (typeof read === 'number' && ofFile.has(read)))) {
        armed = every;
        then();
      }
      return text;
    }) as typeof fs.readFileSync);
  };

  beforeAll(async () => {
    const dir = tempDataDir('reload-concurrency-');
    files = { apps: path.join(dir, 'apps.yaml'), manifest: path.join(dir, 'persisted-documents.json') };
    writeA();
    t = await startTestGateway({
      GATEWAY_APPS_FILE: files.apps,
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      TRUSTED_DOCUMENTS: 'allow',
      TRUSTED_DOCUMENTS_MANIFEST: files.manifest,
    });
  });
  afterAll(() => t.close());
  beforeEach(async () => {
    writeA();
    expect((await postReload()).status).toBe(200);
    expect(await inForce()).toEqual(A);
  });
  afterEach(() => vi.restoreAllMocks());

  it('a POST /admin/reload and a SIGHUP reload at once run one after the other: both succeed, each is counted once, and the files read last are in force', async () => {
    const before = await counted();
    let second: ReturnType<TestGateway['gateway']['reload']> | undefined;
    // While the first reload reads the apps file, the files are rewritten and the second reload is asked for.
    afterNextRead(files.apps, () => {
      writeB();
      second = t.gateway.reload('SIGHUP');
    });
    const first = await postReload();
    expect(first.status).toBe(200);
    expect(second).toBeDefined();
    expect(await second!).toEqual({ ok: true, files: expect.arrayContaining([files.apps, files.manifest]) });
    expect(await counted()).toEqual({ ok: before.ok + 2, failed: before.failed });
    expect(await inForce()).toEqual(B);
  });

  it('two POST /admin/reload at once, the first refused by a bad file and the second reading it mended: one 422, one 200, and the mended files in force', async () => {
    fs.writeFileSync(files.apps, appsFile(NEW_KEY).replace('scopes: [cloud:read]', 'scopes: [cloud:reed]'));
    fs.writeFileSync(files.manifest, manifestOf([PROJECTS]));
    const before = await counted();
    let second: Promise<{ status: number; body: Record<string, unknown> }> | undefined;
    afterNextRead(files.apps, () => {
      writeB();
      second = postReload();
    });
    const first = await postReload();
    expect(first.status).toBe(422);
    expect(first.body.variable).toBe('GATEWAY_APPS_FILE');
    expect((await second!).status).toBe(200);
    expect(await counted()).toEqual({ ok: before.ok + 1, failed: before.failed + 1 });
    expect(await inForce()).toEqual(B);
  });

  it('the files rewritten (apps file, then manifest) after the reload read the apps file: it never runs the apps file of before with the manifest of after', async () => {
    afterNextRead(files.apps, writeB);
    const res = await postReload();
    // Either version, whole, is a reload as if it ran before or after the writes; a mix of the two is neither. The
    // files are what the operator wrote once the reload answers: that is what the answer 200 says runs.
    expect(res.status).toBe(200);
    expect(await inForce()).toEqual(B);
  });

  it('files rewritten each time the reload reads them are refused as a bad file is, naming the file: nothing changes', async () => {
    let version = 0;
    afterNextRead(files.apps, () => (++version % 2 ? writeB : writeA)(), true);
    const before = await counted();
    const res = await postReload();
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: 'reload_failed', variable: 'GATEWAY_APPS_FILE', file: files.apps });
    expect(res.body.error_description).toMatch(/changed while the reload read the files/);
    expect(await counted()).toEqual({ ok: before.ok, failed: before.failed + 1 });
    vi.restoreAllMocks();
    expect(await inForce()).toEqual(A);
  });

  it('a reload refused by a bad manifest changes nothing: the keys, the scopes and the trusted documents read back as before', async () => {
    // A good apps file (a new key, sre without cloud:read) beside a manifest whose document does not validate.
    fs.writeFileSync(files.apps, appsFile(NEW_KEY, 'operator'));
    fs.writeFileSync(files.manifest, manifestOf([PROJECTS, 'query Bad { nope }']));
    const before = await counted();
    const res = await postReload();
    expect(res.status).toBe(422);
    expect(res.body.variable).toBe('TRUSTED_DOCUMENTS_MANIFEST');
    expect(await counted()).toEqual({ ok: before.ok, failed: before.failed + 1 });
    expect(await inForce()).toEqual(A);
    // sre keeps cloud:read: its read of the projects is not refused.
    const projects = await t.graphql(PROJECTS, undefined, { key: SRE_KEY });
    expect(projects.errors).toBeUndefined();
    // The operator's list of apps is the running one.
    const apps = await t.graphql('{ apps { name keys } }', undefined, { key: SRE_KEY });
    expect(apps.data!.apps).toEqual(expect.arrayContaining([{ name: 'shop', keys: 1 }]));
  });

  it('a reload refused by a bad apps file keeps the running manifest, even when the new one is good', async () => {
    fs.writeFileSync(files.apps, 'apps: []\n');
    fs.writeFileSync(files.manifest, manifestOf([PROJECTS]));
    const res = await postReload();
    expect(res.status).toBe(422);
    expect(res.body.variable).toBe('GATEWAY_APPS_FILE');
    expect(await inForce()).toEqual(A);
  });
});
