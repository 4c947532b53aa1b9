// A provisioning's steps run by their own code (ProvisioningService's step lists, CloudService's validation and wire
// mapping) against a cloud that records each creation instead of sending it: nothing is sent and nothing is written,
// the resources the steps create standing in as the ledger records they will be. A plan shows what the run built
// (docs/decisions/024); provisionKafkaCluster and provisionVirtualMachine refuse an input at the first step that
// fails in it, before their first creation.
import { GraphQLError } from 'graphql';

import type { Caller } from '../auth/caller.js';
import { creationHeaders } from '../cloud/client.js';
import type { CloudService, Creation } from '../cloud/service.js';
import { maskSecrets } from '../cloud/wire.js';
import { ErrorCode, GatewayError, raisedOnPurpose } from '../errors.js';
import type { ProvisionKafkaClusterInput, ProvisionVirtualMachineInput } from '../generated/graphql.js';
import type { LedgerRecord } from '../store/ledger.js';
import { upstreamKey } from '../upstream/idempotency.js';
import { stepIdempotencyKey, type PlannedStep, type StepEnv } from './model.js';

export type PlanAction = 'CREATE' | 'REUSE' | 'SKIP';

export interface PlanHeader {
  name: string;
  value: string;
}

export interface PlanRequest {
  method: 'POST';
  path: string;
  headers: PlanHeader[];
  /** The body as sent, secrets masked; ids of resources created by earlier steps are `{{<step>.id}}`. */
  body: unknown;
}

export interface PlanDefault {
  field: string;
  value: unknown;
}

export interface PlanError {
  field: string | null;
  code: string;
  message: string;
}

export interface PlanStep {
  name: string;
  action: PlanAction;
  /** REUSE: the given id; CREATE: its placeholder in later bodies. */
  resourceId: string | null;
  /** REUSE: whether the gateway's ledger has the resource (else it was made outside the gateway). */
  inLedger: boolean;
  request: PlanRequest | null;
  defaults: PlanDefault[];
  errors: PlanError[];
}

/**
 * An IP address planned in the same provisioning has no address until the upstream answers. The planned
 * IP's stand-in response carries this documentation address (RFC 5737) so that the cluster step runs the
 * same validation and wire mapping as at run time; the plan then shows `{{ipAddress.address}}` in its place.
 */
const ADDRESS_STAND_IN = '192.0.2.255';
export const ADDRESS_PLACEHOLDER = '{{ipAddress.address}}';
/** The key used to build the requests when the caller gives none (the header then says so). */
const NO_KEY = '00000000-0000-4000-8000-000000000000';
const KEY_AT_RUN_TIME = '(derived at run time from the idempotency key; pass idempotencyKey to see it)';

/**
 * One step of a dry run: the step as the plan shows it, its request body as JSON, and what it threw (the body null, the
 * error in `step.errors` as a plan shows it).
 */
interface RunStep {
  step: PlanStep;
  body: string | null;
  error?: unknown;
}

export interface Run {
  /** The names of every step the input plans, in order (steps outside the run's range included). */
  names: string[];
  /** By index in `names`: the steps the run ran (its range); the others are absent. */
  steps: Array<RunStep | undefined>;
  addressUsed: boolean;
  /** The planned resources the run recorded, by stand-in id. */
  overlay: Map<string, LedgerRecord>;
  /** How many steps it ran. */
  ran: number;
}

/** What the dry runs of one plan (or one provisioning's check) share: who asks, the step lists, the ledger as read. */
export interface Session {
  caller: Caller;
  key: string | null;
  /** The cloud whose creations each run records instead of sending (CloudService.withDryRun). */
  cloud: CloudService;
  stepsOf: (env: StepEnv, input: object) => PlannedStep[];
  /** The ledger's records, each id read once per session. */
  lookup: (id: string) => Promise<LedgerRecord | null>;
  address: StepEnv['address'];
  /** The id a resource a step creates stands in with in the later steps' inputs, and so in their errors. */
  standIn: (step: string) => string;
  /** Between two steps: the wait for the event loop's next turn, when this one is used up (a plan's PlanTurns). */
  pause?: () => Promise<void> | undefined;
}

