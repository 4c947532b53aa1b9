import { GraphQLError } from 'graphql';

import type { Caller } from '../auth/caller.js';
import { creationHeaders } from '../cloud/client.js';
import type { CloudService, Creation } from '../cloud/service.js';
import { maskSecrets } from '../cloud/wire.js';
import { ErrorCode, GatewayError } from '../errors.js';
import type { ProvisionKafkaClusterInput, ProvisionVirtualMachineInput } from '../generated/graphql.js';
import type { LedgerRecord } from '../store/ledger.js';
import { upstreamKey } from '../upstream/idempotency.js';
import { PlanTurns } from './plan-turns.js';
import {
  checkBounds,
  compositeField,
  shapeChecks,
  stepIdempotencyKey,
  type PlannedStep,
  type ProvisioningKind,
  type ProvisioningService,
  type StepEnv,
} from './service.js';

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

/** One step of a dry run: the step as the plan shows it, and its request body as JSON (null when the step failed). */
interface RunStep {
  step: PlanStep;
  body: string | null;
}

interface Run {
  /** The names of every step the input plans, in order (steps outside the run's range included). */
  names: string[];
  /** By index in `names`: the steps the run ran (its range); the others are absent. */
  steps: Array<RunStep | undefined>;
  addressUsed: boolean;
  /** The planned resources the run recorded, by placeholder id. */
  overlay: Map<string, LedgerRecord>;
}

/** What one plan's dry runs share: who asks, the step lists, and the ledger as the plan read it. */
interface Session {
  caller: Caller;
  key: string | null;
  stepsOf: (env: StepEnv, input: object) => PlannedStep[];
  /** The ledger's records, each id read once per plan. */
  lookup: (id: string) => Promise<LedgerRecord | null>;
  address: StepEnv['address'];
}

/**
 * A plan costs one read point (RATE_LIMIT_READS) per this many fields of its input, rounded up (docs/decisions/053):
 * the query's own point covers the first hundred, the planner charges the rest before any work.
 */
const PLAN_FIELDS_PER_READ_POINT = 100;

interface PlannerOptions {
  /** Spends the caller's read points (RATE_LIMIT_READS) or throws RATE_LIMITED. */
  charge?: (caller: Caller, points: number) => Promise<void>;
  /** PROVISIONING_MAX_CONCURRENT_PLANS: how many plans of one app are worked out at once. */
  maxConcurrentPerApp?: number;
  /** The turns plans take on the event loop (tests hand them over themselves). */
  turns?: PlanTurns;
  /** The operator's view: plans refused for the per-app limit (by app), and plans in flight. */
  observe?: { refused: (app: string) => void; inFlight: (plans: number) => void };
}

/**
 * Provisioning plans (docs/decisions/024): the steps of provisionKafkaCluster / provisionVirtualMachine,
 * built by the same code (ProvisioningService's step lists, CloudService's validation and wire mapping,
 * CloudClient's headers), run against a cloud whose creations are recorded instead of sent. Nothing is
 * sent upstream and nothing is written: planned resources live in a per-plan overlay of the ledger.
 *
 * Bounded (docs/decisions/038 and 053): a plan's work is a constant times its input's size, the plans of one app in
 * flight are at most `maxConcurrentPerApp`, all plans take turns of a few milliseconds on the event loop, and a plan is
 * charged read points by its size.
 */
export class ProvisioningPlanner {
  /** Steps run against the recording cloud since start: the work a plan costs (a test holds it linear). */
  stepsRun = 0;
  /**
   * Input nodes (objects, list elements, scalars) the planner handed to its dry runs since start: the whole input once,
   * then each field's context, copied or shared. A test holds it linear in topics, users and ACLs.
   */
  inputNodes = 0;
  private readonly inFlight = new Map<string, number>();
  private plansInFlight = 0;
  private readonly turns: PlanTurns;
  private readonly charge: NonNullable<PlannerOptions['charge']>;
  private readonly maxConcurrentPerApp: number;

