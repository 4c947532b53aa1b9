// An upstream that quotes a request's password does not always quote it as sent: JSON-escaped (a password with `"`,
// `\`, `/` or non-ASCII, as JSON.stringify writes it or with `\uXXXX`), percent- or form-encoded, or in base64 (alone,
// or inside a longer encoded text such as a Basic credential). Wherever the gateway keeps, logs or returns such text
// (an error an app reads, a provisioning's stored error, an answer kept with its idempotency key, the log of a
// refused token request), each of those forms is masked as the password itself is.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { masked } from '../../src/cloud/wire.js';
import { createChain, M, ok } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const ECHOED_PW = 'Echo "quoted" \\back/slash é😀 a+b c\t-7f3a11';
const PROVISION_PW = 'Prov "pw" \\ /x ß+ y\t-3d8a33';
const TEXT_PW = 'Text "pw" \\ /ü+ z-8e2f66';
const CREDENTIAL = 'cred "in" \\ quotes/ñ-0e2f11';

/** A text as it goes on the wire in UTF-8 or percent-encoded: a lone surrogate becomes U+FFFD. */
const wellFormed = (s: string) => s.replace(/\p{Cs}/gu, '\ufffd');

/** JSON with every character outside printable ASCII as `\uXXXX`. */
const asciiJson = (value: unknown) =>
  JSON.stringify(value).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

/** A password in every form an upstream may quote it in. */
function formsOf(secret: string): string[] {
  const json = JSON.stringify(secret).slice(1, -1);
  const ascii = asciiJson(secret).slice(1, -1);
  const upper = ascii.replace(/\\u([0-9a-f]{4})/g, (_, h: string) => `\\u${h.toUpperCase()}`);
  const bytes = Buffer.from(wellFormed(secret), 'utf8');
  return [
    ...new Set([
      secret,
      json,
      ascii,
      upper,
      json.replaceAll('/', '\\/'),
      ascii.replaceAll('/', '\\/'),
      encodeURIComponent(wellFormed(secret)),
      encodeURIComponent(wellFormed(secret)).replaceAll('%20', '+'),
      new URLSearchParams({ p: secret }).toString().slice(2),
      bytes.toString('base64'),
      bytes.toString('base64').replace(/=+$/, ''),
      bytes.toString('base64url'),
    ]),
  ];
}

/** An answer text that quotes `request` (holding `secret`) in every way at once. */
function echoOf(secret: string, request: Record<string, unknown>): string {
  const body = JSON.stringify(request);
  const bytes = Buffer.from(wellFormed(secret));
  return [
    `invalid body ${body}`,
    `as ascii ${asciiJson(request)}`,
    `slashes escaped ${body.replaceAll('/', '\\/')}`,
    `query ?password=${encodeURIComponent(wellFormed(secret))}`,
    `form ${new URLSearchParams({ name: 'x', password: secret }).toString()}`,
    `base64 ${bytes.toString('base64')} url ${bytes.toString('base64url')}`,
    `basic ${Buffer.from(`user:${wellFormed(secret)}`).toString('base64')}`,
  ].join('; ');
}

/** Every string a JSON value holds, keys included. */
function stringsOf(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.flatMap(stringsOf);
  if (value && typeof value === 'object') return Object.entries(value).flatMap(([k, v]) => [k, ...stringsOf(v)]);
  return [];
}

/** What in `texts` still holds `secret`: one of its forms, or a base64 run that decodes to text holding it. */
function leaks(texts: string[], secret: string): string[] {
  const forms = formsOf(secret);
  const sent = wellFormed(secret);
  const found: string[] = [];
  for (const text of texts) {
    for (const form of forms) if (text.includes(form)) found.push(`${form} in ${text}`);
    for (const run of text.match(/[A-Za-z0-9+/_-]{8,}/g) ?? [])
      for (const shift of ['', 'A', 'AA', 'AAA'])
        if (
          Buffer.from(shift + run, 'base64')
            .toString('utf8')
            .includes(sent)
        )
          found.push(`base64 ${run}`);
  }
  return found;
}

describe('masked(): a password is masked in each form an upstream may quote it in', () => {
  it.each([
    ['quotes, backslash, slash, non-ASCII, plus, space and tab', ECHOED_PW],
    ['an astral character and a lone surrogate', 'pw 😀 \ud800 end'],
  ])('%s', (_, secret) => {
    const text = echoOf(secret, { name: 'app', password: secret });
    for (const quote of text.split('; ')) expect(leaks([quote], secret), quote).not.toEqual([]);
    const out = masked(text, [secret]);
    expect(leaks([out], secret)).toEqual([]);
    expect(out).toContain('invalid body {"name":"app","password":"***"}');
    expect(out).toContain('form name=x&password=***');
  });

  it('leaves a text that quotes no secret as it is, and masks inside objects and lists', () => {
    const id = { id: '0f8c2a4e-6b1d-4c3e-9a7f-5d2b8e1c0a93', note: 'created' };
    expect(masked(id, [ECHOED_PW])).toEqual(id);
    expect(masked([{ details: [encodeURIComponent(ECHOED_PW)] }], [ECHOED_PW])).toEqual([{ details: ['***'] }]);
  });
});

