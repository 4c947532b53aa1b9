// An identification creation answered 2xx with an id the ledger already holds for another creation (the two
// environments are two platforms, whose ids may meet; or an upstream that answers an id twice): the ledger keeps the
// first record, so the second creation cannot be stored under that id. The app is told so
// (UPSTREAM_ANSWER_INCOMPLETE, the answer kept with its key, as for a cloud creation), never told that an
// identification was created that it can then not read, and the first identification stays as it was.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { IDENTIFICATIONS_PATH, type IdentificationSandbox } from '../../src/sandbox/identification.js';
import type { TestGateway } from '../helpers/gateway.js';
import { twoIdentificationEnvironments, type TwoEnvironments } from '../helpers/identity.js';
import { clearTextOf, storeSnapshot } from '../helpers/store.js';

const CREATE = `mutation($input: CreateIdentificationInput!, $key: UUID) {
  createIdentification(input: $input, idempotencyKey: $key) { identification { id url environment } replayed }
}`;
const READ = `query($id: ID!) { identification(id: $id) { id url environment workflowId } }`;

const TOKENS = { PRODUCTION: 'production-token-5a1c', PRODLIKE: 'prodlike-token-3b7e' } as const;

let two: TwoEnvironments;
let t: TestGateway;
let upstreams: TwoEnvironments['upstreams'];

beforeAll(async () => {
  two = await twoIdentificationEnvironments(TOKENS, 'key-a,key-b');
  ({ gateway: t, upstreams } = two);
});
afterAll(() => two?.close());

const sent = (u: IdentificationSandbox) => two.sent(u);

describe('an identification creation answered with an id the ledger holds for another creation', () => {
  it.each([
    ['another app', 'key-b'],
    ['the same app', 'key-a'],
  ])(
    'in the other environment, by %s: UPSTREAM_ANSWER_INCOMPLETE, nothing stored, the first one unchanged',
    async (_label, second) => {
      const first = await t.graphql(CREATE, { input: { workflowId: `wf-first-${randomUUID()}` } }, { key: 'key-a' });
      expect(first.errors).toBeUndefined();
      const held = first.data!.createIdentification.identification as { id: string; url: string };

      // The pre-production platform answers with the id the production platform gave the first one.
      let link = '';
      upstreams.PRODLIKE.faults.enqueueFor(IDENTIFICATIONS_PATH, {
        alter: (body) => {
          link = (body as { url: string }).url;
          return { ...(body as Record<string, unknown>), id: held.id };
        },
      });
      const before = sent(upstreams.PRODLIKE);
      const key = randomUUID();
      const input = { workflowId: `wf-second-${randomUUID()}`, environment: 'PRODLIKE' };
      const res = await t.graphql(CREATE, { input, key }, { key: second });
      expect(res.data?.createIdentification ?? null).toBeNull();
      expect(res.errors![0]!.extensions).toMatchObject({
        code: 'UPSTREAM_ANSWER_INCOMPLETE',
        upstream: 'identification-prodlike',
        status: 202,
        idempotencyKey: key,
      });
      expect(res.errors![0]!.message).toContain(held.id);
      expect(sent(upstreams.PRODLIKE) - before).toBe(1);

      // The first identification is as it was, for its owner; the other app reads it as an unknown id.
      const read = await t.graphql(READ, { id: held.id }, { key: 'key-a' });
      expect(read.data!.identification).toMatchObject({ id: held.id, url: held.url, environment: 'PRODUCTION' });
      if (second === 'key-b')
        expect((await t.graphql(READ, { id: held.id }, { key: 'key-b' })).data!.identification).toBeNull();

      // The key keeps the answer: the same call again answers the same and sends nothing.
      const again = await t.graphql(CREATE, { input, key }, { key: second });
      expect(again.errors![0]!.extensions).toEqual(res.errors![0]!.extensions);
      expect(sent(upstreams.PRODLIKE) - before).toBe(1);

      // The kept answer holds the second link only sealed or masked.
      expect(link).toMatch(/^https?:\/\//);
      expect(clearTextOf(await storeSnapshot(t))).not.toContain(link);
      expect(JSON.stringify(res.errors)).not.toContain(link);
    },
  );
});