  constructor(
    private readonly provisioning: ProvisioningService,
    private readonly cloud: CloudService,
    private readonly lookup: (id: string) => Promise<LedgerRecord | null>,
    private readonly options: PlannerOptions = {},
  ) {
    this.turns = options.turns ?? new PlanTurns();
    this.charge = options.charge ?? (async () => {});
    this.maxConcurrentPerApp = options.maxConcurrentPerApp ?? DEFAULT_MAX_CONCURRENT_PLANS;
  }

  planKafkaCluster(caller: Caller, input: ProvisionKafkaClusterInput, key?: string | null): Promise<ProvisioningPlan> {
    return this.plan(caller, 'KAFKA_CLUSTER', input, key ?? null, (env, i) =>
      this.provisioning.kafkaClusterSteps(caller, i as ProvisionKafkaClusterInput, env),
    );
  }

  planVirtualMachine(
    caller: Caller,
    input: ProvisionVirtualMachineInput,
    key?: string | null,
  ): Promise<ProvisioningPlan> {
    return this.plan(caller, 'VIRTUAL_MACHINE', input, key ?? null, (env, i) =>
      this.provisioning.virtualMachineSteps(caller, i as ProvisionVirtualMachineInput, env),
    );
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
    const leave = this.enter(caller);
    try {
      const size = measure(input);
      await this.charge(caller, Math.ceil(size.fields / PLAN_FIELDS_PER_READ_POINT) - 1);
      await this.turns.acquire();
      try {
        this.inputNodes += size.nodes;
        return await this.work(caller, kind, input, key, stepsOf, errors);
      } finally {
        this.turns.release();
      }
    } finally {
      leave();
    }
  }

  /** Counts the caller's plan in, or refuses it past PROVISIONING_MAX_CONCURRENT_PLANS; returns the count-out. */
  private enter(caller: Caller): () => void {
    const scope = caller.scope;
    const mine = this.inFlight.get(scope) ?? 0;
    if (mine >= this.maxConcurrentPerApp) {
      this.options.observe?.refused(caller.app ?? 'internal');
      throw new GatewayError(
        ErrorCode.RATE_LIMITED,
        `this app already has ${mine} plans being worked out, the most at once (PROVISIONING_MAX_CONCURRENT_PLANS=${this.maxConcurrentPerApp}); retry when one has answered`,
        { limit: 'PROVISIONING_MAX_CONCURRENT_PLANS', max: this.maxConcurrentPerApp, retryAfter: 1 },
      );
    }
    this.inFlight.set(scope, mine + 1);
    this.options.observe?.inFlight(++this.plansInFlight);
    return () => {
      const left = (this.inFlight.get(scope) ?? 1) - 1;
      if (left > 0) this.inFlight.set(scope, left);
      else this.inFlight.delete(scope);
      this.options.observe?.inFlight(--this.plansInFlight);
    };
  }

