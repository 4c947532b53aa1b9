// The wire rules of docs/upstreams.md, Cloud provisioning, written for the sandbox alone.
// Deliberately independent of src/cloud and src/catalog: if the gateway gets a field
// name or a type wrong, these schemas refuse it instead of mirroring the mistake.
// Dotted keys such as "vendor.extensions.kafka" are single JSON keys (docs/contract.md);
// the dotted paths of the envelope table (platform.productCode, …) are nested objects.
import net from 'node:net';
import { z } from 'zod';

/** Region and zone codes: the only values the spec shows ("Creation envelope"). */
export const REGION_CODES = ['msk'] as const;
export const ZONE_CODES = ['msk-avntg'] as const;

export const KINDS = ['network', 'subnet', 'ip', 'compute', 'topic', 'user'] as const;

/** One row of "Use of POST /ocs/v1/services by purpose". */
export interface ServiceType {
  readonly kind: (typeof KINDS)[number];
  readonly productCode: 'network' | 'vendor-kafka' | 'compute-cloud';
  /** Type of the resource `parentBinding.targetId` names; null: parentBinding must be absent. */
  readonly parent: 'network' | 'kafka-cluster' | null;
  /** Creation requests that the spec shows with `Accept: application/json` ("Endpoints"). */
  readonly requiresAccept: boolean;
  readonly spec: z.ZodType<Record<string, unknown>>;
  /** The literal dotted spec key, for the "nested object instead of dotted key" hint. */
  readonly dottedKey: string;
}

const digits = (what: string) => z.string().regex(/^\d+$/, `expected a decimal string (${what}), e.g. "604800000"`);
const digitsOrMinusOne = (what: string) =>
  z.string().regex(/^(-1|\d+)$/, `expected a decimal string (${what}) or "-1"`);

/** Kafka instance types: c<N>.<size>; c1.small is absent ("Kafka instance types"). */
export const KAFKA_INSTANCE_TYPES: readonly string[] = [1, 2, 4, 6, 8, 10, 12, 16, 20, 24].flatMap((n) =>
  (['small', 'medium', 'large'] as const)
    .filter((size) => !(n === 1 && size === 'small'))
    .map((size) => `c${n}.${size}`),
);

/** VM instance types per platform ("Instance types for compute.v2 and compute.v3", "for compute.gpu.v1"). */
const GENERAL_VM_TYPES = [1, 2, 4, 6, 8, 10, 12, 16, 20, 24].flatMap((n) =>
  ['small', 'medium', 'large', 'xlarge'].map((size) => `c${n}.${size}`),
);
export const VM_INSTANCE_TYPES: Readonly<Record<string, readonly string[]>> = {
  'compute.v2': GENERAL_VM_TYPES,
  'compute.v3': GENERAL_VM_TYPES,
  'compute.gpu.v1': ['c32.g1.large', 'c64.g2.large'],
};

/** "OS images for zoneCode msk-avntg". */
export const IMAGE_IDS = [
  'b251649e-e993-4957-be9c-b0c2c9976c40',
  '3273989e-a173-4ae5-8d3f-e2fe20f641e0',
  '40c18a90-f4de-407d-b7ac-d425b1064aab',
  '51d25ab7-7e48-455c-826d-9e66491580bd',
  'e4461471-8d18-4bd7-b336-c5d1820605cc',
  'c3016071-e995-411e-a78b-1569cf690540',
  '176ecee5-f64b-414e-b540-c27e6c11709f',
  'a1f7390d-145a-451e-aed2-7fb4199a5cc8',
  'cd354813-aff7-423b-9d16-6820bce249f9',
] as const;

// OpenSSH public key line: "<type> <base64> [comment]".
const SSH_PUBLIC_KEY = /^(ssh-[a-z0-9-]+|ecdsa-sha2-[a-z0-9-]+|sk-[a-z0-9@.-]+) [A-Za-z0-9+/]+={0,3}( .*)?$/;

