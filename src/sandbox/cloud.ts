// Embedded simulator of the cloud provisioning upstream (docs/upstreams.md, Cloud provisioning),
// speaking real HTTP on loopback. Written from the spec alone: it imports nothing from
// the gateway (src/cloud, src/upstream, src/catalog, src/graphql).
//
// What the spec leaves open and the sandbox decides (the gateway must not rely on more
// than the spec says):
// - token request body: any non-empty JSON object (or exactly `acceptedCredentials`);
//   answer 200 `{ <token field>, token_type: "Bearer", expires_in }`, an HS256 JWT;
// - creation answers 201 with the id where the response shape says (cloud-shapes.ts: `id`,
//   `serviceId`, `data.id` or `metadata.id`; the token field and the IP's address field vary
//   too);
// - errors: `{ code, domain, details }` with the codes of `CloudSandboxErrorCode`.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { SignJWT } from 'jose';
import { validate as isUuid } from 'uuid';

import { DEFAULT_CLOUD_SHAPE, shapeCreated, shapeToken, type CloudResponseShape } from './cloud-shapes.js';
import {
  describeIssues,
  envelopeSchema,
  KINDS,
  projectSchema,
  SERVICE_TYPES,
  serviceTypeOf,
  type Envelope,
  type SandboxResourceType,
} from './cloud-spec.js';
import { errorCodeForStatus, FaultInjector, type FaultKind } from './faults.js';
import {
  acceptsJsonExplicitly,
  canonicalJson,
  DEFAULT_BODY_LIMIT_BYTES,
  headerValue,
  isJsonMediaType,
  requestPath,
  sendJson,
  startLoopbackServer,
} from './http.js';
import { createJsonApiHandler, type ApiAnswer, type RecordedRequest } from './json-api.js';

export type { SandboxResourceType } from './cloud-spec.js';

export const TOKEN_PATH = '/iam/v2/tokens';
export const PROJECTS_PATH = '/apis/projects/public/v4/projects';
export const SERVICES_PATH = '/ocs/v1/services';

/** Accepted as a service-account token unless `serviceAccountTokens` says otherwise. */
export const SANDBOX_SERVICE_ACCOUNT_TOKEN = 'sandbox-service-account-token';

/** Every `code` the sandbox answers with (error body `{ code, domain, details }`). */
export const CloudSandboxErrorCode = {
  /** 401: no `Authorization: Bearer`, or a token it never issued. */
  UNAUTHENTICATED: 'UNAUTHENTICATED',
  /** 401: a token it issued, past its lifetime (or after `expireAllTokens()`). */
  TOKEN_EXPIRED: 'TOKEN_EXPIRED',
  /** 401: token request with empty credentials, or not equal to `acceptedCredentials`. */
  INVALID_CREDENTIALS: 'INVALID_CREDENTIALS',
  /** 415: `Content-Type` is not `application/json`. */
  UNSUPPORTED_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  /** 406: cluster, topic, user or VM creation without `Accept: application/json`. */
  NOT_ACCEPTABLE: 'NOT_ACCEPTABLE',
  /** 400: body is not JSON. */
  MALFORMED_JSON: 'MALFORMED_JSON',
  /** 413: body larger than `bodyLimitBytes`. */
  PAYLOAD_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  /** 400: creation without `Idempotency-Key`. */
  IDEMPOTENCY_KEY_MISSING: 'IDEMPOTENCY_KEY_MISSING',
  /** 400: `Idempotency-Key` is not a UUID. */
  IDEMPOTENCY_KEY_INVALID: 'IDEMPOTENCY_KEY_INVALID',
  /** 409: `Idempotency-Key` already used with another request (path or canonical body differs). */
  IDEMPOTENCY_KEY_CONFLICT: 'IDEMPOTENCY_KEY_CONFLICT',
  /** 400: a field is missing, unknown, of the wrong type or out of range; `details` names it. */
  VALIDATION_FAILED: 'VALIDATION_FAILED',
  /** 400: `kind` is none of network, subnet, ip, compute, topic, user. */
  UNKNOWN_KIND: 'UNKNOWN_KIND',
  /** 400: (`kind`, `platform.productCode`) is not a row of the purpose table. */
  PRODUCT_CODE_MISMATCH: 'PRODUCT_CODE_MISMATCH',
  /** 404: `projectId` is not a project this sandbox created. */
  PROJECT_NOT_FOUND: 'PROJECT_NOT_FOUND',
  /** 404: a referenced id (parentBinding.targetId, network_id, natIpId, …) does not exist. */
  RESOURCE_NOT_FOUND: 'RESOURCE_NOT_FOUND',
  /** 400: a referenced id exists but is of the wrong type, in another project or network, or its CIDR differs. */
  INVALID_REFERENCE: 'INVALID_REFERENCE',
  /** 409: a topic or user of that name already exists in the cluster. */
  ALREADY_EXISTS: 'ALREADY_EXISTS',
  /** 404: unknown path. */
  NOT_FOUND: 'NOT_FOUND',
  /** 405: a method other than POST. */
  METHOD_NOT_ALLOWED: 'METHOD_NOT_ALLOWED',
  /** Injected faults: 500, 503, 429 (and `HTTP_<status>` for other scripted statuses without a body). */
  INTERNAL_ERROR: 'INTERNAL_ERROR',
  SERVICE_UNAVAILABLE: 'SERVICE_UNAVAILABLE',
  TOO_MANY_REQUESTS: 'TOO_MANY_REQUESTS',
} as const;
export type CloudSandboxErrorCode = (typeof CloudSandboxErrorCode)[keyof typeof CloudSandboxErrorCode];

