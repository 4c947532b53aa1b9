import {
  imageUuid,
  isBootDiskType,
  isInstanceTypeValidForPlatform,
  platformsForInstanceType,
} from '../catalog/index.js';
import { badUserInput, codePoint, LINE_CONTROL } from '../errors.js';
import type {
  CreateIpAddressInput,
  CreateKafkaClusterInput,
  CreateKafkaTopicInput,
  CreateKafkaUserInput,
  CreateNetworkInput,
  CreateProjectInput,
  CreateSubnetInput,
  CreateVirtualMachineInput,
} from '../generated/graphql.js';
import type { LedgerRecord, ResourceKind } from '../store/ledger.js';
import { isIPv4, isPublicIPv4 } from './ipv4.js';
import type {
  IpAddressSpec,
  KafkaClusterSpec,
  KafkaTopicSpec,
  KafkaUserSpec,
  NetworkSpec,
  Placement,
  ProjectSpec,
  SubnetSpec,
  VirtualMachineSpec,
} from './model.js';

/**
 * Checks of what the spec constrains, made before any upstream call. Each failure is a BAD_USER_INPUT
 * naming the field (`input.<path>`). The ledger is consulted through `lookup` for parents: an id the
 * ledger knows must be of the right kind; an id it does not know is passed on (it may have been created
 * outside the gateway).
 */
export type Lookup = (id: string) => Promise<LedgerRecord | null>;

const KIND_NAMES: Record<ResourceKind, string> = {
  project: 'a project',
  network: 'a network',
  subnet: 'a subnet',
  ip_address: 'an IP address',
  kafka_cluster: 'a Kafka cluster',
  kafka_topic: 'a Kafka topic',
  kafka_user: 'a Kafka user',
  virtual_machine: 'a virtual machine',
  identification: 'an identification',
  verification: 'a verification',
};

/** The fields that name a resource or a user (the spec's `metadata.title`, `name`): one line of text. */
const NAME_FIELDS = new Set(['name', 'title']);

/**
 * One rule for every text of a cloud input, run before anything else reads it: no C0 control character (U+0000 to
 * U+001F) and no DEL (U+007F). The spec shows none of them in any field; PostgreSQL's text cannot hold U+0000 at all,
 * so a resource named with it would be created upstream and then fail to be recorded. Free text (a description, a
 * password) may hold tab, line feed and carriage return; a name or a title is one line, so those are refused inside it
 * too (around it they are trimmed away like spaces). `field` names the text (`input.users[0].name`); lists and
 * objects are walked, each text named by its path.
 */
export function checkTexts(field: string, value: unknown): void {
  // Most inputs hold no control character at all: a scan without paths first, the named walk only for one that does.
  if (!holdsControl(value)) return;
  namedCheck(field, value);
}

/** Whether any text in `value` holds a C0 control character or DEL (tab and line breaks too: names refuse them). */
function holdsControl(value: unknown): boolean {
  if (typeof value === 'string') return LINE_CONTROL.test(value);
  if (value === null || typeof value !== 'object') return false;
  for (const item of Array.isArray(value) ? value : Object.values(value)) if (holdsControl(item)) return true;
  return false;
}

function namedCheck(field: string, value: unknown): void {
  if (typeof value === 'string') {
    const name = NAME_FIELDS.has(field.slice(field.lastIndexOf('.') + 1));
    const text = name ? value.trim() : value;
    const bad = (name ? LINE_CONTROL : TEXT_CONTROL).exec(text);
    if (!bad) return;
    const code = codePoint(bad[0]);
    const at = bad.index + 1 + (name ? value.length - value.trimStart().length : 0);
    throw badUserInput(
      field,
      name
        ? `must be one line of text without control characters; found ${code} at character ${at}`
        : `must not contain control characters other than tab and line breaks; found ${code} at character ${at}`,
    );
  } else if (Array.isArray(value)) {
    value.forEach((item, i) => namedCheck(`${field}[${i}]`, item));
  } else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) namedCheck(`${field}.${key}`, item);
  }
}

/** LINE_CONTROL but tab (U+0009), line feed (U+000A) and carriage return (U+000D), which free text may hold. */
const TEXT_CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/;