  private async work(
    caller: Caller,
    kind: ProvisioningKind,
    input: ProvisionKafkaClusterInput | ProvisionVirtualMachineInput,
    key: string | null,
    stepsOf: (env: StepEnv, input: object) => PlannedStep[],
    errors: PlanError[],
  ): Promise<ProvisioningPlan> {
    const read = new Map<string, Promise<LedgerRecord | null>>();
    const s: Session = {
      caller,
      key,
      stepsOf,
      lookup: (id) => {
        let record = read.get(id);
        if (!record) read.set(id, (record = this.lookup(id)));
        return record;
      },
      // A planned IP address answers with the stand-in; one in the ledger is read as the gateway reads its answers.
      address: {
        read: (response) =>
          (response as { address?: unknown } | null)?.address === ADDRESS_STAND_IN &&
          Object.keys(response as object).length === 1
            ? { address: ADDRESS_STAND_IN, field: 'address' }
            : this.cloud.addressOf({ response }),
        lookedFor: this.cloud.describeShapes().address,
      },
    };
    const base = await this.dryRun(s, input, { full: true });

    // A field holds a default when leaving it out changes no request: the same validation and mapping decide it, so
    // the plan keeps no copy of the defaults. Each field is tried in a context of constant size (docs/decisions/053):
    // every list on its path holds only the element on the path, every other list only its first element (a topic's
    // field cannot change another topic's request, an ACL's field another ACL's part of its user's request), and only
    // the steps it can change run again: its topic's or user's step alone, or its part's step and those after it.
    // By the composite input's field: the step it feeds (a topic or user listed twice, a plan error, keeps each index).
    const stepOfPrefix = new Map<string, string>();
    for (const [step, prefix] of stepPrefixes(input)) stepOfPrefix.set(prefix, step);
    const lists = input as ProvisionKafkaClusterInput;
    (lists.topics ?? []).forEach((t, i) => stepOfPrefix.set(`input.topics[${i}]`, `topic:${t.name}`));
    (lists.users ?? []).forEach((u, i) => stepOfPrefix.set(`input.users[${i}]`, `user:${u.name}`));
    const baseIndex = new Map<string, number>();
    base.names.forEach((name, i) => {
      if (!baseIndex.has(name)) baseIndex.set(name, i);
    });
    const contexts = new Contexts((nodes) => (this.inputNodes += nodes));
    const defaults: PlanDefault[] = [];
    const byStep = new Map<string, PlanDefault[]>();
    // The run of the context shared by the fields outside any list, and of the last list element's context.
    let root: Run | null = null;
    let last: { key: string; run: Run } | null = null;
    for (const path of leaves(input, 'input', [])) {
      const wait = this.turns.pause();
      if (wait) await wait;
      const [first, index] = path.keys;
      const value = valueAt(input, path);
      // Leaving out a whole list of topics or users leaves out their steps: never a default.
      if (
        path.keys.length === 1 &&
        (first === 'topics' || first === 'users') &&
        Array.isArray(value) &&
        value.length > 0
      )
        continue;
      const element = (first === 'topics' || first === 'users') && typeof index === 'number';
      const owner = element
        ? stepOfPrefix.get(`input.${String(first)}[${index}]`)
        : path.keys.length > 1
          ? stepOfPrefix.get(`input.${String(first)}`)
          : undefined;
      // A topic or user whose step fails in the plan shows no defaults.
      if (element && (owner === undefined || (base.steps[baseIndex.get(owner) ?? -1]?.body ?? null) === null)) continue;

      const key = contextKey(path, value);
      let context: Run | null = key === '' ? root : last?.key === key ? last.run : null;
      if (!context) {
        const range = (names: string[]): [number, number] => {
          const at = owner === undefined ? -1 : names.indexOf(owner);
          return element && at >= 0 ? [at, at + 1] : [0, names.length];
        };
        context = await this.dryRun(s, contexts.build(input, path.keys, false) as object, {
          full: false,
          range,
          under: base.overlay,
        });
        if (key === '') root = context;
        else last = { key, run: context };
      }
      const at = owner === undefined ? -1 : context.names.indexOf(owner);
      const range: [number, number] =
        at < 0 ? [0, context.names.length] : element ? [at, at + 1] : [at, context.names.length];
      const variant = await this.dryRun(s, contexts.build(input, path.keys, true) as object, {
        full: false,
        range: () => range,
        under: base.overlay,
      }).catch(() => null);
      if (!variant || variant.names.length !== context.names.length) continue;
      let same = true;
      let compared = false;
      for (let i = range[0]; i < range[1] && same; i++) {
        const before = context.steps[i]?.body ?? null;
        if (before === null) continue;
        compared = true;
        same = before === (variant.steps[i]?.body ?? null);
      }
      if (!same || !compared) continue;
      const found: PlanDefault = { field: path.text, value };
      defaults.push(found);
      if (owner !== undefined) {
        const list = byStep.get(owner);
        if (list) list.push(found);
        else byStep.set(owner, [found]);
      }
    }

    const steps = base.steps.map((run) => run!.step);
    for (const step of steps) step.defaults = byStep.get(step.name) ?? [];
    const references: PlanReference[] = steps
      .filter((s) => s.action === 'CREATE')
      .map((s) => ({ placeholder: placeholder(s.name), step: s.name, value: 'id' as const }));
    if (base.addressUsed) references.push({ placeholder: ADDRESS_PLACEHOLDER, step: 'ipAddress', value: 'address' });
    const valid = errors.length === 0 && steps.every((s) => s.errors.length === 0);
    return { kind, valid, idempotencyKey: key, steps, errors, defaults, references };
  }