export interface CloudErrorBody {
  code: string;
  domain: string;
  details: string;
}

export interface CloudSandboxOptions {
  /** Random fault probability 0..1 (the composition root passes `SANDBOX_FAULT_RATE`). Default 0. */
  faultRate?: number;
  /** Latency added to every request. Default 0. */
  latencyMs?: number;
  /** Seed for reproducible random faults. */
  faultSeed?: number;
  /** Faults the random rate picks from. Default: `RANDOM_FAULT_KINDS`. */
  randomFaultKinds?: readonly FaultKind[];
  /** How long a `'timeout'` fault holds the connection. Default 10 minutes. */
  hangMs?: number;
  /**
   * Skip body validation (benchmarks): still authenticates, checks headers, records
   * requests and replays idempotency keys; references are not checked.
   */
  fast?: boolean;
  /** `expires_in` of issued tokens, in seconds. Default 3600. */
  tokenTtlSeconds?: number;
  /** The clock tokens are issued and lapse by (tests move it instead of sleeping). Default Date.now. */
  now?: () => number;
  /** When set, the token request body must deep-equal this; otherwise any non-empty JSON object works. */
  acceptedCredentials?: unknown;
  /** Tokens accepted without `POST /iam/v2/tokens`. Default `[SANDBOX_SERVICE_ACCOUNT_TOKEN]`. */
  serviceAccountTokens?: string[];
  /**
   * Where the answers put the created id, the token and an IP's address (cloud-shapes.ts). Default
   * `DEFAULT_CLOUD_SHAPE.shape`: `id`, `access_token`, `address`.
   */
  responseShape?: CloudResponseShape;
  /** Oldest recorded requests are dropped past this count. Default 10,000. */
  maxRecordedRequests?: number;
  /** Largest accepted body. Default 1 MiB. */
  bodyLimitBytes?: number;
}

export type { RecordedRequest } from './json-api.js';

export interface IssuedToken {
  readonly token: string;
  readonly issuedAt: Date;
  readonly expiresAt: Date;
}

export interface SandboxProject {
  readonly id: string;
  readonly name: string;
  readonly description: string;
  readonly createdAt: string;
}

export interface SandboxResource {
  readonly id: string;
  /** `undefined` only in `fast` mode, for a (kind, productCode) pair of no purpose row. */
  readonly type: SandboxResourceType | undefined;
  readonly kind: string;
  readonly productCode: string;
  readonly projectId: string;
  readonly parentId?: string;
  readonly title: string;
  readonly description: string;
  /** The request's `spec` with every `password` field removed. */
  readonly spec: Record<string, unknown>;
  /** Public IPv4 address, for `ip` resources. */
  readonly address?: string;
  readonly createdAt: string;
  readonly idempotencyKey: string;
}

