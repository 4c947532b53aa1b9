// The applicant data of a registration is sent upstream and never stored by the gateway (schema: registerVerification,
// Verification.raw "applicant data removed"). A registration answer that echoes it was kept without it only when the
// echo stood at the top level: nested under `data` (where the gateway reads the answer's id and status) or inside
// `jobResults` (kept as Verification.jobResults), the applicant's passport was stored in clear in the ledger and in the
// idempotency record, and read back as the verification's raw answer.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { VERIFICATIONS_PATH } from '../../src/sandbox/verification.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';

const gateway = gatewaysPerTest();

const PASSPORT = '4509 918273';
const APPLICANT = { lastName: 'Petrova', passport: PASSPORT };
const REGISTER = `mutation($input: RegisterVerificationInput!, $key: UUID) {
  registerVerification(input: $input, idempotencyKey: $key) { verification { externalId status jobResults raw } }
}`;

/** Every byte of the gateway's SQLite files (the WAL included), as text. */
const stored = (t: TestGateway) =>
  fs
    .readdirSync(t.dataDir)
    .filter((f) => f.startsWith('gateway.sqlite'))
    .map((f) => fs.readFileSync(path.join(t.dataDir, f)).toString('latin1'))
    .join('');

describe('a registration answer that echoes the applicant below its top level', () => {
  it('is kept, and read back, without the applicant wherever the answer nests it', async () => {
    const t = await gateway();
    const sandbox = t.gateway.sandbox.verification!;
    const echoes: Array<[string, (body: Record<string, unknown>) => unknown]> = [
      ['nested under data', (body) => ({ data: { ...body, applicant: APPLICANT } })],
      [
        'inside jobResults',
        (body) => ({ ...body, jobResults: { ...(body.jobResults as object), applicant: APPLICANT } }),
      ],
      ['in a list under result', (body) => ({ ...body, result: [{ checks: [{ applicant: APPLICANT }] }] })],
    ];
    for (const [where, echo] of echoes) {
      sandbox.faults.enqueueFor(VERIFICATIONS_PATH, { alter: (body) => echo(body as Record<string, unknown>) });
      const res = await t.graphql(REGISTER, {
        input: { workflowId: 'wf-echo', applicant: APPLICANT },
        key: randomUUID(),
      });
      expect(res.errors, where).toBeUndefined();
      const verification = res.data!.registerVerification.verification;
      expect(
        sandbox.verifications().map((v) => v.externalId),
        where,
      ).toContain(verification.externalId);
      expect(JSON.stringify(verification), where).not.toContain(PASSPORT);
    }
    expect(stored(t)).not.toContain(PASSPORT);
  });
});
