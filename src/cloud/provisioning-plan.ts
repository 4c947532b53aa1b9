import { GraphQLError } from 'graphql';
import type { Caller } from '../caller.js';
import { ErrorCode } from '../errors.js';
import type { ProvisionKafkaClusterInput, ProvisionVirtualMachineInput } from '../generated/graphql.js';
import type { LedgerRecord } from '../store/ledger.js';
import { upstreamKey } from '../upstream/idempotency.js';
import { creationHeaders } from './client.js';
import {
  checkBounds,
  shapeChecks,
  stepIdempotencyKey,
  type PlannedStep,
  type ProvisioningKind,
  type ProvisioningService,
  type StepEnv,
} from './provisioning.js';
import type { CloudService, Creation } from './service.js';
import { maskSecrets } from './wire.js';

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

export interface PlanReference {
  placeholder: string;
  step: string;
  /** What replaces the placeholder at run time: the step's created `id`, or the IP's `address`. */
  value: 'id' | 'address';
}

export interface ProvisioningPlan {
  kind: ProvisioningKind;
  /** True when no step and no input check has an error: the provisioning would send every request. */
  valid: boolean;
  idempotencyKey: string | null;
  steps: PlanStep[];
  /** Errors of the input as a whole (both or neither of an id and a spec, a topic listed twice). */
  errors: PlanError[];
  defaults: PlanDefault[];
  references: PlanReference[];
}

/**
 * An IP address planned in the same provisioning has no address until the upstream answers. The planned
 * IP's stand-in response carries this documentation address (RFC 5737) so that the cluster step runs the
 * same validation and wire mapping as at run time; the plan then shows `{{ipAddress.address}}` in its place.
 */
const ADDRESS_STAND_IN = '192.0.2.255';
const ADDRESS_PLACEHOLDER = '{{ipAddress.address}}';
/** The key used to build the requests when the caller gives none (the header then says so). */
const NO_KEY = '00000000-0000-4000-8000-000000000000';
const KEY_AT_RUN_TIME = '(derived at run time from the idempotency key; pass idempotencyKey to see it)';

/** Fields the provisioning fills from earlier steps: errors on them belong to the composite input's own field. */
const FILLED: Record<string, string> = {
  'input.projectId': 'input.projectId',
  'input.networkId': 'input.networkId',
  'input.subnetId': 'input.subnetId',
  'input.subnetCidr': 'input.subnetCidr',
  'input.region': 'input.region',
  'input.zone': 'input.zone',
  'input.networkInterfaces[0].networkId': 'input.networkId',
  'input.networkInterfaces[0].subnetId': 'input.subnetId',
  'input.networkInterfaces[0].ipAddressId': 'input.ipAddressId',
};

interface Run {
  steps: Array<{ planned: PlannedStep; step: PlanStep; body: string | null }>;
  addressUsed: boolean;
}

/**
 * Provisioning plans (docs/decisions/024): the steps of provisionKafkaCluster / provisionVirtualMachine,
 * built by the same code (ProvisioningService's step lists, CloudService's validation and wire mapping,
 * CloudClient's headers), run against a cloud whose creations are recorded instead of sent. Nothing is
 * sent upstream and nothing is written: planned resources live in a per-plan overlay of the ledger.
 */
export class ProvisioningPlanner {
  /** Steps run against the recording cloud since start: the work a plan costs (a test holds it linear). */
  stepsRun = 0;

  constructor(
    private readonly provisioning: ProvisioningService,
    private readonly cloud: CloudService,
    private readonly lookup: (id: string) => Promise<LedgerRecord | null>,
  ) {}

  planKafkaCluster(caller: Caller, input: ProvisionKafkaClusterInput, key?: string | null): Promise<ProvisioningPlan> {
    return this.plan(caller, 'KAFKA_CLUSTER', input, key ?? null, (env, i) => this.provisioning.kafkaClusterSteps(caller, i as ProvisionKafkaClusterInput, env));
  }