export interface CloudSandbox {
  /** Base URL, `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** The shape its answers take. */
  readonly responseShape: CloudResponseShape;
  close(): Promise<void>;
  /** A fault: connections to the sandbox are refused (ECONNREFUSED) until `acceptConnections`. */
  refuseConnections(): Promise<void>;
  /** Listens again on the same address after `refuseConnections`. */
  acceptConnections(): Promise<void>;
  /** Every request received, in order (the same array for the sandbox's lifetime). */
  readonly requests: readonly RecordedRequest[];
  readonly faults: FaultInjector;
  clearRequests(): void;
  /** Tokens issued by `POST /iam/v2/tokens`, oldest first. */
  readonly issuedTokens: readonly IssuedToken[];
  /** Makes every token issued so far expired (later ones are fresh). */
  expireAllTokens(): void;
  projects(): SandboxProject[];
  resources(type?: SandboxResourceType): SandboxResource[];
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

type Answer = ApiAnswer;

class ApiError extends Error {
  readonly status: number;
  readonly code: CloudSandboxErrorCode;
  readonly details: string;
  readonly headers: Record<string, string>;
  constructor(status: number, code: CloudSandboxErrorCode, details: string, headers: Record<string, string> = {}) {
    super(details);
    this.status = status;
    this.code = code;
    this.details = details;
    this.headers = headers;
  }
}

interface IdempotencyRecord {
  readonly fingerprint: string;
  readonly status: number;
  readonly body: unknown;
}

function domainOf(path: string): string {
  if (path.startsWith('/iam/')) return 'iam';
  if (path.startsWith('/apis/projects/')) return 'projects';
  if (path.startsWith('/ocs/')) return 'ocs';
  return 'sandbox';
}

function errorBody(code: string, path: string, details: string): CloudErrorBody {
  return { code, domain: domainOf(path), details };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function withoutPasswords(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutPasswords);
  if (isPlainObject(value)) {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) if (key !== 'password') out[key] = withoutPasswords(item);
    return out;
  }
  return value;
}

// Documentation ranges (RFC 5737): addresses that can never collide with a real host.
const ADDRESS_POOLS = ['203.0.113', '198.51.100', '192.0.2'];
function sandboxAddress(n: number): string {
  const pool = ADDRESS_POOLS[Math.floor(n / 254) % ADDRESS_POOLS.length]!;
  return `${pool}.${(n % 254) + 1}`;
}