  /**
   * Runs the steps of `range` (default: all; it is given the names of every step `input` plans) against the recording
   * cloud: one request per created resource, one error list per step. The steps before the range are taken as planned:
   * their ids, and their records from `under` (the whole plan's run). `full` builds what the plan shows (headers, the
   * step's Idempotency-Key); otherwise only the bodies are compared, and nothing else is built.
   */
  private async dryRun(
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
    const cloud = this.cloud.withDryRun({
      lookup: async (id) => planned(id) ?? s.lookup(id),
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
    this.stepsRun += Math.max(0, to - from);
    // The steps before the range are as in the whole plan's run: their ids as planned, their records from it.
    if (from > 0) under = o.under;
    const ids = new Map<string, string>();
    for (const p of steps.slice(0, from)) if (!p.skip) ids.set(p.name, p.reuse ?? placeholder(p.name));
    const out: Run = { names, steps: [], addressUsed: false, overlay };
    // The stand-in address can only reach a body when the cluster reads it from an IP planned here.
    const addressPlanned = (input as ProvisionKafkaClusterInput).cluster?.publicIp == null;
    let prefixes: Map<string, string> | null = null;
    let given: Map<string, unknown> | null = null;
    for (let n = from; n < to; n++) {
      const p = steps[n]!;
      // Between two steps: the loop goes to I/O and the other plans when this plan's turn is used up.
      const wait = this.turns.pause();
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
      const stepKey = full
        ? stepIdempotencyKey({ scope: caller.scope, idempotencyKey: key ?? NO_KEY }, p.name)
        : NO_KEY;
      step.resourceId = placeholder(p.name);
      ids.set(p.name, step.resourceId);
      let body: string | null = null;
      try {
        await p.run!(ids, stepKey);
        const { creation, key: k } = recorded as unknown as { creation: Creation; key: string };
        if (full) {
          const masked = maskSecrets(creation.request.body);
          const shown =
            addressPlanned && planned(placeholder('ipAddress'))
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
      out.steps[n] = { step, body };
    }
    return out;
  }
}

/** PROVISIONING_MAX_CONCURRENT_PLANS' default. */
const DEFAULT_MAX_CONCURRENT_PLANS = 2;

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

/** A step's error with its field named as in the composite input (`input.network.cidr`, `input.subnetId`). */
function planError(err: unknown, prefix: string | null): PlanError {
  if (!(err instanceof GraphQLError))
    return { field: null, code: ErrorCode.INTERNAL_SERVER_ERROR, message: 'internal error' };
  const code = String(err.extensions.code ?? ErrorCode.INTERNAL_SERVER_ERROR);
  const raw = typeof err.extensions.field === 'string' ? err.extensions.field : null;
  let field = raw;
  if (raw && prefix && !raw.startsWith(prefix + '.')) field = compositeField(raw, prefix);
  const message = raw && field !== raw ? `${field}: ${err.message.replace(/^[^:]*: /, '')}` : err.message;
  return { field, code, message };
}

interface Path {
  text: string;
  keys: Array<string | number>;
}

/**
 * Every optional-looking leaf of the input, in order: scalars, lists as a whole, and the fields of objects inside lists.
 * A generator, so that the plan walks its input as it tries each field, with turns for the event loop in between.
 */
function* leaves(value: unknown, text: string, keys: Array<string | number>): Generator<Path> {
  if (Array.isArray(value)) {
    if (keys.length) yield { text, keys };
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      if (v && typeof v === 'object') yield* leaves(v, `${text}[${i}]`, [...keys, i]);
    }
    return;
  }
  if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value as Record<string, unknown>))
      if (v != null) yield* leaves(v, `${text}.${k}`, [...keys, k]);
    return;
  }
  if (keys.length) yield { text, keys };
}