/**
 * A session over `cloud` and the ledger's `lookup`: each id read once, and a planned IP address read as having the
 * stand-in address, one in the ledger as the gateway reads its answers.
 */
export function session(o: Omit<Session, 'address'>): Session {
  const read = new Map<string, Promise<LedgerRecord | null>>();
  return {
    ...o,
    lookup: (id) => {
      let record = read.get(id);
      if (!record) read.set(id, (record = o.lookup(id)));
      return record;
    },
    address: {
      read: (response) =>
        (response as { address?: unknown } | null)?.address === ADDRESS_STAND_IN &&
        Object.keys(response as object).length === 1
          ? { address: ADDRESS_STAND_IN, field: 'address' }
          : o.cloud.addressOf({ response }),
      lookedFor: o.cloud.describeShapes().address,
    },
  };
}

/**
 * Runs the steps of `range` (default: all; it is given the names of every step `input` plans) by their own code against
 * a cloud that records each creation instead of sending it: one request per created resource, one error list per step,
 * the resources created standing in (`standIn`) as the ledger records they will be. The steps before the range are
 * taken as planned: their ids, and their records from `under` (the whole plan's run). `full` builds what the plan shows
 * (headers, the step's Idempotency-Key); otherwise only the bodies are compared, and nothing else is built.
 */
