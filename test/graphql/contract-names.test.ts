import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { getIntrospectionQuery, type IntrospectionQuery, type IntrospectionTypeRef } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ErrorCode } from '../../src/errors.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

// docs/contract.md, "GraphQL: top-level names": what apps may rely on, asked of a running gateway over HTTP, the way
// an app's code generator reads it. Below the top level types may grow, so a listed field must be there; more may be.

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CONTRACT = fs.readFileSync(path.join(ROOT, 'docs/contract.md'), 'utf8');

const QUERIES: Record<string, string[]> = {
  catalog: [],
  projects: [],
  project: ['id'],
  node: ['id'],
  provisioning: ['id'],
  planKafkaCluster: ['input'],
  planVirtualMachine: ['input'],
  identification: ['id'],
  verificationResults: ['externalIds'],
  identificationCallbackUrl: ['workflowId'],
  mobileIdAuthentication: ['authReqId'],
  mobileIdRejections: [],
  apps: [],
  agentPlan: ['id'],
  pendingAgentPlans: ['first'],
  agentAudit: ['planId', 'first'],
};
const IDEMPOTENT_MUTATIONS = [
  'createProject',
  'createNetwork',
  'createSubnet',
  'createIpAddress',
  'createKafkaCluster',
  'createKafkaTopic',
  'createKafkaUser',
  'createVirtualMachine',
  'provisionKafkaCluster',
  'provisionVirtualMachine',
  'createIdentification',
  'registerVerification',
  'checkRfm',
];
const OTHER_MUTATIONS: Record<string, string[]> = {
  issueMobileIdNotificationToken: [],
  sandboxCompleteMobileIdAuthentication: [],
  ping: [],
  approvePlan: ['planId'],
  declinePlan: ['planId'],
};
/** The stream fields take `after` to resume; the others do not carry cursors. */
const SUBSCRIPTIONS: Record<string, string[]> = {
  mobileIdAuthentication: ['authReqId', 'after'],
  verificationCompleted: ['externalId', 'after'],
  identificationCompleted: ['id', 'after'],
  provisioningProgress: ['id', 'after'],
  heartbeat: [],
  pendingAgentPlansChanged: ['first'],
};
/** The rows of the contract's "Input field names" table, and the input type each row names. */
const INPUT_TYPES: Record<string, string> = {
  network: 'CreateNetworkInput',
  subnet: 'CreateSubnetInput',
  'IP address': 'CreateIpAddressInput',
  'Kafka cluster': 'CreateKafkaClusterInput',
  'Kafka topic': 'CreateKafkaTopicInput',
  'Kafka user': 'CreateKafkaUserInput',
  'virtual machine': 'CreateVirtualMachineInput',
  identification: 'CreateIdentificationInput',
  verification: 'RegisterVerificationInput',
};

/** `a b c { d e } f` → top-level names `a b c f` and the nested `c: [d, e]`. */
function parseFieldList(text: string): { fields: string[]; nested: Record<string, string[]> } {
  const fields: string[] = [];
  const nested: Record<string, string[]> = {};
  for (const m of text.matchAll(/(\w+)(?:\s*\{([^}]*)\})?/g)) {
    fields.push(m[1]!);
    if (m[2] !== undefined) nested[m[1]!] = m[2].trim().split(/\s+/);
  }
  return { fields, nested };
}

