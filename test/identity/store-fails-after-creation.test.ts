// The identification interface does not document Idempotency-Key (docs/decisions/011). When the gateway's store
// fails after it answered 202 (the identification exists upstream), the key must not be given back for a re-send:
// the call answers UPSTREAM_OUTCOME_UNKNOWN, not SERVICE_UNAVAILABLE's "nothing was sent", and a retry with the same
// key once the store is back answers UPSTREAM_OUTCOME_UNKNOWN too instead of creating a second identification. The
// fault is real: the process's file-size limit is 0 while the sandbox's answer is released, so SQLite's writes fail.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { upstreamKey } from '../../src/upstream/idempotency.js';
import { fileSizeLimitUnavailable, whileFilesCannotGrow } from '../helpers/faults.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const PATH = '/api/v2/identifications/workflow-instances';
const CREATE = `mutation($input: CreateIdentificationInput!, $key: UUID) { createIdentification(input: $input, idempotencyKey: $key) { identification { id } replayed } }`;

const unavailable = fileSizeLimitUnavailable();

describe.skipIf(unavailable !== null)(
  `createIdentification whose answer cannot be stored${unavailable ? ` (skipped: ${unavailable})` : ''}`,
  () => {
    let t: TestGateway;
    beforeAll(async () => {
      t = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000' });
    }, 60_000);
    afterAll(() => t?.close());

    it('answers UPSTREAM_OUTCOME_UNKNOWN, and a retry with the same key after the store is back sends nothing', async () => {
      const sandbox = t.gateway.sandbox.identification!;
      const creations = () => sandbox.requests.filter((r) => r.path === PATH);
      const key = randomUUID();
      const variables = { input: { workflowId: `wf-store-${key}` }, key };

      // The request reaches the upstream with the store still writable (the claim is written); its answer is held.
      const held = sandbox.faults.hold();
      const first = t.graphql(CREATE, variables);
      await waitFor(() => held.arrived() === 1, 20_000, 'the creation at the identification sandbox');
      const answer = await whileFilesCannotGrow(async () => {
        held.release();
        return first;
      });
      expect(creations()).toHaveLength(1);
      expect(answer.errors?.[0]?.extensions, JSON.stringify(answer.errors)).toMatchObject({
        code: 'UPSTREAM_OUTCOME_UNKNOWN',
        upstream: 'identification',
        idempotencyKey: key,
        upstreamIdempotencyKey: upstreamKey('open', key),
      });
      expect(answer.errors?.[0]?.message).not.toMatch(/nothing was (stored or )?sent/);

      // The store is back: the retry does not send the creation again on its own.
      const retried = await t.graphql(CREATE, variables);
      expect(retried.errors?.[0]?.extensions, JSON.stringify(retried.errors)).toMatchObject({
        code: 'UPSTREAM_OUTCOME_UNKNOWN',
        upstream: 'identification',
        idempotencyKey: key,
      });
      expect(creations()).toHaveLength(1);

      // Calling again after learning of the unknown outcome is the app's decision (decision 011): sent once more under
      // the same upstream key, then stored and replayed.
      const decided = await t.graphql(CREATE, variables);
      expect(decided.errors, JSON.stringify(decided.errors)).toBeUndefined();
      expect(creations().map((r) => r.headers['idempotency-key'])).toEqual([
        upstreamKey('open', key),
        upstreamKey('open', key),
      ]);
      const replay = await t.graphql(CREATE, variables);
      expect(replay.data?.createIdentification).toEqual({ ...decided.data!.createIdentification, replayed: true });
      expect(creations()).toHaveLength(2);
    });
  },
);
