import { z } from 'zod';

import { toWire } from '../catalog/index.js';
import { answerId, readIdAt, readJsonPath, type JsonPath, type ShapePaths } from '../config/json-path.js';
import { SECRET_KEY } from '../logger.js';
import { masked } from '../upstream/masked.js';
import { isIPv4, isPublicIPv4 } from './ipv4.js';
import {
  REGION_WIRE,
  ZONE_WIRE,
  type IpAddressSpec,
  type KafkaClusterSpec,
  type KafkaTopicSpec,
  type KafkaUserSpec,
  type NetworkSpec,
  type Placement,
  type ProjectSpec,
  type SubnetSpec,
  type VirtualMachineSpec,
} from './model.js';

/**
 * The cloud API's wire shapes (spec: "Resources and their fields", "Endpoints"). The only place that
 * knows snake_case fields and the literal dotted spec keys: `"vendor.extensions.kafka"` is ONE JSON key.
 */

export const PATHS = {
  token: '/iam/v2/tokens',
  projects: '/apis/projects/public/v4/projects',
  services: '/ocs/v1/services',
} as const;

export interface ProjectRequest {
  name: string;
  description: string;
}

export interface ServiceEnvelope {
  platform: { productCode: 'network' | 'vendor-kafka' | 'compute-cloud'; regionCode: string };
  kind: 'network' | 'subnet' | 'ip' | 'compute' | 'topic' | 'user';
  metadata: { title: string; description: string };
  projectId: string;
  parentBinding?: { targetId: string };
  spec: Record<string, unknown>;
  zoneCode: string;
}

/** One creation call: the body plus whether the spec shows `Accept: application/json` for it. */
export interface ServiceCall {
  envelope: ServiceEnvelope;
  /** Endpoints table: Accept is "used on cluster, topic, user and virtual machine creation". */
  accept: boolean;
}

function envelope(
  productCode: ServiceEnvelope['platform']['productCode'],
  kind: ServiceEnvelope['kind'],
  placement: Placement,
  meta: { title: string; description: string; projectId: string; parentId?: string },
  spec: Record<string, unknown>,
): ServiceEnvelope {
  return {
    platform: { productCode, regionCode: REGION_WIRE[placement.region] },
    kind,
    metadata: { title: meta.title, description: meta.description },
    projectId: meta.projectId,
    ...(meta.parentId ? { parentBinding: { targetId: meta.parentId } } : {}),
    spec,
    zoneCode: ZONE_WIRE[placement.zone],
  };
}

export function projectRequest(spec: ProjectSpec): ProjectRequest {
  return { name: spec.name, description: spec.description };
}

export function networkCall(s: NetworkSpec): ServiceCall {
  return {
    accept: false,
    envelope: envelope('network', 'network', s, s, {
      'vendor.extensions.network': {
        bandwidth_mbps: s.bandwidthMbps,
        default_gfw_rule_action: toWire('FirewallAction', s.defaultFirewallAction),
      },
    }),
  };
}

export function subnetCall(s: SubnetSpec): ServiceCall {
  return {
    accept: false,
    envelope: envelope(
      'network',
      'subnet',
      s,
      { ...s, parentId: s.networkId },
      { 'vendor.extensions.subnet': { cidr: s.cidr } },
    ),
  };
}

export function ipAddressCall(s: IpAddressSpec): ServiceCall {
  return { accept: false, envelope: envelope('network', 'ip', s, { ...s, parentId: s.networkId }, {}) };
}

export function kafkaClusterCall(s: KafkaClusterSpec): ServiceCall {
  return {
    accept: true,
    envelope: envelope('vendor-kafka', 'compute', s, s, {
      'vendor.extensions.kafka': {
        instance_count: s.instanceCount,
        instance_cpu_utilization: toWire('CpuUtilization', s.cpuUtilization),
        instance_disk_size: s.diskSize,
        instance_disk_type: toWire('DiskType', s.diskType),
        instance_type: toWire('KafkaInstanceType', s.instanceType),
        kafka_version: toWire('KafkaVersion', s.kafkaVersion),
        network_id: s.networkId,
        subnetwork_id: s.subnetId,
        subnetwork_cidr: s.subnetCidr,
        // "give it only when the cluster must be reachable from outside the cloud"
        ...(s.publicIp ? { white_host: s.publicIp } : {}),
      },
    }),
  };
}