export async function startCloudSandbox(options: CloudSandboxOptions = {}): Promise<CloudSandbox> {
  const fast = options.fast ?? false;
  const ttlSeconds = options.tokenTtlSeconds ?? 3600;
  const now = options.now ?? (() => Date.now());
  if (!(ttlSeconds > 0)) throw new RangeError(`tokenTtlSeconds must be > 0, got ${options.tokenTtlSeconds}`);
  const acceptedCredentials =
    options.acceptedCredentials === undefined ? undefined : canonicalJson(options.acceptedCredentials);
  const serviceAccountTokens = new Set(options.serviceAccountTokens ?? [SANDBOX_SERVICE_ACCOUNT_TOKEN]);
  const shape = options.responseShape ?? DEFAULT_CLOUD_SHAPE.shape;
  const maxRecorded = options.maxRecordedRequests ?? 10_000;
  const bodyLimit = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  const secret = randomBytes(32);

  const faults = new FaultInjector({
    rate: options.faultRate ?? 0,
    latencyMs: options.latencyMs ?? 0,
    ...(options.faultSeed === undefined ? {} : { seed: options.faultSeed }),
    ...(options.randomFaultKinds === undefined ? {} : { randomKinds: options.randomFaultKinds }),
    ...(options.hangMs === undefined ? {} : { hangMs: options.hangMs }),
    errorBody: (status, path) => errorBody(errorCodeForStatus(status), path, `injected fault: HTTP ${status}`),
  });

  const requests: Mutable<RecordedRequest>[] = [];
  const tokens = new Map<string, Mutable<IssuedToken>>();
  const projects = new Map<string, SandboxProject>();
  const resources = new Map<string, SandboxResource>();
  const idempotency = new Map<string, IdempotencyRecord>();
  let addressCounter = 0;

  function authenticate(req: IncomingMessage): void {
    const header = headerValue(req, 'authorization');
    const match = header === undefined ? null : /^Bearer +(\S+)\s*$/i.exec(header);
    const challenge = { 'www-authenticate': 'Bearer error="invalid_token"' };
    if (match === null) {
      throw new ApiError(401, CloudSandboxErrorCode.UNAUTHENTICATED, 'Authorization: Bearer <token> is required', {
        'www-authenticate': 'Bearer',
      });
    }
    const token = match[1]!;
    if (serviceAccountTokens.has(token)) return;
    const issued = tokens.get(token);
    if (issued === undefined) {
      throw new ApiError(
        401,
        CloudSandboxErrorCode.UNAUTHENTICATED,
        'the bearer token was not issued by this service',
        challenge,
      );
    }
    if (now() >= issued.expiresAt.getTime()) {
      throw new ApiError(401, CloudSandboxErrorCode.TOKEN_EXPIRED, 'the bearer token has expired', challenge);
    }
  }

  async function issueToken(body: unknown): Promise<Answer> {
    if (!isPlainObject(body)) {
      throw new ApiError(
        400,
        CloudSandboxErrorCode.VALIDATION_FAILED,
        '(body): expected a JSON object with the credentials',
      );
    }
    if (Object.keys(body).length === 0) {
      throw new ApiError(401, CloudSandboxErrorCode.INVALID_CREDENTIALS, 'credentials are empty');
    }
    if (acceptedCredentials !== undefined && canonicalJson(body) !== acceptedCredentials) {
      throw new ApiError(401, CloudSandboxErrorCode.INVALID_CREDENTIALS, 'credentials were not accepted');
    }
    const issuedAt = new Date(now());
    const expiresAt = new Date(issuedAt.getTime() + ttlSeconds * 1000);
    const token = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuer('cloud-sandbox')
      .setSubject('sandbox-user')
      .setJti(randomUUID())
      .setIssuedAt(Math.floor(issuedAt.getTime() / 1000))
      .setExpirationTime(Math.ceil(expiresAt.getTime() / 1000))
      .sign(secret);
    tokens.set(token, { token, issuedAt, expiresAt });
    return { status: 200, body: shapeToken(shape, token, Math.ceil(ttlSeconds)) };
  }

  function created(record: { id: string } & Record<string, unknown>, address?: string): unknown {
    const { id, ...rest } = record;
    const body = shapeCreated(shape, id, rest, address);
    return body;
  }

  function createProject(body: unknown): Answer {
    let name: string;
    let description: string;
    if (fast) {
      name = isPlainObject(body) && typeof body.name === 'string' ? body.name : '';
      description = isPlainObject(body) && typeof body.description === 'string' ? body.description : '';
    } else {
      const parsed = projectSchema.safeParse(body);
      if (!parsed.success) {
        throw new ApiError(400, CloudSandboxErrorCode.VALIDATION_FAILED, describeIssues(parsed.error.issues));
      }
      ({ name, description } = parsed.data);
    }
    const project: SandboxProject = { id: randomUUID(), name, description, createdAt: new Date().toISOString() };
    projects.set(project.id, project);
    return { status: 201, body: created({ ...project }) };
  }

  function requireResource(id: string, field: string, type: SandboxResourceType, projectId: string): SandboxResource {
    const found = resources.get(id);
    if (found === undefined) {
      throw new ApiError(404, CloudSandboxErrorCode.RESOURCE_NOT_FOUND, `${field}: no resource ${id}`);
    }
    if (found.type !== type) {
      throw new ApiError(
        400,
        CloudSandboxErrorCode.INVALID_REFERENCE,
        `${field}: ${id} is a ${found.type ?? found.kind}, expected a ${type}`,
      );
    }
    if (found.projectId !== projectId) {
      throw new ApiError(400, CloudSandboxErrorCode.INVALID_REFERENCE, `${field}: ${id} belongs to another project`);
    }
    return found;
  }

  function requireInNetwork(resource: SandboxResource, field: string, networkId: string): void {
    if (resource.parentId !== networkId) {
      throw new ApiError(
        400,
        CloudSandboxErrorCode.INVALID_REFERENCE,
        `${field}: ${resource.id} is not in network ${networkId}`,
      );
    }
  }

  function extension(spec: Record<string, unknown>, key: string): Record<string, unknown> {
    const value = spec[key];
    return isPlainObject(value) ? value : {};
  }

  /** Full validation of a creation envelope; returns its resource type. */
  function validateService(req: IncomingMessage, body: unknown): { envelope: Envelope; type: SandboxResourceType } {
    if (!isPlainObject(body)) {
      throw new ApiError(
        400,
        CloudSandboxErrorCode.VALIDATION_FAILED,
        '(body): expected a JSON object (the creation envelope)',
      );
    }
    const parsed = envelopeSchema.safeParse(body);
    if (!parsed.success) {
      throw new ApiError(400, CloudSandboxErrorCode.VALIDATION_FAILED, describeIssues(parsed.error.issues));
    }
    const envelope = parsed.data;
    if (!(KINDS as readonly string[]).includes(envelope.kind)) {
      throw new ApiError(
        400,
        CloudSandboxErrorCode.UNKNOWN_KIND,
        `kind: ${JSON.stringify(envelope.kind)} is not one of ${KINDS.join(', ')}`,
      );
    }
    const type = serviceTypeOf(envelope.kind, envelope.platform.productCode);
    if (type === undefined) {
      const codes = Object.values(SERVICE_TYPES)
        .filter((r) => r.kind === envelope.kind)
        .map((r) => r.productCode);
      throw new ApiError(
        400,
        CloudSandboxErrorCode.PRODUCT_CODE_MISMATCH,
        `platform.productCode: ${JSON.stringify(envelope.platform.productCode)} does not go with kind ${JSON.stringify(envelope.kind)}; expected ${codes.join(' or ')}`,
      );
    }
    const row = SERVICE_TYPES[type];
    if (row.requiresAccept && !acceptsJsonExplicitly(headerValue(req, 'accept'))) {
      throw new ApiError(
        406,
        CloudSandboxErrorCode.NOT_ACCEPTABLE,
        `Accept: application/json is required to create a ${type}`,
      );
    }
    if (row.parent === null && envelope.parentBinding !== undefined) {
      throw new ApiError(400, CloudSandboxErrorCode.VALIDATION_FAILED, `parentBinding: must be absent for a ${type}`);
    }
    if (row.parent !== null && envelope.parentBinding === undefined) {
      throw new ApiError(
        400,
        CloudSandboxErrorCode.VALIDATION_FAILED,
        `parentBinding.targetId: required for a ${type} (the ${row.parent} id)`,
      );
    }

    // Hint for the most likely mistake: `vendor: { extensions: { … } }` instead of the literal dotted key.
    if (row.dottedKey !== '' && isPlainObject(envelope.spec.vendor)) {
      throw new ApiError(
        400,
        CloudSandboxErrorCode.VALIDATION_FAILED,
        `spec.vendor: nested object not allowed; the spec key is the literal dotted key ${JSON.stringify(row.dottedKey)}`,
      );
    }
    const spec = row.spec.safeParse(envelope.spec);
    if (!spec.success) {
      throw new ApiError(400, CloudSandboxErrorCode.VALIDATION_FAILED, describeIssues(spec.error.issues, ['spec']));
    }

    if (!projects.has(envelope.projectId)) {
      throw new ApiError(404, CloudSandboxErrorCode.PROJECT_NOT_FOUND, `projectId: no project ${envelope.projectId}`);
    }
    const projectId = envelope.projectId;
    const parent =
      row.parent === null
        ? undefined
        : requireResource(envelope.parentBinding!.targetId, 'parentBinding.targetId', row.parent, projectId);

    switch (type) {
      case 'kafka-cluster': {
        const kafka = extension(spec.data, 'vendor.extensions.kafka');
        const prefix = 'spec["vendor.extensions.kafka"]';
        requireResource(String(kafka.network_id), `${prefix}.network_id`, 'network', projectId);
        const subnet = requireResource(String(kafka.subnetwork_id), `${prefix}.subnetwork_id`, 'subnet', projectId);
        requireInNetwork(subnet, `${prefix}.subnetwork_id`, String(kafka.network_id));
        const cidr = extension(subnet.spec, 'vendor.extensions.subnet').cidr;
        if (kafka.subnetwork_cidr !== cidr) {
          throw new ApiError(
            400,
            CloudSandboxErrorCode.INVALID_REFERENCE,
            `${prefix}.subnetwork_cidr: the subnet's CIDR is ${String(cidr)}`,
          );
        }
        break;
      }
      case 'kafka-topic': {
        const topic = extension(spec.data, 'vendor.extensions.topic');
        const instanceCount = extension(parent!.spec, 'vendor.extensions.kafka').instance_count;
        if (typeof instanceCount === 'number' && (topic.replication_factor as number) > instanceCount) {
          throw new ApiError(
            400,
            CloudSandboxErrorCode.VALIDATION_FAILED,
            `spec["vendor.extensions.topic"].replication_factor: exceeds the cluster's instance_count (${instanceCount})`,
          );
        }
        requireUniqueName('kafka-topic', parent!.id, 'vendor.extensions.topic', topic.name);
        break;
      }
      case 'kafka-user': {
        const user = extension(spec.data, 'vendor.extensions.user');
        requireUniqueName('kafka-user', parent!.id, 'vendor.extensions.user', user.name);
        break;
      }
      case 'virtual-machine': {
        const interfaces = (spec.data as Record<string, unknown>).networkInterfaces as Array<{
          networkId: string;
          subnetworkId: string;
          natIpId: string;
        }>;
        interfaces.forEach((nic, i) => {
          const at = `spec.networkInterfaces[${i}]`;
          requireResource(nic.networkId, `${at}.networkId`, 'network', projectId);
          requireInNetwork(
            requireResource(nic.subnetworkId, `${at}.subnetworkId`, 'subnet', projectId),
            `${at}.subnetworkId`,
            nic.networkId,
          );
          requireInNetwork(
            requireResource(nic.natIpId, `${at}.natIpId`, 'ip', projectId),
            `${at}.natIpId`,
            nic.networkId,
          );
        });
        break;
      }
      default:
        break;
    }
    return { envelope, type };
  }

  function requireUniqueName(type: SandboxResourceType, clusterId: string, key: string, name: unknown): void {
    for (const r of resources.values()) {
      if (r.type === type && r.parentId === clusterId && extension(r.spec, key).name === name) {
        throw new ApiError(
          409,
          CloudSandboxErrorCode.ALREADY_EXISTS,
          `spec[${JSON.stringify(key)}].name: ${String(name)} already exists in cluster ${clusterId}`,
        );
      }
    }
  }

  function createService(req: IncomingMessage, body: unknown, idempotencyKey: string): Answer {
    let envelope: Envelope;
    let type: SandboxResourceType | undefined;
    if (fast) {
      const loose = isPlainObject(body) ? body : {};
      const platform = isPlainObject(loose.platform) ? loose.platform : {};
      const metadata = isPlainObject(loose.metadata) ? loose.metadata : {};
      const str = (v: unknown) => (typeof v === 'string' ? v : '');
      envelope = {
        platform: { productCode: str(platform.productCode), regionCode: str(platform.regionCode) as 'msk' },
        kind: str(loose.kind),
        metadata: { title: str(metadata.title), description: str(metadata.description) },
        projectId: str(loose.projectId),
        ...(isPlainObject(loose.parentBinding)
          ? { parentBinding: { targetId: str(loose.parentBinding.targetId) } }
          : {}),
        spec: isPlainObject(loose.spec) ? loose.spec : {},
        zoneCode: str(loose.zoneCode) as 'msk-avntg',
      };
      type = serviceTypeOf(envelope.kind, envelope.platform.productCode);
    } else {
      ({ envelope, type } = validateService(req, body));
    }

    const resource: SandboxResource = {
      id: randomUUID(),
      type,
      kind: envelope.kind,
      productCode: envelope.platform.productCode,
      projectId: envelope.projectId,
      ...(envelope.parentBinding === undefined ? {} : { parentId: envelope.parentBinding.targetId }),
      title: envelope.metadata.title,
      description: envelope.metadata.description,
      spec: withoutPasswords(envelope.spec) as Record<string, unknown>,
      ...(type === 'ip' ? { address: sandboxAddress(addressCounter++) } : {}),
      createdAt: new Date().toISOString(),
      idempotencyKey,
    };
    resources.set(resource.id, resource);

    const record = {
      id: resource.id,
      kind: resource.kind,
      productCode: resource.productCode,
      projectId: resource.projectId,
      ...(resource.parentId === undefined ? {} : { parentBinding: { targetId: resource.parentId } }),
      status: 'CREATING',
      metadata: { title: resource.title, description: resource.description },
      regionCode: envelope.platform.regionCode,
      zoneCode: envelope.zoneCode,
      createdAt: resource.createdAt,
    };
    return { status: 201, body: created(record, resource.address) };
  }

  /** "Every request that creates an object carries the header Idempotency-Key" (What the service does, 3). */
  function createOnce(req: IncomingMessage, path: string, body: unknown, create: (key: string) => Answer): Answer {
    const key = headerValue(req, 'idempotency-key');
    if (key === undefined || key.trim() === '') {
      throw new ApiError(
        400,
        CloudSandboxErrorCode.IDEMPOTENCY_KEY_MISSING,
        'Idempotency-Key: header is required on creation',
      );
    }
    if (!isUuid(key)) {
      throw new ApiError(400, CloudSandboxErrorCode.IDEMPOTENCY_KEY_INVALID, 'Idempotency-Key: must be a UUID');
    }
    const normalizedKey = key.toLowerCase();
    const fingerprint = createHash('sha256')
      .update(`POST ${path}\n${canonicalJson(body)}`)
      .digest('hex');
    const prior = idempotency.get(normalizedKey);
    if (prior !== undefined) {
      if (prior.fingerprint !== fingerprint) {
        throw new ApiError(
          409,
          CloudSandboxErrorCode.IDEMPOTENCY_KEY_CONFLICT,
          'Idempotency-Key: already used with a different request',
        );
      }
      return { status: prior.status, body: prior.body, headers: { 'idempotent-replayed': 'true' }, replayed: true };
    }
    const answer = create(normalizedKey);
    // Only successful creations are remembered: a refused request created nothing, so its key stays free.
    idempotency.set(normalizedKey, { fingerprint, status: answer.status, body: answer.body });
    return answer;
  }

  async function route(req: IncomingMessage, path: string, body: unknown, malformed: boolean): Promise<Answer> {
    if (path !== TOKEN_PATH && path !== PROJECTS_PATH && path !== SERVICES_PATH) {
      throw new ApiError(404, CloudSandboxErrorCode.NOT_FOUND, `no route for ${path}`);
    }
    if (req.method !== 'POST') {
      throw new ApiError(
        405,
        CloudSandboxErrorCode.METHOD_NOT_ALLOWED,
        `${req.method ?? ''} ${path}: only POST is supported`,
        { allow: 'POST' },
      );
    }
    if (path !== TOKEN_PATH) authenticate(req);
    if (!isJsonMediaType(headerValue(req, 'content-type'))) {
      throw new ApiError(415, CloudSandboxErrorCode.UNSUPPORTED_MEDIA_TYPE, 'Content-Type: must be application/json');
    }
    if (malformed) throw new ApiError(400, CloudSandboxErrorCode.MALFORMED_JSON, '(body): not valid JSON');
    if (path === TOKEN_PATH) return issueToken(body);
    if (path === PROJECTS_PATH) return createOnce(req, path, body, () => createProject(body));
    return createOnce(req, path, body, (key) => createService(req, body, key));
  }

  const handle = createJsonApiHandler({
    faults,
    requests,
    maxRecorded,
    bodyLimitBytes: bodyLimit,
    route: ({ req, path, body, malformed }) => route(req, path, body, malformed),
    errorBody: (code, message, path) => errorBody(code, path, message),
    toAnswer: (error, path) =>
      error instanceof ApiError
        ? { status: error.status, body: errorBody(error.code, path, error.details), headers: error.headers }
        : undefined,
  });

  const server = await startLoopbackServer(handle, {
    onHandlerError: (_error, req, res) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      sendJson(res, 500, errorBody(CloudSandboxErrorCode.INTERNAL_ERROR, requestPath(req), 'unexpected sandbox error'));
    },
  });

  return {
    url: server.url,
    responseShape: shape,
    close: () => server.close(),
    refuseConnections: () => server.refuse(),
    acceptConnections: () => server.accept(),
    requests,
    faults,
    clearRequests() {
      requests.length = 0;
    },
    get issuedTokens() {
      return [...tokens.values()].map((t) => ({ ...t }));
    },
    expireAllTokens() {
      const now = new Date(Date.now() - 1);
      for (const t of tokens.values()) t.expiresAt = now;
    },
    projects: () => [...projects.values()],
    resources: (type) => [...resources.values()].filter((r) => type === undefined || r.type === type),
  };
}
