// Trusted documents (TRUSTED_DOCUMENTS, TRUSTED_DOCUMENTS_MANIFEST): operations by documentId from a manifest in
// the format of GraphQL Code Generator's client preset, or by Apollo's persisted-query hash, over HTTP, graphql-ws
// and graphql-sse, against the real gateway on port 0.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { buildSchema, type GraphQLSchema } from 'graphql';
import { createClient as createSseClient } from 'graphql-sse';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { ConfigError, loadConfig } from '../../src/config/index.js';
import { startGateway } from '../../src/gateway/start.js';
import { createLogger } from '../../src/logger.js';
import { TrustedDocuments } from '../../src/server/trusted-documents.js';
import { gatewaysPerTest, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { collect, postNotification, SUBSCRIPTION, wsClient } from '../helpers/mobile-id.js';

const start = gatewaysPerTest();
const sha1 = (text: string) => createHash('sha1').update(text).digest('hex');
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

// As the client preset prints them: one operation per document, keyed by its hash (sha1 by default, sha256 optional).
const INSTANCE_TYPES = 'query InstanceTypes { catalog { instanceTypes { name vcpu } } }';
const MANIFEST = { [sha1(INSTANCE_TYPES)]: INSTANCE_TYPES, [sha256(SUBSCRIPTION)]: SUBSCRIPTION } as Record<
  string,
  string
>;
const ARBITRARY = '{ catalog { instanceTypes { wireValue } } }';
const INTROSPECTION = '{ __schema { queryType { name } } }';

function writeManifest(content: unknown): string {
  const file = path.join(tempDataDir('manifest-'), 'persisted-documents.json');
  fs.writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  return file;
}

async function post(gw: TestGateway, body: unknown): Promise<{ status: number; body: any }> {
  const res = await request(`${gw.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.statusCode, body: await res.body.json() };
}

async function get(gw: TestGateway, params: Record<string, string>): Promise<{ status: number; body: any }> {
  const res = await request(`${gw.url}/graphql?${new URLSearchParams(params)}`, {
    headers: { accept: 'application/json', 'apollo-require-preflight': 'true' },
  });
  return { status: res.statusCode, body: await res.body.json() };
}

const codes = (body: any) => (body.errors ?? []).map((e: any) => e.extensions?.code);
const apq = (hash: string) => ({ persistedQuery: { version: 1, sha256Hash: hash } });

for (const mode of ['allow', 'enforce'] as const) {
  describe(`TRUSTED_DOCUMENTS=${mode}`, () => {
    const startWith = (env: Record<string, string> = {}) =>
      start({ TRUSTED_DOCUMENTS: mode, TRUSTED_DOCUMENTS_MANIFEST: writeManifest(MANIFEST), ...env });

    it('runs a manifest document sent by its documentId, in a POST body or a GET query string', async () => {
      const gw = await startWith();
      const byPost = await post(gw, { documentId: sha1(INSTANCE_TYPES) });
      expect(byPost.status).toBe(200);
      expect(byPost.body.data.catalog.instanceTypes[0]).toEqual({ name: expect.any(String), vcpu: expect.any(Number) });
      const byGet = await get(gw, { documentId: sha1(INSTANCE_TYPES) });
      expect(byGet.body).toEqual(byPost.body);
    });

    it("runs a manifest document sent by the sha256 of its text in Apollo's persisted-query extension", async () => {
      const gw = await startWith();
      const res = await post(gw, { extensions: apq(sha256(INSTANCE_TYPES)) });
      expect(res.body.errors).toBeUndefined();
      expect(res.body.data.catalog.instanceTypes.length).toBeGreaterThan(0);
    });

    it('answers an unknown documentId or hash with PERSISTED_QUERY_NOT_FOUND and runs nothing', async () => {
      const gw = await startWith();
      const byId = await post(gw, { documentId: sha1('query Unknown { catalog { instanceTypes { name } } }') });
      expect(codes(byId.body)).toEqual(['PERSISTED_QUERY_NOT_FOUND']);
      expect(byId.body.errors[0].message).toMatch(/unknown documentId/);
      expect(byId.body.data).toBeUndefined();
      const byHash = await post(gw, { extensions: apq(sha256('{ __typename }')) });
      expect(codes(byHash.body)).toEqual(['PERSISTED_QUERY_NOT_FOUND']);
      expect(byHash.body.errors[0].message).toBe('PersistedQueryNotFound');
    });

    it('refuses a documentId sent together with a query, and a hash that does not match its query', async () => {
      const gw = await startWith();
      const both = await post(gw, { documentId: sha1(INSTANCE_TYPES), query: ARBITRARY });
      expect(both.status).toBe(400);
      expect(both.body.errors[0].message).toMatch(/documentId or query, not both/);
      const mismatch = await post(gw, { query: INSTANCE_TYPES, extensions: apq(sha256(ARBITRARY)) });
      expect(mismatch.status).toBe(400);
      expect(mismatch.body.errors[0].message).toMatch(/does not match/);
    });

    it('subscribes by documentId over graphql-ws and graphql-sse', async () => {
      const gw = await startWith();
      const n = await gw.gateway.sandbox.mobileId!.buildNotification({
        authReqId: `td-${mode}`,
        outcome: 'CLIENT_TIMEOUT',
      });
      expect((await postNotification(gw, n.body)).status).toBe(204);

      const ws = wsClient(gw);
      const wsResults: any[] = [];
      await new Promise<void>((resolve, reject) =>
        ws.subscribe({ query: '', variables: { id: `td-${mode}` }, documentId: sha256(SUBSCRIPTION) } as any, {
          next: (v) => wsResults.push(v),
          error: reject,
          complete: resolve,
        }),
      );
      await ws.dispose();

      const sse = createSseClient({ url: `${gw.url}/graphql/stream`, retryAttempts: 0 });
      const sseResults: any[] = [];
      await new Promise<void>((resolve, reject) =>
        sse.subscribe(
          { query: '', variables: { id: `td-${mode}` }, extensions: apq(sha256(SUBSCRIPTION)) },
          { next: (v) => sseResults.push(v), error: reject, complete: resolve },
        ),
      );
      sse.dispose();

      expect(wsResults.map((r) => r.data.mobileIdAuthentication.reason)).toEqual(['CLIENT_TIMEOUT']);
      expect(sseResults).toEqual(wsResults);
    });
  });
}

describe('TRUSTED_DOCUMENTS=allow', () => {
  it('still runs any other document', async () => {
    const gw = await start({ TRUSTED_DOCUMENTS: 'allow', TRUSTED_DOCUMENTS_MANIFEST: writeManifest(MANIFEST) });
    const res = await post(gw, { query: ARBITRARY });
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data.catalog.instanceTypes[0].wireValue).toMatch(/^c\d/);
  });

  it("follows Apollo's automatic persisted queries: an unknown hash, then hash and text, then the hash alone", async () => {
    const gw = await start({ TRUSTED_DOCUMENTS: 'allow', TRUSTED_DOCUMENTS_MANIFEST: writeManifest(MANIFEST) });
    const hash = sha256(ARBITRARY);
    expect(codes((await post(gw, { extensions: apq(hash) })).body)).toEqual(['PERSISTED_QUERY_NOT_FOUND']);
    expect((await post(gw, { query: ARBITRARY, extensions: apq(hash) })).body.errors).toBeUndefined();
    const again = await post(gw, { extensions: apq(hash) });
    expect(again.body.errors).toBeUndefined();
    expect(again.body.data.catalog.instanceTypes.length).toBeGreaterThan(0);
  });
});

describe('TRUSTED_DOCUMENTS=enforce', () => {
  const enforce = (env: Record<string, string> = {}) =>
    start({ TRUSTED_DOCUMENTS: 'enforce', TRUSTED_DOCUMENTS_MANIFEST: writeManifest(MANIFEST), ...env });

  it('refuses a document outside the manifest over HTTP, graphql-ws and graphql-sse, with PERSISTED_QUERY_NOT_FOUND', async () => {
    const gw = await enforce();
    const http = await post(gw, { query: ARBITRARY });
    expect(codes(http.body)).toEqual(['PERSISTED_QUERY_NOT_FOUND']);
    expect(http.body.errors[0].message).toMatch(/trusted documents only/);
    expect(codes((await get(gw, { query: ARBITRARY })).body)).toEqual(['PERSISTED_QUERY_NOT_FOUND']);
    // Registering a new document through Apollo's protocol is refused too.
    expect(codes((await post(gw, { query: ARBITRARY, extensions: apq(sha256(ARBITRARY)) })).body)).toEqual([
      'PERSISTED_QUERY_NOT_FOUND',
    ]);

    const other = 'subscription Other($id: String!) { mobileIdAuthentication(authReqId: $id) { __typename } }';
    const ws = collect(wsClient(gw), other, { id: 'x' });
    await ws.done;
    expect((ws.errors[0] as any[]).map((e) => e.extensions.code)).toEqual(['PERSISTED_QUERY_NOT_FOUND']);

    const sse = createSseClient({ url: `${gw.url}/graphql/stream`, retryAttempts: 0 });
    const sseResults: any[] = [];
    await new Promise<void>((resolve) =>
      sse.subscribe(
        { query: other, variables: { id: 'x' } },
        { next: (v) => sseResults.push(v), error: () => resolve(), complete: resolve },
      ),
    );
    sse.dispose();
    expect(sseResults).toEqual([
      { data: null, errors: [expect.objectContaining({ extensions: { code: 'PERSISTED_QUERY_NOT_FOUND' } })] },
    ]);
  });

  it('refuses an SSE body that is a JSON string holding a request, and runs nothing of it', async () => {
    // JSON that parses to a string is no request object: read again as JSON further on, it would run a document the
    // manifest was never asked about (here a mutation that creates a project).
    const gw = await enforce();
    const inner = JSON.stringify({
      query: 'mutation { createProject(input: { name: "smuggled" }) { project { id } } }',
    });
    const res = await request(`${gw.url}/graphql/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify(inner),
    });
    expect(res.statusCode).toBe(400);
    expect(await res.body.json()).toEqual({
      errors: [{ message: 'the body must be a JSON object', extensions: { code: 'BAD_REQUEST' } }],
    });
    expect(await gw.gateway.services.ledger.list('project')).toEqual([]);
  });

  it('runs the text of a manifest document as it is, so GraphiQL can run the operations the apps ship', async () => {
    const gw = await enforce();
    const res = await post(gw, { query: INSTANCE_TYPES });
    expect(res.body.errors).toBeUndefined();
  });

  it('lets introspection through while it is enabled (GraphiQL docs and completion), and not once it is off', async () => {
    const on = await enforce();
    expect((await post(on, { query: INTROSPECTION })).body.data.__schema.queryType.name).toBe('Query');
    // An operation that mixes introspection with a real field is not introspection.
    expect(
      codes((await post(on, { query: '{ __schema { queryType { name } } catalog { instanceTypes { name } } }' })).body),
    ).toEqual(['PERSISTED_QUERY_NOT_FOUND']);
    const off = await enforce({ GRAPHQL_INTROSPECTION: 'false' });
    expect(codes((await post(off, { query: INTROSPECTION })).body)).toEqual(['PERSISTED_QUERY_NOT_FOUND']);
  });
});