function contractInputRows(): Record<string, string> {
  const section = CONTRACT.slice(CONTRACT.indexOf('### Input field names'), CONTRACT.indexOf('### Enum values'));
  const rows: Record<string, string> = {};
  for (const m of section.matchAll(/^\| ([^|`]+?) \| `([^`]+)`/gm)) rows[m[1]!] = m[2]!;
  return rows;
}

function contractErrorCodes(): string[] {
  const section = CONTRACT.slice(CONTRACT.indexOf('### Error codes'), CONTRACT.indexOf('### The fault matrix'));
  const codes: string[] = [];
  for (const m of section.matchAll(/^\| (`[A-Z_]+`(?:, `[A-Z_]+`)*) \|/gm))
    for (const c of m[1]!.matchAll(/`([A-Z_]+)`/g)) codes.push(c[1]!);
  return codes;
}

/** The named type under NON_NULL and LIST wrappers, and whether the outermost wrapper is NON_NULL. */
function unwrap(ref: IntrospectionTypeRef): { name: string; nonNull: boolean } {
  const nonNull = ref.kind === 'NON_NULL';
  let t: IntrospectionTypeRef = ref;
  while ('ofType' in t && t.ofType) t = t.ofType;
  return { name: (t as { name: string }).name, nonNull };
}

let gw: TestGateway;
let schema: IntrospectionQuery['__schema'];
beforeAll(async () => {
  gw = await startTestGateway();
  const res = await gw.graphql<IntrospectionQuery>(getIntrospectionQuery());
  expect(res.errors).toBeUndefined();
  schema = res.data!.__schema;
});
afterAll(async () => {
  await gw?.close();
});

function typeNamed(name: string) {
  const type = schema.types.find((t) => t.name === name);
  expect(type, name).toBeDefined();
  return type!;
}
function fieldsOf(name: string) {
  const type = typeNamed(name) as { fields?: any[]; inputFields?: any[] };
  return (type.fields ?? type.inputFields)!;
}
function rootFields(root: 'queryType' | 'mutationType' | 'subscriptionType') {
  return new Map(fieldsOf(schema[root]!.name).map((f: any) => [f.name as string, f]));
}

describe('the public contract, read from a running gateway', () => {
  it.each([
    ['queryType', QUERIES],
    ['mutationType', OTHER_MUTATIONS],
    ['subscriptionType', SUBSCRIPTIONS],
  ] as const)('%s has every field the contract names, with its arguments', (root, names) => {
    const fields = rootFields(root);
    for (const [name, args] of Object.entries(names)) {
      expect(fields.has(name), `${root}.${name}`).toBe(true);
      const have = fields.get(name).args.map((a: any) => a.name);
      expect(have, `${root}.${name}`).toEqual(expect.arrayContaining(args));
    }
  });

  it('a resumable subscription takes an optional `after: String`', () => {
    const fields = rootFields('subscriptionType');
    for (const name of [
      'mobileIdAuthentication',
      'verificationCompleted',
      'identificationCompleted',
      'provisioningProgress',
    ]) {
      const after = fields.get(name).args.find((a: any) => a.name === 'after');
      expect(unwrap(after.type), name).toEqual({ name: 'String', nonNull: false });
    }
  });

  it('every creation takes `input` and an optional `idempotencyKey: UUID`, and answers idempotencyKey, the key sent upstream and replayed: Boolean!', () => {
    const fields = rootFields('mutationType');
    for (const name of IDEMPOTENT_MUTATIONS) {
      const field = fields.get(name);
      expect(field, name).toBeDefined();
      const args = new Map<string, any>(field.args.map((a: any) => [a.name, a]));
      expect(unwrap(args.get('input').type).nonNull, `${name}(input)`).toBe(true);
      expect(unwrap(args.get('idempotencyKey').type), `${name}(idempotencyKey)`).toEqual({
        name: 'UUID',
        nonNull: false,
      });
      const payload = new Map<string, any>(fieldsOf(unwrap(field.type).name).map((f: any) => [f.name, f]));
      expect(unwrap(payload.get('idempotencyKey').type), `${name} idempotencyKey`).toEqual({
        name: 'UUID',
        nonNull: true,
      });
      expect(unwrap(payload.get('upstreamIdempotencyKey').type), `${name} upstreamIdempotencyKey`).toEqual({
        name: 'UUID',
        nonNull: true,
      });
      expect(unwrap(payload.get('replayed').type), `${name} replayed`).toEqual({ name: 'Boolean', nonNull: true });
    }
  });

  it('every input of the "Input field names" table has the fields the contract lists, nested ones too', () => {
    const rows = contractInputRows();
    expect(Object.keys(rows).sort()).toEqual(Object.keys(INPUT_TYPES).sort());
    for (const [row, list] of Object.entries(rows)) {
      const { fields, nested } = parseFieldList(list);
      const inputFields = fieldsOf(INPUT_TYPES[row]!);
      expect(
        inputFields.map((f: any) => f.name),
        row,
      ).toEqual(expect.arrayContaining(fields));
      for (const [outer, inner] of Object.entries(nested)) {
        const type = unwrap(inputFields.find((f: any) => f.name === outer).type).name;
        expect(
          fieldsOf(type).map((f: any) => f.name),
          `${row} ${outer}`,
        ).toEqual(expect.arrayContaining(inner));
      }
    }
  });

  it('network, Kafka cluster and virtual machine inputs take region and zone, defaulting to MSK and MSK_AVNTG', () => {
    for (const input of ['CreateNetworkInput', 'CreateKafkaClusterInput', 'CreateVirtualMachineInput']) {
      const fields = new Map<string, any>(fieldsOf(input).map((f: any) => [f.name, f]));
      expect(fields.get('region')?.defaultValue, `${input}.region`).toBe('MSK');
      expect(fields.get('zone')?.defaultValue, `${input}.zone`).toBe('MSK_AVNTG');
    }
  });

  it('the result types carry the fields the contract names', () => {
    const names = (type: string) => fieldsOf(type).map((f: any) => f.name);
    expect(names('MobileIdAuthenticated')).toContain('authReqId');
    expect(names('MobileIdAuthenticationFailed')).toEqual(
      expect.arrayContaining(['authReqId', 'error', 'errorDescription', 'reason']),
    );
    const reason = fieldsOf('MobileIdAuthenticationFailed').find((f: any) => f.name === 'reason');
    expect(typeNamed(unwrap(reason.type).name).kind).toBe('ENUM');
    expect(names('Identification')).toEqual(expect.arrayContaining(['id', 'idShort', 'url']));
    // A payload carries it on its resource, as every creation's payload does (docs/graphql-api.md's example).
    const registered = fieldsOf('RegisterVerificationPayload').find((f: any) => f.name === 'verification');
    for (const type of ['VerificationResult', 'VerificationCompletion', unwrap(registered.type).name])
      expect(names(type), type).toContain('externalId');
    for (const type of [
      'Project',
      'Network',
      'Subnet',
      'IpAddress',
      'KafkaCluster',
      'KafkaTopic',
      'KafkaUser',
      'VirtualMachine',
    ])
      expect(names(type), type).toContain('id');
  });

  it('the enums carry the values the contract lists', () => {
    const values = (type: string) => (typeNamed(type) as any).enumValues.map((v: any) => v.name);
    expect(values('Platform')).toEqual(expect.arrayContaining(['COMPUTE_V2', 'COMPUTE_V3', 'COMPUTE_GPU_V1']));
    expect(values('DiskType')).toEqual(
      expect.arrayContaining(['SSD_BASIC', 'SSD_FAST', 'SSD_ULTRA', 'SSD_ULTRA_PLUS']),
    );
    expect(values('KafkaVersion')).toEqual(expect.arrayContaining(['V2_8_1', 'V3_1_0']));
    expect(values('CpuUtilization')).toEqual(expect.arrayContaining(['LOW', 'MEDIUM', 'HIGH']));
    expect(values('FirewallAction')).toEqual(expect.arrayContaining(['ALLOW']));
    expect(values('IdentificationEnvironment')).toEqual(expect.arrayContaining(['PRODUCTION', 'PRODLIKE']));
    expect(values('InstanceType')).toEqual(
      expect.arrayContaining(['C2_SMALL', 'C24_XLARGE', 'C32_G1_LARGE', 'C64_G2_LARGE']),
    );
    expect(values('OsImage')).toEqual(
      expect.arrayContaining([
        'CENTOS_STREAM_9',
        'CENTOS_STREAM_8',
        'CENTOS_7',
        'DEBIAN_11',
        'DEBIAN_10',
        'DEBIAN_9',
        'ROCKY_LINUX_9',
        'ROCKY_LINUX_8',
        'UBUNTU_22_04',
      ]),
    );
  });

  it("every error code of the contract's table is one the gateway raises by name", () => {
    const codes = contractErrorCodes();
    expect(codes.length).toBeGreaterThan(15);
    expect(Object.values(ErrorCode)).toEqual(expect.arrayContaining(codes));
  });
});