export function kafkaTopicCall(s: KafkaTopicSpec): ServiceCall {
  return {
    accept: true,
    envelope: envelope(
      'vendor-kafka',
      'topic',
      s,
      { title: s.name, description: '', projectId: s.projectId, parentId: s.clusterId },
      {
        'vendor.extensions.topic': {
          name: s.name,
          num_partitions: s.partitions,
          replication_factor: s.replicationFactor,
          compression_type: s.compressionType,
          max_message_bytes: s.maxMessageBytes,
          min_insync_replicas: s.minInsyncReplicas,
          cleanup_policy: s.cleanupPolicy,
          // The ms and bytes fields are decimal strings on the wire (spec, Kafka topic table).
          min_compaction_lag_ms: s.minCompactionLagMs,
          max_compaction_lag_ms: s.maxCompactionLagMs,
          delete_retention_ms: s.deleteRetentionMs,
          retention_bytes: s.retentionBytes,
          retention_ms: s.retentionMs,
        },
      },
    ),
  };
}

export function kafkaUserCall(s: KafkaUserSpec): ServiceCall {
  return {
    accept: true,
    envelope: envelope(
      'vendor-kafka',
      'user',
      s,
      { title: s.name, description: '', projectId: s.projectId, parentId: s.clusterId },
      {
        'vendor.extensions.user': {
          name: s.name,
          password: s.password,
          acls: s.acls.map((a) => ({ pattern: a.pattern, pattern_type: a.patternType, operation: a.operation })),
          groups_acls: s.groupAcls.map((a) => ({ pattern: a.pattern, pattern_type: a.patternType })),
        },
      },
    ),
  };
}

export function virtualMachineCall(s: VirtualMachineSpec): ServiceCall {
  return {
    accept: true,
    envelope: envelope('compute-cloud', 'compute', s, s, {
      instance: { instanceType: toWire('InstanceType', s.instanceType), platformId: toWire('Platform', s.platform) },
      bootDisk: {
        sizeGb: s.bootDisk.sizeGb,
        diskType: toWire('DiskType', s.bootDisk.diskType),
        sourceImageId: s.bootDisk.imageId,
      },
      secondaryDisks: [],
      users: s.users.map((u) => ({
        name: u.name,
        ...(u.password !== null ? { password: u.password } : {}),
        sshKeys: u.sshKeys,
      })),
      networkInterfaces: s.networkInterfaces.map((n) => ({
        networkId: n.networkId,
        subnetworkId: n.subnetId,
        natIpId: n.ipAddressId,
      })),
      'vendor.extensions.promo': { is_promo: s.promo },
    }),
  };
}

/** The guesses of the created id, in the order they are read. */
export const CREATED_ID_GUESSES = ['id', 'serviceId', 'data.id', 'metadata.id'] as const;

/** CREATED_ID_GUESSES as paths, in the same order. */
const CREATED_ID_PATHS: readonly JsonPath[] = CREATED_ID_GUESSES.map((guess) => ({
  text: guess,
  segments: guess.split('.'),
}));

/**
 * The created id: the spec only says the response includes it, so accept `id`, `serviceId`, `data.id`
 * and `metadata.id`, in that order (CREATED_ID_GUESSES). Each guess is read on its own: one that holds no id (null,
 * an empty string, an object) is skipped, and the next is read.
 */
export function extractCreatedId(body: unknown): string | null {
  // The common answer, a string `id`, is the first guess: read at once, without the loop.
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const { id } = body as { id?: unknown };
    if (typeof id === 'string' && Object.hasOwn(body, 'id') && answerId(id) !== null) return id;
  }
  return createdIdByGuesses(body);
}

/**
 * The created id as the guesses read it, each on its own (every answer; exported so that a test can hold the fast path
 * to it): a non-empty string or a finite number, as a configured CLOUD_CREATED_ID_PATH is read.
 */
export function createdIdByGuesses(body: unknown): string | null {
  for (const path of CREATED_ID_PATHS) {
    const id = readIdAt(body, path);
    if (id !== null) return id;
  }
  return null;
}

/**
 * The token endpoint's response (its field names are not shown): `access_token`, `accessToken`,
 * `token`, `id_token`, possibly under `data`; a lifetime from `expires_in`/`expiresIn` (seconds) or
 * `expires_at`/`expiresAt`, else the JWT's own `exp`.
 */
// Each guess on its own: one that holds no token (null, "", an object) is skipped, not a reason to read none.
const tokenFields = z.looseObject({
  access_token: z.string().min(1).optional().catch(undefined),
  accessToken: z.string().min(1).optional().catch(undefined),
  token: z.string().min(1).optional().catch(undefined),
  id_token: z.string().min(1).optional().catch(undefined),
  expires_in: z.coerce.number().positive().optional().catch(undefined),
  expiresIn: z.coerce.number().positive().optional().catch(undefined),
  expires_at: z.union([z.number(), z.string()]).optional().catch(undefined),
  expiresAt: z.union([z.number(), z.string()]).optional().catch(undefined),
});

/** The guesses of the token field, as the start-up line and errors name them. */
export const TOKEN_GUESSES = 'access_token, accessToken, token, id_token, at the top level or under data';