/**
 * Blocks that hold no address on the internet (RFC 6890: this network, private, carrier NAT, loopback, link-local, IETF
 * protocol, benchmarking, multicast, reserved). White_host is a "public IPv4 address" (Kafka cluster table). The
 * documentation blocks stay allowed: the sandbox hands them out as its IP addresses.
 */
const NOT_PUBLIC = new net.BlockList();
for (const [address, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  NOT_PUBLIC.addSubnet(address, prefix, 'ipv4');

const publicIPv4 = z
  .ipv4()
  .refine((v) => !NOT_PUBLIC.check(v, 'ipv4'), { message: 'expected a public IPv4 address (spec: white_host)' });

export const envelopeSchema = z.strictObject({
  platform: z.strictObject({
    productCode: z.string(),
    regionCode: z.enum(REGION_CODES),
  }),
  kind: z.string(),
  metadata: z.strictObject({
    title: z.string().min(1),
    description: z.string(),
  }),
  projectId: z.uuid(),
  parentBinding: z.strictObject({ targetId: z.uuid() }).optional(),
  spec: z.record(z.string(), z.unknown()),
  zoneCode: z.enum(ZONE_CODES),
});
export type Envelope = z.infer<typeof envelopeSchema>;

export const projectSchema = z.strictObject({
  name: z.string().min(1),
  description: z.string(),
});

const networkSpec = z.strictObject({
  'vendor.extensions.network': z.strictObject({
    bandwidth_mbps: z.int().positive(),
    default_gfw_rule_action: z.literal('allow'),
  }),
});

const subnetSpec = z.strictObject({
  'vendor.extensions.subnet': z.strictObject({ cidr: z.cidrv4() }),
});

const ipSpec = z.strictObject({});

const kafkaSpec = z.strictObject({
  'vendor.extensions.kafka': z.strictObject({
    instance_count: z.int().positive(),
    instance_cpu_utilization: z.enum(['low', 'medium', 'high']),
    instance_disk_size: z.int().positive(),
    instance_disk_type: z.enum(['ssd.basic', 'ssd.fast', 'ssd.ultra', 'ssd.ultra-plus']),
    instance_type: z.string().refine((v) => KAFKA_INSTANCE_TYPES.includes(v), {
      message: 'not a Kafka instance type of the spec (c<N>.small|medium|large; c1.small absent)',
    }),
    kafka_version: z.enum(['2.8.1', '3.1.0']),
    network_id: z.uuid(),
    subnetwork_id: z.uuid(),
    subnetwork_cidr: z.cidrv4(),
    white_host: publicIPv4.optional(),
  }),
});

const topicSpec = z.strictObject({
  'vendor.extensions.topic': z
    .strictObject({
      name: z.string().min(1),
      num_partitions: z.int().positive(),
      replication_factor: z.int().positive(),
      compression_type: z.string().min(1),
      max_message_bytes: z.int().positive(),
      min_insync_replicas: z.int().positive(),
      cleanup_policy: z.string().min(1),
      min_compaction_lag_ms: digits('milliseconds'),
      max_compaction_lag_ms: digits('milliseconds'),
      delete_retention_ms: digits('milliseconds'),
      retention_bytes: digitsOrMinusOne('bytes'),
      retention_ms: digitsOrMinusOne('milliseconds'),
    })
    .refine((t) => t.min_insync_replicas <= t.replication_factor, {
      path: ['min_insync_replicas'],
      message: 'must not exceed replication_factor',
    }),
});

const userSpec = z.strictObject({
  'vendor.extensions.user': z.strictObject({
    name: z.string().min(1),
    password: z.string().min(1),
    acls: z.array(z.strictObject({ pattern: z.string(), pattern_type: z.string(), operation: z.string() })),
    groups_acls: z.array(z.strictObject({ pattern: z.string(), pattern_type: z.string() })),
  }),
});

const vmSpec = z
  .strictObject({
    instance: z.strictObject({
      instanceType: z.string(),
      platformId: z.enum(['compute.v2', 'compute.v3', 'compute.gpu.v1']),
    }),
    bootDisk: z.strictObject({
      sizeGb: z.int().positive(),
      diskType: z.enum(['ssd.basic', 'ssd.fast', 'ssd.ultra']),
      sourceImageId: z.enum(IMAGE_IDS),
    }),
    // "Element shape of secondaryDisks (only an empty array is used): not shown."
    secondaryDisks: z.array(z.unknown()).max(0, 'only an empty array is supported'),
    users: z
      .array(
        z.strictObject({
          name: z.string().min(1),
          password: z.string().optional(),
          sshKeys: z.array(z.string().regex(SSH_PUBLIC_KEY, 'expected an SSH public key "<type> <base64> [comment]"')),
        }),
      )
      .min(1),
    networkInterfaces: z
      .array(z.strictObject({ networkId: z.uuid(), subnetworkId: z.uuid(), natIpId: z.uuid() }))
      .min(1),
    'vendor.extensions.promo': z.strictObject({ is_promo: z.boolean() }),
  })
  .superRefine((vm, ctx) => {
    const allowed = VM_INSTANCE_TYPES[vm.instance.platformId] ?? [];
    if (!allowed.includes(vm.instance.instanceType)) {
      ctx.addIssue({
        code: 'custom',
        path: ['instance', 'instanceType'],
        message: `not an instance type of platform ${vm.instance.platformId}`,
      });
    }
  });

export const SERVICE_TYPES = {
  network: {
    kind: 'network',
    productCode: 'network',
    parent: null,
    requiresAccept: false,
    spec: networkSpec,
    dottedKey: 'vendor.extensions.network',
  },
  subnet: {
    kind: 'subnet',
    productCode: 'network',
    parent: 'network',
    requiresAccept: false,
    spec: subnetSpec,
    dottedKey: 'vendor.extensions.subnet',
  },
  ip: { kind: 'ip', productCode: 'network', parent: 'network', requiresAccept: false, spec: ipSpec, dottedKey: '' },
  'kafka-cluster': {
    kind: 'compute',
    productCode: 'vendor-kafka',
    parent: null,
    requiresAccept: true,
    spec: kafkaSpec,
    dottedKey: 'vendor.extensions.kafka',
  },
  'kafka-topic': {
    kind: 'topic',
    productCode: 'vendor-kafka',
    parent: 'kafka-cluster',
    requiresAccept: true,
    spec: topicSpec,
    dottedKey: 'vendor.extensions.topic',
  },
  'kafka-user': {
    kind: 'user',
    productCode: 'vendor-kafka',
    parent: 'kafka-cluster',
    requiresAccept: true,
    spec: userSpec,
    dottedKey: 'vendor.extensions.user',
  },
  'virtual-machine': {
    kind: 'compute',
    productCode: 'compute-cloud',
    parent: null,
    requiresAccept: true,
    spec: vmSpec,
    dottedKey: 'vendor.extensions.promo',
  },
} as const satisfies Record<string, ServiceType>;

export type SandboxResourceType = keyof typeof SERVICE_TYPES;

export function serviceTypeOf(kind: string, productCode: string): SandboxResourceType | undefined {
  for (const [type, row] of Object.entries(SERVICE_TYPES)) {
    if (row.kind === kind && row.productCode === productCode) return type as SandboxResourceType;
  }
  return undefined;
}

/** `spec["vendor.extensions.kafka"].instance_type`, `users[0].name`, … */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (typeof segment === 'string' && /^[A-Za-z_$][\w$]*$/.test(segment))
      out += out === '' ? segment : `.${segment}`;
    else out += `[${JSON.stringify(String(segment))}]`;
  }
  return out === '' ? '(body)' : out;
}

/** One line per problem, each naming the field: `spec.vendor: unknown field; …`. */
export function describeIssues(issues: readonly z.core.$ZodIssue[], prefix: readonly PropertyKey[] = []): string {
  const lines: string[] = [];
  for (const issue of issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) lines.push(`${formatPath([...prefix, ...issue.path, key])}: unknown field`);
    } else {
      lines.push(`${formatPath([...prefix, ...issue.path])}: ${issue.message}`);
    }
  }
  return lines.slice(0, 6).join('; ');
}