export function nonEmpty(field: string, value: string | null | undefined): string {
  const v = (value ?? '').trim();
  if (!v) throw badUserInput(field, 'must not be empty');
  return v;
}

function positiveInt(field: string, value: number | null | undefined, fallback: number): number {
  const v = value ?? fallback;
  if (!Number.isSafeInteger(v) || v <= 0) throw badUserInput(field, `must be a positive integer, got ${v}`);
  return v;
}

/** a.b.c.d/n with n 0..32, no leading zeros (as in the octets), and no host bits set (10.0.0.1/24 is an address). */
export function checkCidr(field: string, value: string | null | undefined): string {
  const v = nonEmpty(field, value);
  const m = /^(\d{1,3}(?:\.\d{1,3}){3})\/(0|[1-9]\d?)$/.exec(v);
  if (!m || !isIPv4(m[1]!) || Number(m[2]) > 32)
    throw badUserInput(field, `must be an IPv4 CIDR block a.b.c.d/n, got ${JSON.stringify(v)}`);
  const prefix = Number(m[2]);
  const addr = m[1]!.split('.').reduce((acc, p) => (acc << 8) + Number(p), 0) >>> 0;
  const hostMask = prefix === 32 ? 0 : (0xffffffff >>> prefix) >>> 0;
  if ((addr & hostMask) !== 0)
    throw badUserInput(field, `${v} has host bits set; the block starts at ${blockStart(addr, prefix)}/${prefix}`);
  // Every CIDR of the spec is a subnet of a network (spec: subnet `cidr`, the cluster's `subnetwork_cidr`), a block its
  // hosts take addresses from. A block reaching into "this network", loopback, multicast or the reserved range (RFC
  // 6890: no interface may hold such an address) can never be one: 0.0.0.0/0, as a firewall rule would write
  // "anywhere", is the usual slip. Public and private ranges alike stay allowed.
  const end = (addr | hostMask) >>> 0;
  const reserved = NOT_HOST_BLOCKS.find(([start, last]) => addr <= last && end >= start);
  if (reserved)
    throw badUserInput(
      field,
      `${v} is not a subnet: it overlaps ${reserved[2]}, whose addresses no host can hold; give the subnet's own block`,
    );
  return v;
}

/** The blocks no host address may lie in (RFC 6890): first and last address, and how a message names them. */
const NOT_HOST_BLOCKS: ReadonlyArray<readonly [number, number, string]> = [
  [0x00000000, 0x00ffffff, '0.0.0.0/8 ("this network")'],
  [0x7f000000, 0x7fffffff, '127.0.0.0/8 (loopback)'],
  [0xe0000000, 0xefffffff, '224.0.0.0/4 (multicast)'],
  [0xf0000000, 0xffffffff, '240.0.0.0/4 (reserved, with the broadcast address)'],
];

function blockStart(addr: number, prefix: number): string {
  const start = prefix === 0 ? 0 : (addr & ((0xffffffff << (32 - prefix)) >>> 0)) >>> 0;
  return [24, 16, 8, 0].map((s) => (start >>> s) & 255).join('.');
}

const SSH_KEY_RE =
  /^(ssh-(rsa|dss|ed25519)|ecdsa-sha2-nistp(256|384|521)|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com) [A-Za-z0-9+/]+={0,3}( .*)?$/;

/** An OpenSSH public key line: `<type> <base64> [comment]`. */
function checkSshKey(field: string, value: string): string {
  const v = value.trim();
  if (!SSH_KEY_RE.test(v))
    throw badUserInput(field, 'must be an OpenSSH public key such as "ssh-ed25519 AAAAC3Nza... user@host"');
  return v;
}

/** Spec, Kafka cluster: `white_host` is a "public IPv4 address in form a.b.c.d". */
function checkPublicIPv4(field: string, value: string): string {
  const v = value.trim();
  if (!isIPv4(v)) throw badUserInput(field, `must be an IPv4 address a.b.c.d, got ${JSON.stringify(value)}`);
  if (!isPublicIPv4(v))
    throw badUserInput(field, `must be a public IPv4 address; ${v} is in a private or reserved range`);
  return v;
}