  planVirtualMachine(caller: Caller, input: ProvisionVirtualMachineInput, key?: string | null): Promise<ProvisioningPlan> {
    return this.plan(caller, 'VIRTUAL_MACHINE', input, key ?? null, (env, i) => this.provisioning.virtualMachineSteps(caller, i as ProvisionVirtualMachineInput, env));
  }

  private async plan(
    caller: Caller,
    kind: ProvisioningKind,
    input: ProvisionKafkaClusterInput | ProvisionVirtualMachineInput,
    key: string | null,
    stepsOf: (env: StepEnv, input: object) => PlannedStep[],
  ): Promise<ProvisioningPlan> {
    checkBounds(input, this.provisioning.bounds);
    const errors: PlanError[] = [];
    for (const check of shapeChecks(input, kind === 'KAFKA_CLUSTER')) {
      try {
        check();
      } catch (err) {
        errors.push(planError(err, null));
      }
    }
    // Without one id or one spec per placement step there are no steps to show.
    if (errors.some((e) => e.field && !/^input\.(topics|users)$/.test(e.field))) {
      return { kind, valid: false, idempotencyKey: key, steps: [], errors, defaults: [], references: [] };
    }
    const base = await this.dryRun(caller, input, key, stepsOf);

    // A field holds a default when leaving it out changes no request: the same validation and mapping decide it,
    // so the plan never keeps its own copy of the defaults. A field of one topic or user changes that step's request
    // only, so it is tried against a plan of that element alone: the work stays linear in the number of topics and
    // users (a dry run of the whole plan per field was quadratic).
    const defaults: PlanDefault[] = [];
    const alone = new Map<string, { input: object; run: Run }>();
    for (const path of leafPaths(input, 'input')) {
      // The dry runs resolve as microtasks (the overlay, the ledger's synchronous reads): give the event loop a turn
      // between them, so that other requests and webhooks are served while a large plan is worked out.
      await new Promise<void>((resolve) => setImmediate(resolve));
      const [list, index] = path.keys;
      let variant: Run | null;
      let compare: Array<{ base: string | null; variant: string | null }>;
      if ((list === 'topics' || list === 'users') && typeof index === 'number' && path.keys.length > 2) {
        const id = `${list}[${index}]`;
        let one = alone.get(id);
        if (!one) {
          const only = { ...input, topics: list === 'topics' ? [(input as ProvisionKafkaClusterInput).topics![index]!] : [], users: list === 'users' ? [(input as ProvisionKafkaClusterInput).users![index]!] : [] };
          one = { input: only, run: await this.dryRun(caller, only, key, stepsOf) };
          alone.set(id, one);
        }
        const local: Path = { text: path.text, keys: [list, 0, ...path.keys.slice(2)] };
        variant = await this.dryRun(caller, without(one.input, local), key, stepsOf).catch(() => null);
        const base = one.run;
        compare = variant && variant.steps.length === base.steps.length ? base.steps.map((st, i) => ({ base: st.body, variant: variant!.steps[i]!.body })) : [];
        if (!variant || compare.length === 0) continue;
      } else {
        variant = await this.dryRun(caller, without(input, path), key, stepsOf).catch(() => null);
        if (!variant || variant.steps.length !== base.steps.length) continue;
        compare = base.steps.map((st, i) => ({ base: st.body, variant: variant!.steps[i]!.body }));
      }
      const same = compare.every((c) => c.base === null || c.base === c.variant);
      if (same && compare.some((c) => c.base !== null)) defaults.push({ field: path.text, value: valueAt(input, path) });
    }
    const prefixes = stepPrefixes(input);
    for (const { step } of base.steps) {
      const prefix = prefixes.get(step.name);
      step.defaults = prefix ? defaults.filter((d) => d.field.startsWith(prefix + '.') || d.field.startsWith(prefix + '[')) : [];
    }

    const steps = base.steps.map((s) => s.step);
    const references: PlanReference[] = steps
      .filter((s) => s.action === 'CREATE')
      .map((s) => ({ placeholder: placeholder(s.name), step: s.name, value: 'id' as const }));
    if (base.addressUsed) references.push({ placeholder: ADDRESS_PLACEHOLDER, step: 'ipAddress', value: 'address' });
    const valid = errors.length === 0 && steps.every((s) => s.errors.length === 0);
    return { kind, valid, idempotencyKey: key, steps, errors, defaults, references };
  }