export function parseTokenResponse(
  body: unknown,
  now = Date.now(),
  path: JsonPath | null = null,
): { token: string; expiresAt: number | null } | null {
  if (path) {
    const token = readJsonPath(body, path);
    if (typeof token !== 'string' || token === '') return null;
    // The lifetime beside a token at a configured place is not guessed: the JWT's own `exp`, else the default.
    return { token, expiresAt: jwtExpiry(token) };
  }
  const candidates = [body, (body as { data?: unknown } | null)?.data];
  for (const candidate of candidates) {
    const parsed = tokenFields.safeParse(candidate);
    if (!parsed.success) continue;
    const t = parsed.data;
    const token = t.access_token ?? t.accessToken ?? t.token ?? t.id_token;
    if (!token) continue;
    const seconds = t.expires_in ?? t.expiresIn;
    let expiresAt: number | null = seconds !== undefined ? now + seconds * 1000 : null;
    const at = t.expires_at ?? t.expiresAt;
    if (expiresAt === null && at !== undefined) {
      const ms = typeof at === 'number' ? (at < 1e12 ? at * 1000 : at) : Date.parse(at);
      if (Number.isFinite(ms)) expiresAt = ms;
    }
    expiresAt ??= jwtExpiry(token);
    return { token, expiresAt };
  }
  return null;
}

function jwtExpiry(token: string): number | null {
  const payload = token.split('.')[1];
  if (!payload) return null;
  try {
    const exp = (JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { exp?: unknown }).exp;
    return typeof exp === 'number' ? exp * 1000 : null;
  } catch {
    return null;
  }
}

/** The names an IPv4 field of an IP creation response may have (the spec does not show the response). */
export const ADDRESS_FIELD_NAMES = ['address', 'ip', 'ipAddress', 'ip_address', 'publicIp', 'public_ip'] as const;
/** Objects of the response that may hold that field. */
const ADDRESS_CONTAINERS = ['data', 'spec', 'status'] as const;

/** Where `addressFromResponse` looks, for error messages. */
export const ADDRESS_LOOKUP_DESCRIPTION = `${ADDRESS_FIELD_NAMES.join(', ')}, at the top level or under ${ADDRESS_CONTAINERS.join(', ')}`;

/** An IPv4 address read from a response, and the dotted path of the field it was read from. */
export interface FoundAddress {
  address: string;
  field: string;
}

/**
 * Whether a value read from an IP creation response is the resource's address: a public IPv4 address. Spec: the IP
 * address is "needed only for access to the cluster from outside the cloud", and becomes `white_host`, "public IPv4
 * address"; a private one beside it (the subnet's side of the NAT) is not it.
 */
function isPublicAddress(v: unknown): v is string {
  return typeof v === 'string' && isIPv4(v) && isPublicIPv4(v);
}

/**
 * The public IPv4 address in an IP creation response, and the field it came from; null when no field of
 * `ADDRESS_FIELD_NAMES` (top level, or under data, spec or status) holds one. A field holding anything else (a private
 * address, "pending") is skipped, and the next is read.
 */
export function addressFromResponse(response: unknown, prefix = ''): FoundAddress | null {
  if (!response || typeof response !== 'object' || Array.isArray(response)) return null;
  const r = response as Record<string, unknown>;
  for (const k of ADDRESS_FIELD_NAMES) {
    const v = r[k];
    if (isPublicAddress(v)) return { address: v, field: `${prefix}${k}` };
  }
  if (prefix) return null;
  for (const k of ADDRESS_CONTAINERS) {
    const nested = addressFromResponse(r[k], `${k}.`);
    if (nested) return nested;
  }
  return null;
}

/** The public IPv4 address at a configured path of an IP creation response (CLOUD_IP_ADDRESS_PATH), or null. */
function addressAt(response: unknown, path: JsonPath): FoundAddress | null {
  const v = readJsonPath(response, path);
  return isPublicAddress(v) ? { address: v, field: path.text } : null;
}

const UUID_TEXT = /^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$/;

/**
 * A created id as the ledger keeps it. Spec, Resources: the ids are UUIDs, reused as projectId, targetId, network_id…;
 * a UUID is one id in either letter case, and every UUID an app sends reaches the gateway in lower case (the UUID
 * scalar). One answered in capitals is kept in lower case, else no later input could name it in the ledger. Any other
 * id is kept as it came.
 */
function lowerCaseUuid(id: string | null): string | null {
  return id !== null && UUID_TEXT.test(id) ? id.toLowerCase() : id;
}

/**
 * Reads the cloud API's answers, whose shapes the spec does not show: each with the operator's exact path when one
 * is configured (CLOUD_CREATED_ID_PATH, CLOUD_TOKEN_PATH, CLOUD_IP_ADDRESS_PATH), else with the documented guesses.
 * A configured path replaces the guesses: a guess could read some other id of an answer the gateway was told about.
 */