export async function dryRun(
  s: Session,
  input: object,
  o: { full: boolean; range?: (names: string[]) => [number, number]; under?: Map<string, LedgerRecord> },
): Promise<Run> {
  const { caller, key } = s;
  const overlay = new Map<string, LedgerRecord>();
  let under: Map<string, LedgerRecord> | undefined;
  const planned = (id: string) => overlay.get(id) ?? under?.get(id) ?? null;
  let recorded: { creation: Creation; key: string } | null = null;
  let current = '';
  const full = o.full;
  const cloud = s.cloud.withDryRun({
    lookup: async (id) => planned(id) ?? s.lookup(id),
    async create(who, k, creation) {
      const id = s.standIn(current);
      const record: LedgerRecord = {
        id,
        kind: creation.kind,
        projectId: creation.kind === 'project' ? id : creation.projectId,
        parentId: creation.parentId,
        title: creation.title,
        spec: creation.spec as Record<string, unknown>,
        response: creation.kind === 'ip_address' ? { address: ADDRESS_STAND_IN } : null,
        idempotencyKey: k ?? null,
        createdBy: who.scope,
        createdAt: new Date(0),
      };
      overlay.set(id, record);
      recorded = { creation, key: k! };
      return {
        result: record,
        idempotencyKey: k!,
        upstreamIdempotencyKey: full ? upstreamKey(who.scope, k!) : '',
        replayed: false,
      };
    },
  });
  const env: StepEnv = { cloud, lookup: async (id) => planned(id) ?? s.lookup(id), address: s.address };
  const steps = s.stepsOf(env, input);
  const names = steps.map((p) => p.name);
  const [from, to] = o.range?.(names) ?? [0, steps.length];
  // The steps before the range are as in the whole plan's run: their ids as planned, their records from it.
  if (from > 0) under = o.under;
  const ids = new Map<string, string>();
  for (const p of steps.slice(0, from)) if (!p.skip) ids.set(p.name, p.reuse ?? s.standIn(p.name));
  const out: Run = { names, steps: [], addressUsed: false, overlay, ran: Math.max(0, to - from) };
  // The stand-in address can only reach a body when the cluster reads it from an IP planned here.
  const addressPlanned = (input as ProvisionKafkaClusterInput).cluster?.publicIp == null;
  let prefixes: Map<string, string> | null = null;
  let given: Map<string, unknown> | null = null;
  for (let n = from; n < to; n++) {
    const p = steps[n]!;
    // Between two steps: the loop goes to I/O and the other plans when this plan's turn is used up.
    const wait = s.pause?.();
    if (wait) await wait;
    const step: PlanStep = {
      name: p.name,
      action: 'CREATE',
      resourceId: null,
      inLedger: false,
      request: null,
      defaults: [],
      errors: [],
    };
    if (p.skip) {
      out.steps[n] = { step: { ...step, action: 'SKIP' }, body: null };
      continue;
    }
    if (p.reuse) {
      ids.set(p.name, p.reuse);
      out.steps[n] = {
        step: { ...step, action: 'REUSE', resourceId: p.reuse, inLedger: full && (await s.lookup(p.reuse)) !== null },
        body: null,
      };
      continue;
    }
    current = p.name;
    recorded = null;
    const stepKey = full ? stepIdempotencyKey({ scope: caller.scope, idempotencyKey: key ?? NO_KEY }, p.name) : NO_KEY;
    step.resourceId = s.standIn(p.name);
    ids.set(p.name, step.resourceId);
    let body: string | null = null;
    try {
      await p.run!(ids, stepKey);
      const { creation, key: k } = recorded as unknown as { creation: Creation; key: string };
      if (full) {
        const masked = maskSecrets(creation.request.body);
        const shown =
          addressPlanned && planned(s.standIn('ipAddress'))
            ? replaceAddress(masked)
            : { body: masked, replaced: false };
        if (shown.replaced) out.addressUsed = true;
        const headers = Object.entries(
          creationHeaders(creation.accept, key ? upstreamKey(caller.scope, k) : KEY_AT_RUN_TIME),
        ).map(([name, value]) => ({ name, value }));
        headers.push({ name: 'authorization', value: 'Bearer ***' });
        step.request = { method: 'POST', path: creation.request.path, headers, body: shown.body };
      }
      // Compared as sent: a field whose absence changed only a secret's value would change the request too. Kept in
      // memory for the comparison only, never shown.
      body = JSON.stringify(creation.request.body);
    } catch (err) {
      out.steps[n] = { step, body: null, error: err };
      prefixes ??= stepPrefixes(input as ProvisionKafkaClusterInput);
      const prefix = prefixes.get(p.name) ?? null;
      step.errors.push(planError(err, prefix));
      // The failed step stands in with what the caller gave, so that later steps are checked against it
      // (a topic against its cluster's instance count) instead of failing for its absence.
      const kind = STEP_KINDS[p.name.split(':')[0]!];
      if (kind && prefix) {
        const parent =
          kind === 'subnet' || kind === 'ip_address'
            ? ids.get('network')
            : kind === 'kafka_topic' || kind === 'kafka_user'
              ? ids.get('kafkaCluster')
              : undefined;
        given ??= stepInputs(input);
        const mine = (given.get(p.name) ?? {}) as Record<string, unknown>;
        overlay.set(step.resourceId, {
          id: step.resourceId,
          kind,
          projectId: ids.get('project') ?? null,
          parentId: parent ?? null,
          title: null,
          spec: {
            ...mine,
            projectId: ids.get('project'),
            networkId: ids.get('network'),
            subnetId: ids.get('subnet'),
          },
          response: null,
          idempotencyKey: null,
          createdBy: caller.scope,
          createdAt: new Date(0),
        });
      }
    }
    out.steps[n] ??= { step, body };
  }
  return out;
}

/** Fields a step's input takes from the composite input's top level or from earlier steps: errors name those. */
const FILLED: Record<string, string> = {
  'input.projectId': 'input.projectId',
  'input.networkId': 'input.networkId',
  'input.subnetId': 'input.subnetId',
  'input.subnetCidr': 'input.subnetCidr',
  'input.ipAddressId': 'input.ipAddressId',
  'input.region': 'input.region',
  'input.zone': 'input.zone',
  'input.networkInterfaces[0].networkId': 'input.networkId',
  'input.networkInterfaces[0].subnetId': 'input.subnetId',
  'input.networkInterfaces[0].ipAddressId': 'input.ipAddressId',
};