describe('the trusted-documents manifest at start-up', () => {
  async function startupError(manifest: unknown): Promise<Error> {
    const config = loadConfig({
      TRUSTED_DOCUMENTS: 'enforce',
      TRUSTED_DOCUMENTS_MANIFEST:
        typeof manifest === 'symbol' ? '/nonexistent/persisted-documents.json' : writeManifest(manifest),
      DATA_DIR: tempDataDir(),
      LOG_LEVEL: 'silent',
    });
    const err = await startGateway(config, {
      port: 0,
      host: '127.0.0.1',
      logger: createLogger({ level: 'silent' }),
    }).then(
      async (gw) => {
        await gw.close();
        throw new Error('the gateway started');
      },
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.message).toMatch(/^TRUSTED_DOCUMENTS_MANIFEST: /);
    return err;
  }

  it.each([
    ['a missing file', Symbol('missing'), /cannot be read \(ENOENT\)/],
    ['text that is not JSON', '{ "abc": ', /is not valid JSON/],
    ['a JSON array', [INSTANCE_TYPES], /must be a JSON object of document ids to documents/],
    ['no documents', {}, /holds no documents/],
    ['a document that is not a string', { abc: 42 }, /document abc must be a string of GraphQL, not number/],
    ['a document that does not parse', { abc: 'query {' }, /document abc does not parse: Syntax Error/],
    [
      'a document the schema does not have',
      { abc: '{ nothingLikeThis }' },
      /document abc is not valid against the schema: Cannot query field "nothingLikeThis"/,
    ],
    [
      'a sha256 id that is not the hash of its document',
      { [sha256(ARBITRARY)]: INSTANCE_TYPES },
      /the id is not the sha256 of its text/,
    ],
    [
      'a sha1 id that is not the hash of its document',
      { [sha1(ARBITRARY)]: INSTANCE_TYPES },
      /the id is not the sha1 of its text/,
    ],
  ])('stops start-up with a clear message for %s', async (_what, manifest, message) => {
    expect((await startupError(manifest)).message).toMatch(message);
  });

  it('refuses allow or enforce without a manifest, and a manifest while the mode is off', () => {
    expect(() => loadConfig({ TRUSTED_DOCUMENTS: 'enforce' })).toThrow(
      /TRUSTED_DOCUMENTS_MANIFEST: TRUSTED_DOCUMENTS is enforce, so the manifest of trusted documents is required/,
    );
    expect(() => loadConfig({ TRUSTED_DOCUMENTS_MANIFEST: '/tmp/x.json' })).toThrow(
      /TRUSTED_DOCUMENTS: TRUSTED_DOCUMENTS_MANIFEST is set but TRUSTED_DOCUMENTS is off/,
    );
    expect(() => loadConfig({ TRUSTED_DOCUMENTS: 'strict' })).toThrow(
      /TRUSTED_DOCUMENTS: must be off, allow or enforce/,
    );
  });

  it('makes `npm start` exit with status 2 and say which variable is wrong, and the line of the bad document', async () => {
    const manifest = writeManifest({ abc: 'query {' });
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      cwd: path.resolve(import.meta.dirname, '../..'),
      env: {
        ...process.env,
        PORT: '0',
        HOST: '127.0.0.1',
        DATA_DIR: tempDataDir(),
        TRUSTED_DOCUMENTS: 'enforce',
        TRUSTED_DOCUMENTS_MANIFEST: manifest,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdout.resume();
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(2);
    expect(stderr).toContain(
      `gateway: invalid configuration: TRUSTED_DOCUMENTS_MANIFEST: ${manifest} line 2: document abc does not parse`,
    );
  }, 30_000);
});

describe('the trusted-documents manifest read again', () => {
  it('reuses a document only as validated against the same schema: against another it is validated again', () => {
    const manifest = writeManifest({ Hello: '{ hello }', [sha1('{ bye }')]: '{ bye }' });
    const schemaOf = (fields: string) => buildSchema(`type Query { ${fields} }`);
    const before = schemaOf('hello: String bye: String');
    const load = (schema: GraphQLSchema, previous?: TrustedDocuments) =>
      TrustedDocuments.load({ mode: 'enforce', manifest, schema, introspection: false, previous });
    const first = load(before);
    expect(first.prepared).toBe(2);
    expect(load(before, first).prepared).toBe(0);
    expect(load(schemaOf('hello: Int bye: Int'), first).prepared).toBe(2);
    expect(() => load(schemaOf('hello: String'), first)).toThrow(/document .* is not valid against the schema/);
  });
});
