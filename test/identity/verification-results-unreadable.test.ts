// The spec shows no answer of POST /api/v2/verifications/results. A 2xx holding no list the gateway can find (under
// the guesses or at VERIFICATION_RESULTS_PATH) used to read as "the upstream knows none of these ids": every entry
// null, and nothing told the operator. Now each entry asked upstream carries UPSTREAM_ANSWER_INCOMPLETE, and the
// operator gets one warning naming the variable and the guesses, never the answer (it may hold personal data). A list
// that was found and lacks an id still answers null for it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { RESULTS_PATH } from '../../src/sandbox/verification.js';
import { logLines, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const REGISTER = `mutation($input: RegisterVerificationInput!) {
  registerVerification(input: $input) { verification { externalId } }
}`;
const RESULTS = `query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId status } }`;
/** Written into every answer below: it must never reach the log. */
const PERSONAL = 'Applicant-Ann-Example';

interface WarnLine {
  level: number;
  msg: string;
  requestId?: string;
  variable?: string;
  lookedFor?: string;
}
const unreadableLines = (t: TestGateway) =>
  logLines<WarnLine>(t, (l) => l.level === 40 && l.msg.startsWith('verification results answer'));

async function registered(t: TestGateway, externalIds: string[]): Promise<void> {
  for (const externalId of externalIds) {
    const res = await t.graphql(REGISTER, { input: { workflowId: 'wf-kyc', applicant: { n: 1 }, externalId } });
    expect(res.errors).toBeUndefined();
  }
}

describe('a verification results answer holding no list the gateway can read (guesses)', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000' });
    await registered(t, ['u1', 'u2']);
  });
  afterAll(() => t.close());

  const answer = (body: unknown) =>
    t.gateway.sandbox.verification!.faults.enqueueFor(RESULTS_PATH, { alter: () => body });

  it.each([
    ['an object with none of the guessed names', { records: [{ verificationExternalId: 'u1', who: PERSONAL }] }],
    ['a guessed name holding null', { results: null, note: PERSONAL }],
    ['a guessed name holding a text', { results: PERSONAL }],
    ['a text', PERSONAL],
    ['a number', 42],
    ['null (or an empty body)', null],
    ['an object with no member', {}],
  ])('%s: each entry asked upstream is UPSTREAM_ANSWER_INCOMPLETE, logged once for the operator', async (_n, body) => {
    const before = unreadableLines(t).length;
    answer(body);
    // `never-registered` is not asked upstream (the caller registered no such verification): null, as ever.
    const res = await t.graphql(RESULTS, { ids: ['u1', 'never-registered', 'u2'] });
    expect(res.data!.verificationResults).toEqual([null, null, null]);
    expect(res.errors!.map((e) => e.path)).toEqual([
      ['verificationResults', 0],
      ['verificationResults', 2],
    ]);
    for (const e of res.errors!) {
      expect(e.extensions).toMatchObject({ code: 'UPSTREAM_ANSWER_INCOMPLETE', upstream: 'verification' });
      expect(e.message).toMatch(/answer could not be read/);
      // The app is told what happened, not how the gateway is configured.
      expect(e.message).not.toMatch(/VERIFICATION_RESULTS_PATH|results, items/);
      expect(JSON.stringify(e)).not.toContain(PERSONAL);
    }
    const lines = unreadableLines(t).slice(before);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      variable: 'VERIFICATION_RESULTS_PATH',
      lookedFor: 'guesses a bare list, results, items, data, verifications',
      requestId: expect.any(String),
    });
    expect(t.logs()).not.toContain(PERSONAL);
  });

  it.each([
    ['an empty list', { results: [] }],
    ['an empty bare list', []],
    ['an empty object keyed by id', { results: {} }],
    ['a list without the ids', { results: [{ verificationExternalId: 'someone-else', status: 'DONE' }] }],
  ])('%s: the upstream knows none of them, each entry null, nothing logged', async (_n, body) => {
    const before = unreadableLines(t).length;
    answer(body);
    const res = await t.graphql(RESULTS, { ids: ['u1', 'u2'] });
    expect(res.errors).toBeUndefined();
    expect(res.data!.verificationResults).toEqual([null, null]);
    expect(unreadableLines(t).slice(before)).toHaveLength(0);
  });

  it.each([
    ['an envelope nesting the list under data', (b: unknown) => ({ data: b })],
    ['an envelope nesting the list and a count under data', (b: unknown) => ({ data: { ...(b as object), total: 2 } })],
  ])(
    '%s is not an object keyed by id: UPSTREAM_ANSWER_INCOMPLETE, not null as if the upstream knew none',
    async (_n, alter) => {
      const before = unreadableLines(t).length;
      // The sandbox's own answer (`{ results: [...] }`, both results in it), one level down: `data` holds an object,
      // but its members (`results`, `total`) are not verifications.
      t.gateway.sandbox.verification!.faults.enqueueFor(RESULTS_PATH, { alter });
      const res = await t.graphql(RESULTS, { ids: ['u1', 'u2'] });
      expect(res.data!.verificationResults).toEqual([null, null]);
      expect(res.errors?.map((e) => [e.path, e.extensions?.code])).toEqual([
        [['verificationResults', 0], 'UPSTREAM_ANSWER_INCOMPLETE'],
        [['verificationResults', 1], 'UPSTREAM_ANSWER_INCOMPLETE'],
      ]);
      expect(unreadableLines(t).slice(before)).toHaveLength(1);
    },
  );

  it('a list found answers the ids it holds, and null for the others; a guessed name holding no list is skipped', async () => {
    const sandbox = t.gateway.sandbox.verification!;
    // The first guessed name holds null, the next the sandbox's list cut to its first item.
    sandbox.faults.enqueueFor(RESULTS_PATH, {
      alter: (b) => ({ results: null, items: (b as { results: unknown[] }).results.slice(0, 1) }),
    });
    const res = await t.graphql(RESULTS, { ids: ['u1', 'u2'] });
    expect(res.errors).toBeUndefined();
    const list = res.data!.verificationResults as ({ externalId: string } | null)[];
    expect(list.filter((r) => r !== null)).toHaveLength(1);
    expect(list.filter((r) => r === null)).toHaveLength(1);
  });
});

