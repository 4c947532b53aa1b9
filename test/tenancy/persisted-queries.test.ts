// Automatic persisted queries (docs/graphql-api.md, "Trusted documents") and tenancy: a document an app registered by
// its hash is that app's. Another app that sends only the hash gets what it gets for a hash nobody registered, so it
// cannot tell whether some app sent a given text, which may hold personal data inline (an external id, an applicant's
// name). A manifest's documents (TRUSTED_DOCUMENTS_MANIFEST) stay every app's.
import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { operationOver, type Transport } from '../helpers/operation.js';

const A = 'key-apq-app-a-0123456789';
const B = 'key-apq-app-b-9876543210';
const KNOWN = 'query Known { __typename }';
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** POST /graphql with `body` as `key`: the status and the parsed body. */
async function post(gw: TestGateway, key: string, body: unknown): Promise<{ status: number; body: any }> {
  const res = await request(`${gw.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });
  return { status: res.statusCode, body: await res.body.json() };
}

const apq = (hash: string) => ({ persistedQuery: { version: 1, sha256Hash: hash } });

describe.each(['off', 'allow'] as const)('TRUSTED_DOCUMENTS=%s: a registered persisted query is its app’s', (mode) => {
  let gw: TestGateway;
  beforeAll(async () => {
    const manifest = path.join(tempDataDir('apq-manifest-'), 'persisted-documents.json');
    fs.writeFileSync(manifest, JSON.stringify({ [sha256(KNOWN)]: KNOWN }));
    gw = await startTestGateway({
      GATEWAY_API_KEYS: `${A},${B}`,
      ...(mode === 'allow' ? { TRUSTED_DOCUMENTS: mode, TRUSTED_DOCUMENTS_MANIFEST: manifest } : {}),
    });
  });
  afterAll(() => gw?.close());

  it("another app's hash alone answers as a hash nobody registered; the app that registered it runs it by hash", async () => {
    // A text with a person's data inline, registered by A with the handshake (hash and text).
    const text = `query { verificationResults(externalIds: ["customer-${randomUUID()}"]) { externalId } }`;
    const registered = await post(gw, A, { query: text, extensions: apq(sha256(text)) });
    expect(registered.body.errors).toBeUndefined();

    const theirs = await post(gw, B, { extensions: apq(sha256(text)) });
    const nobodys = await post(gw, B, { extensions: apq(sha256(`${text} `)) });
    expect(theirs.body.errors?.[0]?.extensions?.code).toBe('PERSISTED_QUERY_NOT_FOUND');
    expect(theirs).toEqual(nobodys);

    // With trusted documents off nothing is kept (the client sends the text with the hash again); with allow, A's own
    // registration answers A.
    const own = await post(gw, A, { extensions: apq(sha256(text)) });
    if (mode === 'allow') expect(own.body).toEqual(registered.body);
    else expect(own).toEqual(nobodys);
  });

  it.runIf(mode === 'allow').each(['ws', 'sse', 'sse-single'] as Transport[])(
    "over %s, another app's hash alone answers as a hash nobody registered; the owner's runs",
    async (transport) => {
      const text = `query { verificationResults(externalIds: ["customer-${randomUUID()}"]) { externalId } }`;
      expect((await post(gw, A, { query: text, extensions: apq(sha256(text)) })).body.errors).toBeUndefined();
      const theirs = await operationOver(transport, gw, B, { query: '', extensions: apq(sha256(text)) });
      const nobodys = await operationOver(transport, gw, B, { query: '', extensions: apq(sha256(`${text} `)) });
      // A reserved stream's client reports a refused operation as a network error, without the body.
      if (transport !== 'sse-single') expect(theirs.raw).toContain('PERSISTED_QUERY_NOT_FOUND');
      expect(theirs.raw).toBe(nobodys.raw);
      const own = await operationOver(transport, gw, A, { query: '', extensions: apq(sha256(text)) });
      expect(own.data).toEqual({ verificationResults: [null] });
    },
  );

  // A registration is a document that runs: one whose text does not parse or validate is refused as it is and kept
  // nowhere, so its hash alone still answers as one nobody registered (and takes no place among the registered).
  it.runIf(mode === 'allow').each([
    ['does not parse', '{ nope'],
    ['does not validate', '{ nope }'],
  ])('a text that %s is not registered by its hash', async (_what, bad) => {
    const text = `${bad} # ${randomUUID()}`;
    const before = await post(gw, A, { extensions: apq(sha256(text)) });
    expect(before.body.errors?.[0]?.extensions?.code).toBe('PERSISTED_QUERY_NOT_FOUND');
    const refused = await post(gw, A, { query: text, extensions: apq(sha256(text)) });
    expect(refused.status).toBe(400);
    expect(refused.body.errors?.[0]?.extensions?.code).toMatch(/^GRAPHQL_(PARSE|VALIDATION)_FAILED$/);
    expect(await post(gw, A, { extensions: apq(sha256(text)) })).toEqual(before);
    for (const transport of ['ws', 'sse'] as Transport[]) {
      await operationOver(transport, gw, A, { query: text, extensions: apq(sha256(text)) });
      expect(await post(gw, A, { extensions: apq(sha256(text)) }), transport).toEqual(before);
    }
  });

  it.runIf(mode === 'allow')("a manifest document's hash runs for every app", async () => {
    for (const key of [A, B])
      expect((await post(gw, key, { extensions: apq(sha256(KNOWN)) })).body).toEqual({
        data: { __typename: 'Query' },
      });
  });
});
