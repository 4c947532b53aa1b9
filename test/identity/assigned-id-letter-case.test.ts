import type { Client } from 'graphql-ws';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { VERIFICATION_EVENT_KIND as KIND } from '../../src/identity/service.js';
import { RESULTS_PATH, VERIFICATIONS_PATH, type VerificationSandbox } from '../../src/sandbox/verification.js';
import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { postCallback, subscribe as subscribeTo, subscriptionsOnBus, type Subscription } from '../helpers/identity.js';
import { wsClient } from '../helpers/mobile-id.js';
import { subscribers, waitFor } from '../helpers/wait.js';

/**
 * The id the upstream assigns to a verification registered without an app id may be a UUID it writes in capitals.
 * A UUID is the same whatever the letter case of its hex digits (RFC 9562): a callback or a lookup naming it in lower
 * case names the same verification, and the gateway records it in lower case (the form it writes the UUIDs it derives
 * in), while it asks the upstream for results by the id as the upstream wrote it. Any other id stays as written.
 */

const REGISTER = `mutation($input: RegisterVerificationInput!) {
  registerVerification(input: $input) { verification { id externalId raw } }
}`;
const RESULTS = `query($ids: [ID!]!) {
  verificationResults(externalIds: $ids) { externalId status verification { externalId } }
}`;
const COMPLETION = `query($id: ID!) {
  node(id: $id) { ... on Verification { externalId completion { externalId status } } }
}`;
const COMPLETED = `subscription($externalId: ID) {
  verificationCompleted(externalId: $externalId) { externalId status verification { externalId } }
}`;

const UPPER_UUID = /^[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}$/;

/** The registration answer with its id moved where the gateway does not look (decision 042's unreadable answer). */
const idElsewhere = (body: unknown) => {
  const { verificationExternalId, ...rest } = body as Record<string, unknown>;
  return { ...rest, registration: [{ ref: verificationExternalId }] };
};