/** Fails when the ledger knows `id` as another kind of resource; returns the record when known. */
export async function parent(
  field: string,
  id: string,
  kind: ResourceKind,
  lookup: Lookup,
): Promise<LedgerRecord | null> {
  const rec = await lookup(id);
  if (rec && rec.kind !== kind) throw badUserInput(field, `${id} is ${KIND_NAMES[rec.kind]}, not ${KIND_NAMES[kind]}`);
  return rec;
}

function placement(
  input: { region?: string | null; zone?: string | null },
  inherited?: LedgerRecord | null,
): Placement {
  const from = (inherited?.spec ?? {}) as Partial<Placement>;
  return {
    region: (input.region ?? from.region ?? 'MSK') as Placement['region'],
    zone: (input.zone ?? from.zone ?? 'MSK_AVNTG') as Placement['zone'],
  };
}

/** A child must live in the project its parent lives in, when the ledger knows both. */
function sameProject(field: string, projectId: string, rec: LedgerRecord | null): void {
  if (rec?.projectId && rec.projectId !== projectId) {
    throw badUserInput(field, `${rec.id} belongs to project ${rec.projectId}, not ${projectId}`);
  }
}

export function validateProject(input: CreateProjectInput): ProjectSpec {
  checkTexts('input', input);
  return { name: nonEmpty('input.name', input.name), description: input.description ?? '' };
}

export async function validateNetwork(input: CreateNetworkInput, lookup: Lookup): Promise<NetworkSpec> {
  checkTexts('input', input);
  const title = nonEmpty('input.title', input.title);
  const bandwidthMbps = positiveInt('input.bandwidthMbps', input.bandwidthMbps, 100);
  await parent('input.projectId', input.projectId, 'project', lookup);
  return {
    projectId: input.projectId,
    title,
    description: input.description ?? '',
    bandwidthMbps,
    defaultFirewallAction: input.defaultFirewallAction ?? 'ALLOW',
    ...placement(input),
  };
}

export async function validateSubnet(input: CreateSubnetInput, lookup: Lookup): Promise<SubnetSpec> {
  checkTexts('input', input);
  const title = nonEmpty('input.title', input.title);
  const cidr = checkCidr('input.cidr', input.cidr);
  await parent('input.projectId', input.projectId, 'project', lookup);
  const network = await parent('input.networkId', input.networkId, 'network', lookup);
  sameProject('input.networkId', input.projectId, network);
  return {
    projectId: input.projectId,
    networkId: input.networkId,
    title,
    description: input.description ?? '',
    cidr,
    ...placement({}, network),
  };
}

export async function validateIpAddress(input: CreateIpAddressInput, lookup: Lookup): Promise<IpAddressSpec> {
  checkTexts('input', input);
  const title = nonEmpty('input.title', input.title);
  await parent('input.projectId', input.projectId, 'project', lookup);
  const network = await parent('input.networkId', input.networkId, 'network', lookup);
  sameProject('input.networkId', input.projectId, network);
  return {
    projectId: input.projectId,
    networkId: input.networkId,
    title,
    description: input.description ?? '',
    ...placement({}, network),
  };
}

export async function validateKafkaCluster(input: CreateKafkaClusterInput, lookup: Lookup): Promise<KafkaClusterSpec> {
  checkTexts('input', input);
  const title = nonEmpty('input.title', input.title);
  const instanceCount = positiveInt('input.instanceCount', input.instanceCount, 3);
  const diskSize = positiveInt('input.diskSize', input.diskSize, 50);
  const publicIp = input.publicIp == null ? null : checkPublicIPv4('input.publicIp', input.publicIp);
  await parent('input.projectId', input.projectId, 'project', lookup);
  const subnet = await parent('input.subnetId', input.subnetId, 'subnet', lookup);
  sameProject('input.subnetId', input.projectId, subnet);
  const subnetSpec = subnet?.spec as Partial<SubnetSpec> | undefined;
  // docs/contract.md: the subnet CIDR and the cluster's network can be taken from the ledger when omitted.
  const networkId = input.networkId ?? subnetSpec?.networkId;
  if (!networkId)
    throw badUserInput(
      'input.networkId',
      'is required: the gateway did not create this subnet, so it cannot tell its network',
    );
  if (subnetSpec?.networkId && subnetSpec.networkId !== networkId) {
    throw badUserInput(
      'input.networkId',
      `subnet ${input.subnetId} belongs to network ${subnetSpec.networkId}, not ${networkId}`,
    );
  }
  const network = await parent('input.networkId', networkId, 'network', lookup);
  sameProject('input.networkId', input.projectId, network);
  const subnetCidr = input.subnetCidr != null ? checkCidr('input.subnetCidr', input.subnetCidr) : subnetSpec?.cidr;
  if (!subnetCidr)
    throw badUserInput(
      'input.subnetCidr',
      'is required: the gateway did not create this subnet, so it does not know its CIDR',
    );
  if (subnetSpec?.cidr && subnetSpec.cidr !== subnetCidr) {
    throw badUserInput('input.subnetCidr', `subnet ${input.subnetId} has CIDR ${subnetSpec.cidr}, not ${subnetCidr}`);
  }
  return {
    projectId: input.projectId,
    title,
    description: input.description ?? '',
    instanceCount,
    cpuUtilization: input.cpuUtilization ?? 'LOW',
    diskSize,
    diskType: input.diskType ?? 'SSD_BASIC',
    instanceType: input.instanceType,
    kafkaVersion: input.kafkaVersion ?? 'V3_1_0',
    networkId,
    subnetId: input.subnetId,
    subnetCidr,
    publicIp,
    ...placement(input, network),
  };
}