export class CloudAnswers {
  constructor(private readonly paths: Pick<ShapePaths, 'cloudCreatedId' | 'cloudToken' | 'cloudIpAddress'>) {}

  createdId(body: unknown): string | null {
    return lowerCaseUuid(
      this.paths.cloudCreatedId ? readIdAt(body, this.paths.cloudCreatedId) : extractCreatedId(body),
    );
  }

  token(body: unknown, now = Date.now()): { token: string; expiresAt: number | null } | null {
    return parseTokenResponse(body, now, this.paths.cloudToken);
  }

  address(response: unknown): FoundAddress | null {
    return this.paths.cloudIpAddress ? addressAt(response, this.paths.cloudIpAddress) : addressFromResponse(response);
  }

  /** Where each reader looks, for errors and the start-up line: `CLOUD_CREATED_ID_PATH=data.uuid`, or the guesses. */
  describe(): { createdId: string; token: string; address: string } {
    const shown = (variable: string, path: JsonPath | null, guesses: string) =>
      path ? `${variable}=${path.text}` : `guesses ${guesses}`;
    return {
      createdId: shown('CLOUD_CREATED_ID_PATH', this.paths.cloudCreatedId, CREATED_ID_GUESSES.join(', ')),
      token: shown('CLOUD_TOKEN_PATH', this.paths.cloudToken, TOKEN_GUESSES),
      address: shown('CLOUD_IP_ADDRESS_PATH', this.paths.cloudIpAddress, ADDRESS_LOOKUP_DESCRIPTION),
    };
  }
}

/** A request body as plans show it: the value of every key SECRET_KEY names replaced by `***`, the rest as sent. */
export function maskSecrets(body: unknown): unknown {
  if (Array.isArray(body)) return body.map(maskSecrets);
  if (body && typeof body === 'object') {
    return Object.fromEntries(
      Object.entries(body as Record<string, unknown>).map(([k, v]) => [
        k,
        SECRET_KEY.test(k) && v !== null ? '***' : maskSecrets(v),
      ]),
    );
  }
  return body;
}

/**
 * Names of response fields that may hold a secret: the spec shows no response body, so an upstream's names are
 * unknown (adminPassword, client_secret, refreshToken, apiKey, privateKey, saslPassword, …). Matched by pattern,
 * not by a list; a public key (an echoed sshKeys) is dropped too, which loses nothing the ledger's spec lacks. An echo
 * of the request's headers holds the gateway's own bearer token under `authorization`.
 */
const RESPONSE_SECRET_KEY = /passw(or)?d|passphrase|pwd|secret|token|key|credential|authori[sz]ation|cookie/i;

/**
 * Removes secrets an upstream might echo back before a response is stored: fields named like one, and the secret
 * values of the request `sent` wherever a text of the answer quotes them (an answer in text, or a message). A body
 * without any (the common answer) is returned as it is, not copied: it is the parsed JSON of one answer, which nothing
 * else holds.
 */
export function scrubResponse(body: unknown, sent?: unknown): unknown {
  const kept = holdsSecretKey(body) ? scrubbed(body) : body;
  const secrets = sent === undefined ? NONE : secretsOf(sent);
  return secrets.length === 0 ? kept : masked(kept, secrets);
}

const NONE: readonly string[] = [];

export { masked };

/** The secret values of a request or an input (a user's password: the keys `maskSecrets` masks). */
export function secretsOf(input: unknown): string[] {
  const found: string[] = [];
  const walk = (value: unknown): void => {
    if (Array.isArray(value)) value.forEach(walk);
    else if (value && typeof value === 'object')
      for (const [k, v] of Object.entries(value)) {
        if (SECRET_KEY.test(k) && typeof v === 'string' && v !== '') found.push(v);
        else walk(v);
      }
  };
  walk(input);
  return [...new Set(found)];
}

function holdsSecretKey(body: unknown): boolean {
  if (!body || typeof body !== 'object') return false;
  if (Array.isArray(body)) return body.some(holdsSecretKey);
  for (const k in body) {
    if (Object.hasOwn(body, k) && (RESPONSE_SECRET_KEY.test(k) || holdsSecretKey((body as Record<string, unknown>)[k])))
      return true;
  }
  return false;
}

function scrubbed(body: unknown): unknown {
  if (Array.isArray(body)) return body.map(scrubbed);
  if (body && typeof body === 'object') {
    return Object.fromEntries(
      Object.entries(body as Record<string, unknown>)
        .filter(([k]) => !RESPONSE_SECRET_KEY.test(k))
        .map(([k, v]) => [k, scrubbed(v)]),
    );
  }
  return body;
}