const STEP_KINDS: Record<string, LedgerRecord['kind']> = {
  project: 'project',
  network: 'network',
  subnet: 'subnet',
  ipAddress: 'ip_address',
  kafkaCluster: 'kafka_cluster',
  topic: 'kafka_topic',
  user: 'kafka_user',
  virtualMachine: 'virtual_machine',
};

/** The composite input's field of each step's own input. */
export function stepPrefixes(input: ProvisionKafkaClusterInput | ProvisionVirtualMachineInput): Map<string, string> {
  const k = input as ProvisionKafkaClusterInput;
  return new Map<string, string>([
    ['project', 'input.project'],
    ['network', 'input.network'],
    ['subnet', 'input.subnet'],
    ['ipAddress', 'input.ipAddress'],
    ['kafkaCluster', 'input.cluster'],
    ['virtualMachine', 'input.virtualMachine'],
    ...(k.topics ?? []).map((t, i) => [`topic:${t.name}`, `input.topics[${i}]`] as [string, string]),
    ...(k.users ?? []).map((u, i) => [`user:${u.name}`, `input.users[${i}]`] as [string, string]),
  ]);
}

/** The part of the composite input each step creates its resource from, by step name (the first of a name listed twice). */
function stepInputs(input: object): Map<string, unknown> {
  const k = input as ProvisionKafkaClusterInput & ProvisionVirtualMachineInput;
  const parts = new Map<string, unknown>([
    ['project', k.project],
    ['network', k.network],
    ['subnet', k.subnet],
    ['ipAddress', k.ipAddress],
    ['kafkaCluster', k.cluster],
    ['virtualMachine', k.virtualMachine],
  ]);
  for (const t of k.topics ?? []) if (!parts.has(`topic:${t.name}`)) parts.set(`topic:${t.name}`, t);
  for (const u of k.users ?? []) if (!parts.has(`user:${u.name}`)) parts.set(`user:${u.name}`, u);
  return parts;
}

/**
 * A step's error with its field named as in the composite input (`input.network.cidr`, `input.subnetId`): a field the
 * provisioning fills (FILLED) as the composite input's own, the step's own under its `prefix`. Others as they are.
 */
export function relabeled(err: unknown, prefix: string | null): unknown {
  if (!(err instanceof GraphQLError) || prefix === null) return err;
  const raw = err.extensions.field;
  if (typeof raw !== 'string' || raw.startsWith(prefix + '.')) return err;
  const field = FILLED[raw] ?? raw.replace(/^input/, prefix);
  if (field === raw) return err;
  const code = String(err.extensions.code ?? ErrorCode.INTERNAL_SERVER_ERROR) as ErrorCode;
  return new GatewayError(code, `${field}: ${err.message.replace(/^[^:]*: /, '')}`, { ...err.extensions, field });
}

/**
 * A step's error as a plan shows it, its field named as in the composite input (`relabeled`): only an error the
 * gateway raised on purpose with a code of the contract. Anything else is thrown on, for the operation's answer to
 * mask and log as every unexpected error is (docs/contract.md, Error codes).
 */
export function planError(err: unknown, prefix: string | null): PlanError {
  const e = relabeled(err, prefix);
  if (!raisedOnPurpose(e)) throw err;
  const field = e.extensions.field;
  return { field: typeof field === 'string' ? field : null, code: e.extensions.code, message: e.message };
}

function replaceAddress(body: unknown): { body: unknown; replaced: boolean } {
  let replaced = false;
  const walk = (v: unknown): unknown => {
    if (v === ADDRESS_STAND_IN) {
      replaced = true;
      return ADDRESS_PLACEHOLDER;
    }
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object')
      return Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  const out = walk(body);
  return { body: out, replaced };
}