  /** Runs every step against the recording cloud: one request per created resource, one error list per step. */
  private async dryRun(caller: Caller, input: object, key: string | null, stepsOf: (env: StepEnv, input: object) => PlannedStep[]): Promise<Run> {
    const overlay = new Map<string, LedgerRecord>();
    let recorded: { creation: Creation; key: string } | null = null;
    let current = '';
    const cloud = this.cloud.withDryRun({
      lookup: async (id) => overlay.get(id) ?? null,
      async create(who, k, creation) {
        const id = placeholder(current);
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
        return { record, idempotencyKey: k!, upstreamIdempotencyKey: upstreamKey(who.scope, k!), replayed: false };
      },
    });
    // A planned IP address answers with the stand-in; one in the ledger is read as the gateway reads its answers.
    const address: StepEnv['address'] = {
      read: (response) =>
        (response as { address?: unknown } | null)?.address === ADDRESS_STAND_IN && Object.keys(response as object).length === 1
          ? { address: ADDRESS_STAND_IN, field: 'address' }
          : this.cloud.addressOf({ response }),
      lookedFor: this.cloud.describeShapes().address,
    };
    const env: StepEnv = { cloud, lookup: async (id) => overlay.get(id) ?? this.lookup(id), address };
    const planned = stepsOf(env, input);
    this.stepsRun += planned.length;
    const ids = new Map<string, string>();
    const out: Run = { steps: [], addressUsed: false };
    // The stand-in address can only reach a body when the cluster reads it from an IP planned here.
    const addressPlanned = (input as ProvisionKafkaClusterInput).cluster?.publicIp == null;
    for (const [n, p] of planned.entries()) {
      // A long list of topics: a turn for the event loop every few steps (see plan()).
      if (n > 0 && n % 16 === 0) await new Promise<void>((resolve) => setImmediate(resolve));
      const step: PlanStep = { name: p.name, action: 'CREATE', resourceId: null, inLedger: false, request: null, defaults: [], errors: [] };
      if (p.skip) {
        out.steps.push({ planned: p, step: { ...step, action: 'SKIP' }, body: null });
        continue;
      }
      if (p.reuse) {
        ids.set(p.name, p.reuse);
        out.steps.push({ planned: p, step: { ...step, action: 'REUSE', resourceId: p.reuse, inLedger: (await this.lookup(p.reuse)) !== null }, body: null });
        continue;
      }
      current = p.name;
      recorded = null;
      const stepKey = stepIdempotencyKey({ scope: caller.scope, idempotencyKey: key ?? NO_KEY }, p.name);
      step.resourceId = placeholder(p.name);
      ids.set(p.name, step.resourceId);
      let body: string | null = null;
      try {
        await p.run!(ids, stepKey);
        const { creation, key: k } = recorded as unknown as { creation: Creation; key: string };
        const masked = maskSecrets(creation.request.body);
        const shown = addressPlanned && overlay.has(placeholder('ipAddress')) ? replaceAddress(masked) : { body: masked, replaced: false };
        if (shown.replaced) out.addressUsed = true;
        const headers = Object.entries(creationHeaders(creation.accept, key ? upstreamKey(caller.scope, k) : KEY_AT_RUN_TIME)).map(([name, value]) => ({ name, value }));
        headers.push({ name: 'authorization', value: 'Bearer ***' });
        step.request = { method: 'POST', path: creation.request.path, headers, body: shown.body };
        body = JSON.stringify(shown.body);
      } catch (err) {
        const prefix = stepPrefixes(input as ProvisionKafkaClusterInput).get(p.name) ?? null;
        step.errors.push(planError(err, prefix));
        // The failed step stands in with what the caller gave, so that later steps are checked against it
        // (a topic against its cluster's instance count) instead of failing for its absence.
        const kind = STEP_KINDS[p.name.split(':')[0]!];
        if (kind && prefix) {
          const parent = kind === 'subnet' || kind === 'ip_address' ? ids.get('network') : kind === 'kafka_topic' || kind === 'kafka_user' ? ids.get('kafkaCluster') : undefined;
          const given = (stepInput(input, p.name) ?? {}) as Record<string, unknown>;
          overlay.set(step.resourceId, {
            id: step.resourceId,
            kind,
            projectId: ids.get('project') ?? null,
            parentId: parent ?? null,
            title: null,
            spec: { ...given, projectId: ids.get('project'), networkId: ids.get('network'), subnetId: ids.get('subnet') },
            response: null,
            idempotencyKey: null,
            createdBy: caller.scope,
            createdAt: new Date(0),
          });
        }
      }
      out.steps.push({ planned: p, step, body });
    }
    return out;
  }
}

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