describe('VERIFICATION_RESULTS_PATH pointing at nothing in the answer', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000', VERIFICATION_RESULTS_PATH: 'payload.entries' });
    await registered(t, ['p1']);
  });
  afterAll(() => t.close());

  it('is UPSTREAM_ANSWER_INCOMPLETE on the entry, and the warning names the path in force', async () => {
    // The sandbox answers `{ results: [...] }`: nothing at payload.entries.
    const res = await t.graphql(RESULTS, { ids: ['p1'] });
    expect(res.data!.verificationResults).toEqual([null]);
    expect(res.errors).toHaveLength(1);
    expect(res.errors![0]).toMatchObject({
      path: ['verificationResults', 0],
      extensions: { code: 'UPSTREAM_ANSWER_INCOMPLETE', upstream: 'verification', status: 200 },
    });
    expect(unreadableLines(t)).toEqual([
      expect.objectContaining({
        variable: 'VERIFICATION_RESULTS_PATH',
        lookedFor: 'VERIFICATION_RESULTS_PATH=payload.entries',
      }),
    ]);
  });

  it('Verification.result of a registration reads the same error at its own path', async () => {
    const res = await t.graphql(
      `mutation { registerVerification(input: { workflowId: "wf-kyc", applicant: { n: 2 }, externalId: "p2" }) {
        verification { externalId result { status } } } }`,
    );
    expect(res.data!.registerVerification.verification).toEqual({ externalId: 'p2', result: null });
    expect(res.errors).toHaveLength(1);
    expect(res.errors![0]).toMatchObject({
      path: ['registerVerification', 'verification', 'result'],
      extensions: { code: 'UPSTREAM_ANSWER_INCOMPLETE' },
    });
  });
});