/** The largest 64-bit signed whole number: Kafka's Long.MAX_VALUE, the bound of the topic's ms and bytes settings. */
const MAX_LONG = '9223372036854775807';
/** The largest 16-bit signed number: the replication factor's type in Kafka's CreateTopics request. */
const MAX_REPLICATION_FACTOR = 32767;

export async function validateKafkaTopic(input: CreateKafkaTopicInput, lookup: Lookup): Promise<KafkaTopicSpec> {
  checkTexts('input', input);
  const name = nonEmpty('input.name', input.name);
  const partitions = positiveInt('input.partitions', input.partitions, 1);
  const replicationFactor = positiveInt('input.replicationFactor', input.replicationFactor, 1);
  // Kafka's CreateTopics request carries the replication factor as a 16-bit number: a larger one cannot be sent, even
  // to a cluster the ledger does not know (a known cluster bounds it by its instance count, below).
  if (replicationFactor > MAX_REPLICATION_FACTOR)
    throw badUserInput(
      'input.replicationFactor',
      `must be at most ${MAX_REPLICATION_FACTOR} (Kafka's 16-bit replication factor), got ${replicationFactor}`,
    );
  const maxMessageBytes = positiveInt('input.maxMessageBytes', input.maxMessageBytes, 1048588);
  const minInsyncReplicas = positiveInt('input.minInsyncReplicas', input.minInsyncReplicas, 1);
  await parent('input.projectId', input.projectId, 'project', lookup);
  const cluster = await parent('input.clusterId', input.clusterId, 'kafka_cluster', lookup);
  sameProject('input.clusterId', input.projectId, cluster);
  const instanceCount = (cluster?.spec as Partial<KafkaClusterSpec> | undefined)?.instanceCount;
  if (instanceCount !== undefined && replicationFactor > instanceCount) {
    throw badUserInput(
      'input.replicationFactor',
      `must not exceed the cluster's instance count (${instanceCount}), got ${replicationFactor}`,
    );
  }
  if (minInsyncReplicas > replicationFactor) {
    throw badUserInput(
      'input.minInsyncReplicas',
      `must not exceed the replication factor (${replicationFactor}), got ${minInsyncReplicas}`,
    );
  }
  const ms = (
    field: string,
    value: string | number | null | undefined,
    fallback: string,
    allowMinusOne: boolean,
  ): string => {
    const v = value == null ? fallback : String(value);
    if (v.startsWith('-') && !(allowMinusOne && v === '-1'))
      throw badUserInput(field, `must be ${allowMinusOne ? '-1 or ' : ''}a non-negative whole number, got ${v}`);
    // Kafka keeps these settings as a long (the default of max.compaction.lag.ms is its largest): a longer number would
    // be sent and refused by the cluster, or by the upstream, after the call. DecimalString has no leading zeros, so
    // comparing lengths, then the digits, compares the numbers.
    if (v.length > MAX_LONG.length || (v.length === MAX_LONG.length && v > MAX_LONG))
      throw badUserInput(
        field,
        `must be at most ${MAX_LONG} (a 64-bit whole number), got ${v.length > 40 ? `a number of ${v.length} digits` : v}`,
      );
    return v;
  };
  const minCompactionLagMs = ms('input.minCompactionLagMs', input.minCompactionLagMs, '0', false);
  const maxCompactionLagMs = ms('input.maxCompactionLagMs', input.maxCompactionLagMs, MAX_LONG, false);
  // Kafka refuses a topic whose max.compaction.lag.ms is below 1, or below its min.compaction.lag.ms, whatever its
  // cleanup policy (LogConfig validates both on creation): such a topic can never be created.
  if (maxCompactionLagMs === '0') throw badUserInput('input.maxCompactionLagMs', 'must be at least 1 (Kafka), got 0');
  if (BigInt(minCompactionLagMs) > BigInt(maxCompactionLagMs))
    throw badUserInput(
      'input.minCompactionLagMs',
      `must not exceed maxCompactionLagMs (${maxCompactionLagMs}), got ${minCompactionLagMs}`,
    );
  return {
    projectId: input.projectId,
    clusterId: input.clusterId,
    name,
    partitions,
    replicationFactor,
    compressionType: nonEmpty('input.compressionType', input.compressionType ?? 'producer'),
    maxMessageBytes,
    minInsyncReplicas,
    cleanupPolicy: nonEmpty('input.cleanupPolicy', input.cleanupPolicy ?? 'delete'),
    minCompactionLagMs,
    maxCompactionLagMs,
    deleteRetentionMs: ms('input.deleteRetentionMs', input.deleteRetentionMs, '86400000', false),
    retentionBytes: ms('input.retentionBytes', input.retentionBytes, '-1', true),
    retentionMs: ms('input.retentionMs', input.retentionMs, '604800000', true),
    ...placement({}, cluster),
  };
}