function placeholder(step: string): string {
  return `{{${step}.id}}`;
}

/** The composite input's field of each step's own input. */
function stepPrefixes(input: ProvisionKafkaClusterInput | ProvisionVirtualMachineInput): Map<string, string> {
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

/** The part of the composite input a step creates its resource from. */
function stepInput(input: object, step: string): unknown {
  const k = input as ProvisionKafkaClusterInput & ProvisionVirtualMachineInput;
  const [kind, name] = step.split(':');
  if (kind === 'topic') return k.topics?.find((t) => t.name === name);
  if (kind === 'user') return k.users?.find((u) => u.name === name);
  const field = { kafkaCluster: 'cluster' }[kind!] ?? kind!;
  return (k as unknown as Record<string, unknown>)[field];
}

/** A step's error with its field named as in the composite input (`input.network.cidr`, `input.subnetId`). */
function planError(err: unknown, prefix: string | null): PlanError {
  if (!(err instanceof GraphQLError)) return { field: null, code: ErrorCode.INTERNAL_SERVER_ERROR, message: 'internal error' };
  const code = String(err.extensions.code ?? ErrorCode.INTERNAL_SERVER_ERROR);
  const raw = typeof err.extensions.field === 'string' ? err.extensions.field : null;
  let field = raw;
  if (raw && prefix && !raw.startsWith(prefix + '.')) field = FILLED[raw] ?? raw.replace(/^input/, prefix);
  const message = raw && field !== raw ? `${field}: ${err.message.replace(/^[^:]*: /, '')}` : err.message;
  return { field, code, message };
}

interface Path {
  text: string;
  keys: Array<string | number>;
}

/** Every optional-looking leaf of the input: scalars, arrays, and the fields of objects inside arrays. */
function leafPaths(value: unknown, text: string, keys: Array<string | number> = []): Path[] {
  if (Array.isArray(value)) {
    const own: Path[] = keys.length ? [{ text, keys }] : [];
    return [...own, ...value.flatMap((v, i) => (v && typeof v === 'object' ? leafPaths(v, `${text}[${i}]`, [...keys, i]) : []))];
  }
  if (value && typeof value === 'object') {
    return Object.entries(value as Record<string, unknown>).flatMap(([k, v]) => (v == null ? [] : leafPaths(v, `${text}.${k}`, [...keys, k])));
  }
  return keys.length ? [{ text, keys }] : [];
}

function valueAt(value: unknown, path: Path): unknown {
  return path.keys.reduce<unknown>((v, k) => (v as Record<string | number, unknown>)[k], value);
}

function without<T>(value: T, path: Path): T {
  const copy = structuredClone(value) as Record<string | number, unknown>;
  const parent = path.keys.slice(0, -1).reduce<Record<string | number, unknown>>((v, k) => v[k] as Record<string | number, unknown>, copy);
  delete parent[path.keys[path.keys.length - 1]!];
  return copy as T;
}

function replaceAddress(body: unknown): { body: unknown; replaced: boolean } {
  let replaced = false;
  const walk = (v: unknown): unknown => {
    if (v === ADDRESS_STAND_IN) {
      replaced = true;
      return ADDRESS_PLACEHOLDER;
    }
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  const out = walk(body);
  return { body: out, replaced };
}

/** The name the generated resolver types use for a plan (avoids a clash with the GraphQL type). */
export type ProvisioningPlanModel = ProvisioningPlan;