describe('a verification id the upstream assigns as a UUID in capitals', () => {
  let t: TestGateway;
  let sandbox: VerificationSandbox;
  const clients: Client[] = [];
  const subscriptions: Subscription[] = [];
  /** A subscription the test's end stops, however the test ends. */
  const subscribe = (...args: Parameters<typeof subscribeTo>) => {
    const sub = subscribeTo(...args);
    subscriptions.push(sub);
    return sub;
  };
  beforeAll(async () => {
    // The sandbox completes and calls back only when a test says so.
    t = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000' });
    sandbox = t.gateway.sandbox.verification!;
    sandbox.assignIdsInCapitals();
  });
  afterEach(() => {
    for (const sub of subscriptions.splice(0)) sub.stop();
    return waitFor(() => subscribers(t, KIND) === 0, 20_000, "the last test's subscriptions to end");
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.dispose()));
    await t.close();
  });

  /** Registers a verification without an app id: what the app is told, and the id and address the upstream holds. */
  async function register(workflowId: string) {
    const res = await t.graphql(REGISTER, { input: { workflowId, applicant: { lastName: 'Case' } } });
    expect(res.errors).toBeUndefined();
    const held = sandbox.verifications().at(-1)!;
    expect(held.externalId).toMatch(UPPER_UUID);
    return { ...(res.data!.registerVerification.verification as { id: string; externalId: string; raw: any }), held };
  }

  it('is recorded in lower case, the upstream’s answer kept as it wrote it', async () => {
    const { id, externalId, raw, held } = await register('wf-recorded');
    expect(externalId).toBe(held.externalId.toLowerCase());
    expect(id).toBe(externalId);
    expect(raw.verificationExternalId).toBe(held.externalId);
    const read = await t.graphql(COMPLETION, { id });
    expect(read.data!.node).toEqual({ externalId, completion: null });
    // A node id as the upstream wrote it (which `raw` shows) names the same verification.
    const written = await t.graphql(COMPLETION, { id: held.externalId });
    expect(written.data!.node).toEqual({ externalId, completion: null });
  });

  it('takes a callback naming it in lower case, and delivers it to the subscribers of that verification', async () => {
    const { externalId, held } = await register('wf-callback');
    const c = wsClient(t);
    clients.push(c);
    // One subscriber by the id the app was told, one by the id as the upstream wrote it: the same verification.
    const told = subscribe(c, COMPLETED, { externalId });
    const written = subscribe(c, COMPLETED, { externalId: held.externalId });
    await subscriptionsOnBus(t, KIND, externalId, externalId);

    const lower = await postCallback(held.callbackUrl!, {
      verificationExternalId: held.externalId.toLowerCase(),
      status: 'LOWER',
    });
    expect(lower.status, JSON.stringify(lower.body)).toBe(204);
    // The upstream's own callback names the id as it wrote it.
    await sandbox.complete(held.externalId);
    expect(sandbox.callbacks.at(-1)!.status).toBe(204);

    const want = ['LOWER', 'COMPLETED'].map((status) => ({
      verificationCompleted: { externalId, status, verification: { externalId } },
    }));
    for (const sub of [told, written]) {
      await waitFor(() => sub.received.length >= 2, 20_000, 'both callbacks');
      expect(sub.errors).toEqual([]);
      expect(sub.received).toEqual(want);
      sub.stop();
    }
    const read = await t.graphql(COMPLETION, { id: externalId });
    expect(read.data!.node.completion).toEqual({ externalId, status: 'COMPLETED' });
  });

  it('is found by verificationResults in either case, and the upstream is asked by the id it wrote', async () => {
    const { externalId, held } = await register('wf-results');
    sandbox.clearRequests();
    const res = await t.graphql(RESULTS, { ids: [held.externalId, externalId, held.externalId.slice(0, 9) + 'x'] });
    expect(res.errors).toBeUndefined();
    expect(res.data!.verificationResults).toEqual([
      { externalId: held.externalId, status: 'IN_PROGRESS', verification: { externalId } },
      { externalId, status: 'IN_PROGRESS', verification: { externalId } },
      null,
    ]);
    const asked = sandbox.requests.filter((r) => r.path === RESULTS_PATH).map((r) => r.body);
    expect(asked).toEqual([{ verificationExternalId: [held.externalId] }]);

    // A results answer naming it in lower case is its result too.
    sandbox.faults.enqueueFor(RESULTS_PATH, {
      alter: (body) => ({
        results: (body as { results: Array<Record<string, unknown>> }).results.map((item) => ({
          ...item,
          verificationExternalId: String(item.verificationExternalId).toLowerCase(),
        })),
      }),
    });
    const lower = await t.graphql(RESULTS, { ids: [held.externalId] });
    expect(lower.data!.verificationResults).toEqual([
      { externalId: held.externalId, status: 'IN_PROGRESS', verification: { externalId } },
    ]);
  });

  it('binds an address whose registration answer was unreadable by the UUID in any case', async () => {
    sandbox.faults.enqueueFor(VERIFICATIONS_PATH, { alter: idElsewhere });
    const res = await t.graphql(REGISTER, { input: { workflowId: 'wf-claim', applicant: { lastName: 'Claim' } } });
    expect(res.errors![0]!.extensions!.code).toBe('UPSTREAM_ANSWER_INCOMPLETE');
    const held = sandbox.verifications().at(-1)!;
    const lowercase = held.externalId.toLowerCase();
    const c = wsClient(t);
    clients.push(c);
    const all = subscribe(c, COMPLETED);
    await subscriptionsOnBus(t, KIND, null);

    for (const [id, status] of [
      [held.externalId, 'FIRST'],
      [lowercase, 'SECOND'],
    ]) {
      const posted = await postCallback(held.callbackUrl!, { verificationExternalId: id, status });
      expect(posted.status, JSON.stringify(posted.body)).toBe(204);
    }
    const refused = await postCallback(held.callbackUrl!, { verificationExternalId: 'another', status: 'X' });
    expect(refused.status).toBe(400);
    await waitFor(() => all.received.length >= 2, 20_000, 'both callbacks');
    expect(all.received.map((e) => e.verificationCompleted.externalId)).toEqual([lowercase, lowercase]);
    expect(all.received.map((e) => e.verificationCompleted.status)).toEqual(['FIRST', 'SECOND']);
    all.stop();
  });

  it('keeps any other id exactly as written: one differing in letter case is another verification', async () => {
    const named = (id: string) => (body: unknown) => ({ ...(body as object), verificationExternalId: id });
    sandbox.faults.enqueueFor(VERIFICATIONS_PATH, { alter: named('Ver-Case-1') });
    const first = await t.graphql(REGISTER, { input: { workflowId: 'wf-text', applicant: { lastName: 'Text' } } });
    expect(first.errors).toBeUndefined();
    expect(first.data!.registerVerification.verification.externalId).toBe('Ver-Case-1');
    const callbackUrl = sandbox.verifications().at(-1)!.callbackUrl!;
    sandbox.faults.enqueueFor(VERIFICATIONS_PATH, { alter: named('ver-case-1') });
    const second = await t.graphql(REGISTER, { input: { workflowId: 'wf-text-2', applicant: { lastName: 'Text' } } });
    expect(second.errors).toBeUndefined();
    expect(second.data!.registerVerification.verification.externalId).toBe('ver-case-1');

    const refused = await postCallback(callbackUrl, { verificationExternalId: 'ver-case-1', status: 'X' });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toMatch(/names another verification/);

    sandbox.faults.enqueueFor(RESULTS_PATH, {
      alter: () => ({ results: [{ verificationExternalId: 'Ver-Case-1', status: 'DONE' }] }),
    });
    const res = await t.graphql(RESULTS, { ids: ['Ver-Case-1', 'VER-CASE-1'] });
    expect(res.errors).toBeUndefined();
    expect(res.data!.verificationResults).toEqual([
      { externalId: 'Ver-Case-1', status: 'DONE', verification: { externalId: 'Ver-Case-1' } },
      null,
    ]);
  });
});