export async function validateKafkaUser(input: CreateKafkaUserInput, lookup: Lookup): Promise<KafkaUserSpec> {
  checkTexts('input', input);
  const name = nonEmpty('input.name', input.name);
  // Sent as given (blanks inside a password are its own), but one of blanks only is the empty password the schema
  // refuses, written with spaces: a template's unset value, never a chosen password. A VM user's password is another
  // matter: the spec lets it be empty.
  if (!input.password.trim())
    throw badUserInput('input.password', input.password ? 'must not be only blanks' : 'must not be empty');
  await parent('input.projectId', input.projectId, 'project', lookup);
  const cluster = await parent('input.clusterId', input.clusterId, 'kafka_cluster', lookup);
  sameProject('input.clusterId', input.projectId, cluster);
  const acls = (input.acls ?? [{}]).map((a, i) => ({
    pattern: nonEmpty(`input.acls[${i}].pattern`, a.pattern ?? '*'),
    patternType: nonEmpty(`input.acls[${i}].patternType`, a.patternType ?? 'literal'),
    operation: nonEmpty(`input.acls[${i}].operation`, a.operation ?? 'rw'),
  }));
  const groupAcls = (input.groupAcls ?? []).map((a, i) => ({
    pattern: nonEmpty(`input.groupAcls[${i}].pattern`, a.pattern ?? '*'),
    patternType: nonEmpty(`input.groupAcls[${i}].patternType`, a.patternType ?? 'literal'),
  }));
  return {
    projectId: input.projectId,
    clusterId: input.clusterId,
    name,
    password: input.password,
    acls,
    groupAcls,
    ...placement({}, cluster),
  };
}

