import type { Caller } from '../auth/caller.js';
import type { CloudService } from '../cloud/service.js';
import { ErrorCode, GatewayError } from '../errors.js';
import type { ProvisionKafkaClusterInput, ProvisionVirtualMachineInput } from '../generated/graphql.js';
import type { LedgerRecord } from '../store/ledger.js';
import {
  ADDRESS_PLACEHOLDER,
  dryRun,
  planError,
  session,
  stepPrefixes,
  type PlanDefault,
  type PlanError,
  type PlanStep,
  type Run,
  type Session,
} from './dry-run.js';
import type { PlannedStep, ProvisioningKind, StepEnv } from './model.js';
import { PlanTurns } from './plan-turns.js';
import { checkBounds, shapeChecks, type ProvisioningService } from './service.js';

export type { PlanStep } from './dry-run.js';

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
    const s = session({
      caller,
      key,
      cloud: this.cloud,
      stepsOf,
      lookup: this.lookup,
      standIn: placeholder,
      pause: () => this.turns.pause(),
    });
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
    // A key that names the caller's provisioning of another request: the run would be refused and send nothing.
    const reused = key === null ? null : await this.provisioning.keyReusedBy(caller, kind, input, key);
    if (reused) errors.push(planError(reused, null));
    const valid = errors.length === 0 && steps.every((s) => s.errors.length === 0);
    return { kind, valid, idempotencyKey: key, steps, errors, defaults, references };
  }

  /** A dry run of `input` (src/provisioning/dry-run.ts), its steps counted in `stepsRun`. */
  private async dryRun(s: Session, input: object, o: Parameters<typeof dryRun>[2]): Promise<Run> {
    const run = await dryRun(s, input, o);
    this.stepsRun += run.ran;
    return run;
  }
}

/** PROVISIONING_MAX_CONCURRENT_PLANS' default. */
const DEFAULT_MAX_CONCURRENT_PLANS = 2;

/** The id a resource the plan creates stands in with, in the bodies of the steps after it. */
function placeholder(step: string): string {
  return `{{${step}.id}}`;
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

/** The name the generated resolver types use for a plan (avoids a clash with the GraphQL type). */
export type ProvisioningPlanModel = ProvisioningPlan;