describe('a password an upstream quotes re-encoded is kept, logged and returned masked', () => {
  let gw: TestGateway;

  beforeAll(async () => {
    gw = await startTestGateway({
      LOG_LEVEL: 'trace',
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm,mobile-id',
      CLOUD_API_CREDENTIALS: JSON.stringify({ keyId: 'echo', secret: CREDENTIAL }),
    });
  });
  afterAll(() => gw.close());

  it('the token endpoint quoting the credentials: the log holds none of their forms', async () => {
    gw.gateway.sandbox.cloud!.faults.enqueueFor(/iam/, {
      status: 400,
      body: { code: 'BAD_REQUEST', details: echoOf(CREDENTIAL, { keyId: 'echo', secret: CREDENTIAL }) },
    });
    const refused = await gw.graphql(M.project, { input: { name: 'refused' } });
    expect(refused.errors?.[0]?.extensions?.code, JSON.stringify(refused.errors)).toBe('UPSTREAM_REJECTED');
    const lines = gw
      .logs()
      .split('\n')
      .filter((l) => l.includes("refused the gateway's credentials"));
    expect(lines).toHaveLength(1);
    // The answer is logged as JSON text inside the JSON line: read once as the line, once as the answer.
    const answer = (JSON.parse(lines[0]!) as { answer: string }).answer;
    expect(answer).toContain('***');
    expect(leaks([answer, ...stringsOf(JSON.parse(answer))], CREDENTIAL)).toEqual([]);
  });

  it("an app's refused creation, a provisioning's stored error and an answer kept with its key", async () => {
    const chain = await createChain(gw);
    const cloud = gw.gateway.sandbox.cloud!;

    // A direct creation refused: the app reads the upstream's text, masked.
    cloud.faults.enqueue({
      status: 400,
      body: { code: 'BAD_REQUEST', details: echoOf(ECHOED_PW, { name: 'echoed', password: ECHOED_PW }) },
    });
    const rejected = await gw.graphql(M.user, {
      input: { projectId: chain.projectId, clusterId: chain.clusterId, name: 'echoed', password: ECHOED_PW },
    });
    expect(rejected.errors?.[0]?.extensions?.code).toBe('UPSTREAM_REJECTED');
    expect(rejected.errors![0]!.message).toContain('invalid body {"name":"echoed","password":"***"}');
    expect(leaks(stringsOf(rejected.errors), ECHOED_PW)).toEqual([]);

    // A provisioning's user step refused with the same kind of echo: its stored error.
    cloud.faults.enqueueFor(
      /services/,
      { alter: (body) => body },
      { status: 400, body: { code: 'BAD_REQUEST', details: echoOf(PROVISION_PW, { password: PROVISION_PW }) } },
    );
    const provisioning = await ok(gw, M.provisionKafka, {
      input: {
        projectId: chain.projectId,
        networkId: chain.networkId,
        subnetId: chain.subnetId,
        cluster: { title: 'kafka-echo', instanceType: 'C2_MEDIUM' },
        users: [{ name: 'prov', password: PROVISION_PW }],
      },
    });
    const failed = await waitFor(
      async () => {
        const r = await gw.graphql(`query($id: ID!) { provisioning(id: $id) { state error { code message } } }`, {
          id: provisioning.provisioning.id,
        });
        return r.data?.provisioning?.state === 'FAILED' ? r.data.provisioning : undefined;
      },
      20_000,
      'the provisioning fails',
    );
    expect(failed.error.code).toBe('UPSTREAM_REJECTED');
    expect(leaks([failed.error.message], PROVISION_PW)).toEqual([]);

    // A 2xx text answer quoting it: kept with the idempotency key (UPSTREAM_ANSWER_INCOMPLETE).
    cloud.faults.enqueue({ alter: () => `created ${echoOf(TEXT_PW, { name: 'text', password: TEXT_PW })}` });
    const incomplete = await gw.graphql(M.user, {
      input: { projectId: chain.projectId, clusterId: chain.clusterId, name: 'text', password: TEXT_PW },
    });
    expect(incomplete.errors?.[0]?.extensions?.code).toBe('UPSTREAM_ANSWER_INCOMPLETE');
    expect(incomplete.errors![0]!.extensions!.answer).toContain('"password":"***"');
    expect(leaks(stringsOf(incomplete.errors), TEXT_PW)).toEqual([]);

    // Nothing in the log (each line read as JSON) or in the bytes of DATA_DIR holds any of them.
    await gw.gateway.services.provisioning.idle();
    const logged = gw
      .logs()
      .split('\n')
      .filter(Boolean)
      .flatMap((l) => stringsOf(JSON.parse(l)));
    const stored = fs
      .readdirSync(gw.dataDir, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => fs.readFileSync(path.join(e.parentPath, e.name)).toString('latin1'));
    for (const secret of [ECHOED_PW, PROVISION_PW, TEXT_PW, CREDENTIAL]) {
      expect(leaks(logged, secret)).toEqual([]);
      // The bytes as latin1: a form is ASCII, or UTF-8 whose bytes are read as latin1 alike on both sides.
      const asBytes = formsOf(secret).map((f) => Buffer.from(f, 'utf8').toString('latin1'));
      expect(stored.flatMap((text) => asBytes.filter((f) => text.includes(f)))).toEqual([]);
    }
  });
});