export async function validateVirtualMachine(
  input: CreateVirtualMachineInput,
  lookup: Lookup,
): Promise<VirtualMachineSpec> {
  checkTexts('input', input);
  const title = nonEmpty('input.title', input.title);
  const platform = input.platform ?? 'COMPUTE_V3';
  if (!isInstanceTypeValidForPlatform(input.instanceType, platform)) {
    throw badUserInput(
      'input.instanceType',
      `${input.instanceType} is not available on ${platform}; it runs on ${platformsForInstanceType(input.instanceType).join(', ')}`,
    );
  }
  const disk = input.bootDisk;
  const sizeGb = positiveInt('input.bootDisk.sizeGb', disk.sizeGb, 0);
  const diskType = disk.diskType ?? 'SSD_BASIC';
  if (!isBootDiskType(diskType))
    throw badUserInput(
      'input.bootDisk.diskType',
      `${diskType} cannot be a boot disk; use SSD_BASIC, SSD_FAST or SSD_ULTRA`,
    );
  if (disk.image && disk.imageId) throw badUserInput('input.bootDisk.imageId', 'give image or imageId, not both');
  if (!disk.image && !disk.imageId)
    throw badUserInput('input.bootDisk.image', 'give image (an OS of the catalog) or imageId');
  const imageId = disk.image ? imageUuid(disk.image) : disk.imageId!;
  const interfaces = input.networkInterfaces ?? [];
  if (interfaces.length === 0)
    throw badUserInput('input.networkInterfaces', 'a virtual machine needs at least one network interface');
  // One IP address (natIpId) is one public address: it cannot be the NAT of two interfaces. Two interfaces on one
  // subnet are left to the upstream: the spec is silent, and other clouds allow them.
  const ipAt = new Map<string, number>();
  for (const [i, nic] of interfaces.entries()) {
    // The UUID scalar gives ids in lower case: one id written in two cases is one here.
    const first = ipAt.get(nic.ipAddressId);
    if (first !== undefined)
      throw badUserInput(
        `input.networkInterfaces[${i}].ipAddressId`,
        `${nic.ipAddressId} is also the IP address of the interface at index ${first}; each interface needs its own`,
      );
    ipAt.set(nic.ipAddressId, i);
  }
  await parent('input.projectId', input.projectId, 'project', lookup);
  for (const [i, nic] of interfaces.entries()) {
    const network = await parent(`input.networkInterfaces[${i}].networkId`, nic.networkId, 'network', lookup);
    sameProject(`input.networkInterfaces[${i}].networkId`, input.projectId, network);
    const subnet = await parent(`input.networkInterfaces[${i}].subnetId`, nic.subnetId, 'subnet', lookup);
    if (subnet?.parentId && subnet.parentId !== nic.networkId) {
      throw badUserInput(
        `input.networkInterfaces[${i}].subnetId`,
        `subnet ${nic.subnetId} belongs to network ${subnet.parentId}, not ${nic.networkId}`,
      );
    }
    // The network may be one the ledger does not know (made outside the gateway): the subnet's and the IP address's own
    // projects are then the only ones the gateway can check, as a Kafka cluster's subnet is.
    sameProject(`input.networkInterfaces[${i}].subnetId`, input.projectId, subnet);
    const ip = await parent(`input.networkInterfaces[${i}].ipAddressId`, nic.ipAddressId, 'ip_address', lookup);
    if (ip?.parentId && ip.parentId !== nic.networkId) {
      throw badUserInput(
        `input.networkInterfaces[${i}].ipAddressId`,
        `IP address ${nic.ipAddressId} belongs to network ${ip.parentId}, not ${nic.networkId}`,
      );
    }
    sameProject(`input.networkInterfaces[${i}].ipAddressId`, input.projectId, ip);
  }
  if ((input.users ?? []).length === 0) throw badUserInput('input.users', 'a virtual machine needs at least one user');
  // A login name is one account of the machine: two users of one name would be one account with two passwords and two
  // key lists, and what the upstream makes of that is not shown. Compared as sent (trimmed).
  const seen = new Map<string, number>();
  const users = (input.users ?? []).map((u, i) => {
    const name = nonEmpty(`input.users[${i}].name`, u.name);
    const first = seen.get(name);
    if (first !== undefined)
      throw badUserInput(`input.users[${i}].name`, `${name} is also the name of the user at index ${first}`);
    seen.set(name, i);
    return {
      name,
      password: u.password ?? null,
      sshKeys: (u.sshKeys ?? []).map((k, j) => checkSshKey(`input.users[${i}].sshKeys[${j}]`, k)),
    };
  });
  return {
    projectId: input.projectId,
    title,
    description: input.description ?? '',
    platform,
    instanceType: input.instanceType,
    bootDisk: { sizeGb, diskType, image: disk.image ?? null, imageId },
    users,
    networkInterfaces: interfaces.map((n) => ({
      networkId: n.networkId,
      subnetId: n.subnetId,
      ipAddressId: n.ipAddressId,
    })),
    promo: input.promo ?? false,
    ...placement(input),
  };
}
