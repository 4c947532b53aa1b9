// What the tenancy tests create for an app and read back as another: one of each kind that holds personal data, and
// the one operation that reads them all (test/tenancy/every-surface.test.ts on SQLite, replicas-postgres.test.ts on
// PostgreSQL across replicas).
import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';

import type { TestGateway } from './gateway.js';

export const REGISTER = `mutation($input: RegisterVerificationInput!) {
  registerVerification(input: $input) { verification { id externalId } }
}`;
const IDENTIFY = `mutation($workflowId: String!) {
  createIdentification(input: { workflowId: $workflowId }) { identification { id } }
}`;
const COMPLETE_MOBILE_ID = `mutation($id: String!) { sandboxCompleteMobileIdAuthentication(authReqId: $id) { accepted } }`;
const PROVISION = `mutation($input: ProvisionKafkaClusterInput!) {
  provisionKafkaCluster(input: $input) { provisioning { id } }
}`;

/** Every read of an app's personal data in one operation. */
export const READ = `query($v: [ID!]!, $vid: ID!, $i: ID!, $m: String!, $p: ID!) {
  verificationResults(externalIds: $v) { externalId status }
  verification: node(id: $vid) { id }
  identification(id: $i) { id url }
  identificationNode: node(id: $i) { id }
  mobileIdAuthentication(authReqId: $m) { __typename }
  provisioning(id: $p) { id state }
}`;

/** READ's answer for ids that do not exist: what another app's must read as. */
export const NOTHING = {
  verificationResults: [null],
  verification: null,
  identification: null,
  identificationNode: null,
  mobileIdAuthentication: null,
  provisioning: null,
};

/**
 * The ids of what `key` created on `gw`, one of each kind that holds personal data, as READ's variables. `o` names the
 * identification's workflow and the provisioning's project and subnet, which each test file keeps its own.
 */
export async function createdBy(
  gw: TestGateway,
  key: string,
  o: { workflowId: string; project: string; cidr: string },
): Promise<Record<string, unknown>> {
  const ok = async (query: string, variables: Record<string, unknown> = {}) => {
    const res = await gw.graphql(query, variables, { key });
    expect(res.errors).toBeUndefined();
    return res.data!;
  };
  const externalId = `customer-${randomUUID()}`;
  const registered = await ok(REGISTER, {
    input: { workflowId: 'wf-kyc', applicant: { lastName: 'Petrova' }, externalId },
  });
  const verification = registered.registerVerification.verification.id as string;
  const identification = (await ok(IDENTIFY, { workflowId: o.workflowId })).createIdentification.identification
    .id as string;
  const authReqId = `auth-${randomUUID()}`;
  await ok(COMPLETE_MOBILE_ID, { id: authReqId });
  const input = {
    project: { name: o.project },
    network: { title: 'net' },
    subnet: { title: 'sub', cidr: o.cidr },
    cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
  };
  const provisioning = (await ok(PROVISION, { input })).provisionKafkaCluster.provisioning.id as string;
  await gw.gateway.services.provisioning.idle();
  return { v: [externalId], vid: verification, i: identification, m: authReqId, p: provisioning };
}