/** The fields a plan tries (as `leaves` lists them) and the nodes of its input, in one walk. */
function measure(input: unknown): { fields: number; nodes: number } {
  let fields = 0;
  let nodes = 0;
  const walk = (value: unknown, top: boolean): void => {
    nodes++;
    if (Array.isArray(value)) {
      if (!top) fields++;
      for (const v of value) {
        if (v && typeof v === 'object') walk(v, false);
        else nodes++;
      }
    } else if (value && typeof value === 'object') {
      for (const v of Object.values(value as Record<string, unknown>)) if (v != null) walk(v, false);
    } else if (!top) {
      fields++;
    }
  };
  walk(input, true);
  return { fields, nodes };
}

function valueAt(value: unknown, path: Path): unknown {
  return path.keys.reduce<unknown>((v, k) => (v as Record<string | number, unknown>)[k], value);
}

/**
 * Which context a field is tried in: the deepest list element on its path (`input.users[3].acls[7]`), and the field itself when
 * it is a list (kept whole in its own context); '' for the fields outside every list, which share one context.
 */
function contextKey(path: Path, value: unknown): string {
  const element = path.text.slice(0, path.text.lastIndexOf(']') + 1);
  return Array.isArray(value) ? `${element}#${path.text}` : element;
}

/**
 * Builds the context a field is tried in (docs/decisions/053): a copy of the input along the field's path in which each
 * list on the path holds only the element on the path, the field itself (left out, for the variant) is as given, and
 * every other list holds only its first element, reduced the same way. What lies off the path is reduced once per plan
 * and shared by every context, never copied again: a context costs the objects on one path, whatever the input's size.
 */
class Contexts {
  private readonly reduced = new WeakMap<object, unknown>();

  constructor(private readonly count: (nodes: number) => void) {}

  build(value: unknown, keys: Path['keys'], omit: boolean, at = 0): unknown {
    if (at === keys.length) {
      // The field itself: a scalar, or a list kept whole (leaving out a list is compared with the whole list).
      this.count(Array.isArray(value) ? measure(value).nodes : 1);
      return value;
    }
    this.count(1);
    const key = keys[at]!;
    if (Array.isArray(value)) return [this.build(value[key as number], keys, omit, at + 1)];
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      if (k !== key) out[k] = this.offPath(v);
      else if (!(omit && at + 1 === keys.length)) out[k] = this.build(v, keys, omit, at + 1);
    }
    return out;
  }

  /** A part off the field's path, its lists cut to their first element: the same object for every context. */
  private offPath(value: unknown): unknown {
    if (!value || typeof value !== 'object') return value;
    const known = this.reduced.get(value);
    if (known !== undefined) return known;
    let out: unknown = value;
    if (Array.isArray(value)) {
      if (value.length > 0) {
        const first = this.offPath(value[0]);
        if (value.length > 1 || first !== value[0]) out = [first];
      }
    } else {
      const entries = Object.entries(value as Record<string, unknown>);
      const cut = entries.map(([k, v]) => [k, this.offPath(v)] as const);
      if (cut.some(([, v], i) => v !== entries[i]![1])) out = Object.fromEntries(cut);
    }
    this.count(1);
    this.reduced.set(value, out);
    return out;
  }
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

/** The name the generated resolver types use for a plan (avoids a clash with the GraphQL type). */
export type ProvisioningPlanModel = ProvisioningPlan;