describe('a verification recorded before this release under the upper-case UUID the upstream wrote', () => {
  it('is still found, called back and subscribed to by the UUID in lower case', async () => {
    const dataDir = tempDataDir();
    const before = await startTestGateway({ DATA_DIR: dataDir, SANDBOX_CALLBACK_DELAY_MS: '600000' });
    before.gateway.sandbox.verification!.assignIdsInCapitals();
    const res = await before.graphql(REGISTER, { input: { workflowId: 'wf-old', applicant: { lastName: 'Old' } } });
    expect(res.errors).toBeUndefined();
    const held = before.gateway.sandbox.verification!.verifications()[0]!;
    // The rows as the gateway wrote them before: the record and its address under the id as the upstream wrote it.
    const upper = held.externalId;
    const lower = upper.toLowerCase();
    const db = before.gateway.services.store.db;
    const stored = ['id', 'in', [lower, upper]] as const;
    const row = await db
      .selectFrom('resources')
      .select('spec')
      .where(...stored)
      .executeTakeFirstOrThrow();
    const { assignedAs: _dropped, ...spec } = JSON.parse(row.spec) as Record<string, unknown>;
    await db
      .updateTable('resources')
      .set({ id: upper, spec: JSON.stringify(spec) })
      .where(...stored)
      .execute();
    await db
      .updateTable('verification_callbacks')
      .set({ external_id: upper })
      .where('external_id', 'in', [lower, upper])
      .execute();
    await before.close();

    const t = await startTestGateway({ DATA_DIR: dataDir, SANDBOX_CALLBACK_DELAY_MS: '600000' });
    try {
      const c = wsClient(t);
      const sub = subscribeTo(c, COMPLETED, { externalId: lower });
      // The subscription by the lower-case id listens under the key the record's callbacks are stored under.
      await subscriptionsOnBus(t, KIND, upper);
      const address = held.callbackUrl!.replace(/^http:\/\/[^/]+/, t.url);
      const posted = await postCallback(address, { verificationExternalId: lower, status: 'OLD' });
      expect(posted.status, JSON.stringify(posted.body)).toBe(204);
      await waitFor(() => sub.received.length > 0, 20_000, 'the callback');
      expect(sub.received).toEqual([
        { verificationCompleted: { externalId: upper, status: 'OLD', verification: { externalId: upper } } },
      ]);
      sub.stop();
      await c.dispose();
      // This sandbox is not the one that registered it: its answer is the one an upstream that wrote the id gives.
      const upstream = t.gateway.sandbox.verification!;
      upstream.faults.enqueueFor(RESULTS_PATH, {
        alter: () => ({ results: [{ verificationExternalId: upper, status: 'OLD' }] }),
      });
      const results = await t.graphql(RESULTS, { ids: [lower] });
      expect(results.errors).toBeUndefined();
      expect(results.data!.verificationResults).toEqual([
        { externalId: lower, status: 'OLD', verification: { externalId: upper } },
      ]);
      expect(upstream.requests.filter((r) => r.path === RESULTS_PATH).map((r) => r.body)).toEqual([
        { verificationExternalId: [upper] },
      ]);
    } finally {
      await t.close();
    }
  });
});
