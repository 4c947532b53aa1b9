import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { v5 as uuidv5 } from 'uuid';

import type { Caller } from '../auth/caller.js';
import { readableBy } from '../auth/tenancy.js';
import type { CloudService } from '../cloud/service.js';
import * as v from '../cloud/validation.js';
import { badUserInput, ErrorCode, GatewayError } from '../errors.js';
import { readWaitingOut, type Events, type Resume } from '../events/index.js';
import { keyedFingerprint, sameRequest } from '../fingerprint.js';
import type { ProvisionKafkaClusterInput, ProvisionVirtualMachineInput } from '../generated/graphql.js';
import type { Logger, RequestLog } from '../logger.js';
import type { LedgerRecord } from '../store/ledger.js';
import { ProvisioningRows } from '../store/provisionings.js';
import type { Database } from '../store/schema.js';
import { upstreamKey, type Idempotency, type Outcome } from '../upstream/idempotency.js';
import { dryRun, relabeled, session, stepPrefixes } from './dry-run.js';
import type { PlannedStep, Provisioning, ProvisioningKind, PublicAddress, StepEnv } from './model.js';
import { ProvisioningRecords } from './records.js';
import { ProvisioningRunner } from './run.js';

export type {
  PlannedStep,
  Provisioning,
  ProvisioningKind,
  ProvisioningState,
  PublicAddress,
  Step,
  StepError,
  StepState,
} from './model.js';

/** A provisioning's outcome: the provisioning, started, resumed or replayed. */
export type ProvisionResult = Outcome<Provisioning>;

/** The checks of an input's shape: one id or one spec per placement step, no topic or user twice. */
export function shapeChecks(
  input: ProvisionKafkaClusterInput | ProvisionVirtualMachineInput,
  ipOptional: boolean,
): Array<() => void> {
  const names = new Set<string>();
  // Compared as sent: the name is trimmed before it goes upstream, so "orders" and "orders " are one topic.
  const unique = (field: string, what: string, given: string) => () => {
    const name = given.trim();
    if (names.has(`${what}:${name}`)) throw badUserInput(field, `${what} ${name} is listed twice`);
    names.add(`${what}:${name}`);
  };
  const k = input as ProvisionKafkaClusterInput;
  return [
    () => exactlyOne('project', input.projectId, input.project),
    () => exactlyOne('network', input.networkId, input.network),
    () => exactlyOne('subnet', input.subnetId, input.subnet),
    () => exactlyOne('ipAddress', input.ipAddressId, input.ipAddress, ipOptional),
    ...(k.topics ?? []).map((t) => unique('input.topics', 'topic', t.name)),
    ...(k.users ?? []).map((u) => unique('input.users', 'user', u.name)),
  ];
}

/** How many topics and users one composite provisioning (or plan) may hold (PROVISIONING_MAX_TOPICS/_USERS). */
export interface ProvisioningBounds {
  maxTopics: number;
  maxUsers: number;
}

/** Most entries of a list inside one topic, user or VM user (ACLs, group ACLs, SSH keys, network interfaces). */
export const MAX_ITEM_LIST = 50;

/**
 * The size bounds of a composite input, checked before any other work so that one request cannot hold the event
 * loop (each topic and user is one upstream creation and one step of a plan). Over a bound: BAD_USER_INPUT that
 * names the field, the bound and its variable.
 */
export function checkBounds(
  input: ProvisionKafkaClusterInput | ProvisionVirtualMachineInput,
  bounds: ProvisioningBounds,
): void {
  const over = (field: string, list: readonly unknown[] | null | undefined, max: number, variable?: string) => {
    if (list && list.length > max)
      throw badUserInput(field, `at most ${max} entries${variable ? ` (${variable})` : ''}; got ${list.length}`);
  };
  const k = input as ProvisionKafkaClusterInput;
  over('input.topics', k.topics, bounds.maxTopics, 'PROVISIONING_MAX_TOPICS');
  over('input.users', k.users, bounds.maxUsers, 'PROVISIONING_MAX_USERS');
  (k.users ?? []).forEach((u, i) => {
    over(`input.users[${i}].acls`, u.acls, MAX_ITEM_LIST);
    over(`input.users[${i}].groupAcls`, u.groupAcls, MAX_ITEM_LIST);
  });
  const vm = (input as ProvisionVirtualMachineInput).virtualMachine;
  if (vm) {
    over('input.virtualMachine.users', vm.users, bounds.maxUsers, 'PROVISIONING_MAX_USERS');
    (vm.users ?? []).forEach((u, i) => over(`input.virtualMachine.users[${i}].sshKeys`, u.sshKeys, MAX_ITEM_LIST));
  }
}

const NAMESPACE = '0b9f4f1e-5a57-4a36-9d1b-6c1b1f0f4b6e';
/**
 * What the up-front checks put in place of the id of a resource the provisioning creates: read in a message, it says
 * what it stands for ("network N belongs to project P, not the project this provisioning creates").
 */
const CREATED = {
  project: 'the project this provisioning creates',
  network: 'the network this provisioning creates',
  subnet: 'the subnet this provisioning creates',
  ipAddress: 'the IP address this provisioning creates',
  kafkaCluster: 'the Kafka cluster this provisioning creates',
} as const;

function exactlyOne(field: string, id: unknown, spec: unknown, optional = false): void {
  if (id != null && spec != null)
    throw badUserInput(`input.${field}`, `give ${field}Id (reuse) or ${field} (create), not both`);
  if (!optional && id == null && spec == null)
    throw badUserInput(`input.${field}`, `give ${field}Id to reuse one, or ${field} to create it`);
}

/**
 * The cluster's white_host: the caller's address, else the one in the IP address's creation response, else
 * none for a private cluster (no IP address step). An IP address whose address cannot be read fails the
 * step before the cluster is created: a cluster silently created without public access would look fine and
 * be unreachable (docs/decisions/015-kafka-public-address.md).
 */
export async function publicAddress(
  given: string | null,
  ipId: string | null,
  networkId: string,
  lookup: StepEnv['lookup'],
  address: StepEnv['address'],
): Promise<PublicAddress | null> {
  // A reused id the ledger knows as another kind of resource is refused, whether its address is read or not.
  const record = ipId === null ? null : await v.parent('input.ipAddressId', ipId, 'ip_address', lookup);
  // So is an IP address of another network than the cluster's (spec: an IP address is created inside a network): its
  // address would reach no host of the cluster, as a VM's interface may not take one either (validateVirtualMachine).
  if (record?.parentId && record.parentId !== networkId)
    throw badUserInput(
      'input.ipAddressId',
      `IP address ${ipId} belongs to network ${record.parentId}, not ${networkId}`,
    );
  if (given !== null) return { address: given, source: 'CALLER', responseField: null, ipAddressId: ipId };
  if (ipId === null) return null;
  const retry = `give input.cluster.publicIp (the address, as a.b.c.d) and call again with a new idempotency key, reusing what exists (the resourceId of each DONE step as projectId, networkId, subnetId, and ipAddressId ${ipId})`;
  if (!record) {
    throw badUserInput(
      'input.cluster.publicIp',
      `the public IPv4 address for white_host is missing: IP address ${ipId} is not in the gateway's ledger, so its address is unknown; ${retry}`,
    );
  }
  const found = address.read(record.response);
  if (!found) {
    throw badUserInput(
      'input.cluster.publicIp',
      `the public IPv4 address for white_host is missing: the creation response of IP address ${ipId} has no public IPv4 address (looked for ${address.lookedFor}), and the cluster was not created; ${retry}`,
    );
  }
  return { address: found.address, source: 'IP_ADDRESS_RESPONSE', responseField: found.field, ipAddressId: ipId };
}

export interface ProvisioningOptions {
  db: Kysely<Database>;
  cloud: CloudService;
  /** The ledger, read through the owner rule of every cloud read (src/auth/tenancy.ts). */
  lookup: (id: string) => Promise<LedgerRecord | null>;
  events: Events;
  /**
   * A RUNNING provisioning not touched for this long belongs to a replica that died; a new call with its
   * key resumes it. A live run touches it every third of this (IDEMPOTENCY_TAKEOVER, docs/decisions/012).
   */
  staleMs: number;
  /** PROVISIONING_MAX_TOPICS and PROVISIONING_MAX_USERS. */
  bounds: ProvisioningBounds;
  /**
   * Spends the caller's creation points (RATE_LIMIT_CREATIONS) or throws RATE_LIMITED: a provisioning is charged
   * one point per upstream creation it will make, before its first step, and refused whole when they do not all
   * fit (docs/decisions/023). The admission stage charges these mutations nothing itself. Resolves to what gives the
   * points back, for a call that runs nothing after all.
   */
  charge: (caller: Caller, points: number) => Promise<() => Promise<void>>;
  /** The gateway secret's keyed digest: the input (passwords included) is stored only as a keyed fingerprint. */
  digest: (text: string) => string;
  /** The idempotency records of every creation: a new provisioning binds its key there, so no other creation takes it. */
  keys: Pick<Idempotency, 'bind' | 'reusedBy'>;
  /**
   * The gateway's clock (GatewayTesting.clock): a provisioning's createdAt and updatedAt, its run's heartbeat, and the
   * staleness a resuming call judges from them. Default Date.now.
   */
  now?: () => number;
}

/**
 * Composite provisioning (docs/contract.md): plans the spec's creation order as steps, each a normal cloud
 * mutation whose idempotency key is UUIDv5(key + step). Calling again with the same key resumes: finished
 * steps replay from their idempotency records, the failed one is retried, nothing is created twice.
 * Planning is here; running is ProvisioningRunner's, storing (and progress on the event log) is
 * ProvisioningRecords'.
 */
export class ProvisioningService {
  private readonly records: ProvisioningRecords;
  private readonly runner: ProvisioningRunner;
  private readonly env: StepEnv;

  private readonly cloud: CloudService;
  private readonly lookup: (id: string) => Promise<LedgerRecord | null>;
  private readonly charge: ProvisioningOptions['charge'];
  private readonly digest: (text: string) => string;
  private readonly keys: ProvisioningOptions['keys'];
  private readonly staleMs: number;
  private readonly now: () => number;
  readonly bounds: ProvisioningBounds;

  constructor(options: ProvisioningOptions) {
    ({
      cloud: this.cloud,
      lookup: this.lookup,
      charge: this.charge,
      digest: this.digest,
      keys: this.keys,
      bounds: this.bounds,
      staleMs: this.staleMs,
    } = options);
    const { cloud, lookup } = options;
    this.now = options.now ?? (() => Date.now());
    this.env = {
      cloud,
      lookup,
      address: { read: (response) => cloud.addressOf({ response }), lookedFor: cloud.describeShapes().address },
    };
    this.records = new ProvisioningRecords(new ProvisioningRows(options.db), options.events, this.now);
    this.runner = new ProvisioningRunner(this.records, this.staleMs, this.now);
  }

  /**
   * `logger`: the request's, whose lines name its id: the run this call launches (or resumes) goes on after the answer,
   * and logs with it (ProvisioningRunner.launch).
   */
  async provisionKafkaCluster(
    caller: Caller,
    input: ProvisionKafkaClusterInput,
    key: string | null | undefined,
    logger: Logger,
  ): Promise<ProvisionResult> {
    checkBounds(input, this.bounds);
    v.checkTexts('input', input);
    for (const check of shapeChecks(input, true)) check();
    const sent = await this.precheck(caller, input, (env) => this.kafkaClusterSteps(caller, input, env));
    return this.start(caller, 'KAFKA_CLUSTER', input, sent, key, logger, () =>
      this.kafkaClusterSteps(caller, input, this.env),
    );
  }

  /**
   * Every check that needs no upstream id runs now, so bad input changes nothing: the steps run by their own code with
   * nothing sent or written, as a plan runs them (dry-run.ts), the resources the provisioning creates standing in as
   * the ledger records they will be (CREATED) and the reused ids read from the ledger. The first step that fails
   * refuses the provisioning, on the composite input's field: a contradiction between steps (a reused IP address of
   * another network than the created one) or a value a reused resource leaves missing (the CIDR of a subnet the
   * gateway did not create, the address of a reused IP address) is refused before the first creation, not at its step.
   * Returns what the steps send, the provisioning's request as its fingerprint compares it (see `start`).
   */
  private async precheck(
    caller: Caller,
    input: ProvisionKafkaClusterInput | ProvisionVirtualMachineInput,
    stepsOf: (env: StepEnv) => PlannedStep[],
  ): Promise<unknown[]> {
    const standIn = (step: string) => CREATED[step as keyof typeof CREATED] ?? `the ${step} this provisioning creates`;
    const s = session({ caller, key: null, cloud: this.cloud, lookup: this.lookup, stepsOf, standIn });
    const run = await dryRun(s, input, { full: false });
    const failed = run.steps.findIndex((step) => step?.error !== undefined);
    if (failed !== -1) throw relabeled(run.steps[failed]!.error, stepPrefixes(input).get(run.names[failed]!) ?? null);
    // Each step's body as sent (a created resource's id as its stand-in), or the id it reuses.
    return run.steps.map((step) =>
      step?.step.action === 'REUSE' ? { reuse: step.step.resourceId } : (step?.body ?? null),
    );
  }

  /** The steps of provisionKafkaCluster, in the order they run. */
  kafkaClusterSteps(caller: Caller, input: ProvisionKafkaClusterInput, env: StepEnv): PlannedStep[] {
    const placement = { region: input.region ?? 'MSK', zone: input.zone ?? 'MSK_AVNTG' } as const;
    const c = input.cluster;
    return [
      ...this.placementSteps(caller, input, placement, false, env),
      {
        name: 'kafkaCluster',
        run: async (ids, k, log) => {
          // A subnetCidr other than the CIDR of the subnet this provisioning creates contradicts the input itself:
          // said so, naming both fields (validateKafkaCluster would name the subnet by the id it stands in with).
          if (input.subnet && input.subnetCidr != null) {
            const created = (await env.lookup(ids.get('subnet')!))?.spec.cidr;
            const given = v.checkCidr('input.subnetCidr', input.subnetCidr);
            if (created !== undefined && given !== created)
              throw badUserInput(
                'input.subnetCidr',
                `${CREATED.subnet} has CIDR ${String(created)} (input.subnet.cidr), not ${given}`,
              );
          }
          const address = await publicAddress(
            c.publicIp ?? null,
            ids.get('ipAddress') ?? null,
            ids.get('network')!,
            env.lookup,
            env.address,
          );
          const result = await env.cloud.createKafkaCluster(
            caller,
            {
              ...c,
              ...placement,
              projectId: ids.get('project')!,
              networkId: ids.get('network')!,
              subnetId: ids.get('subnet')!,
              subnetCidr: input.subnetCidr ?? null,
              publicIp: address?.address ?? null,
            },
            k,
            log,
          );
          return { ...result, publicAddress: address };
        },
      },
      ...(input.topics ?? []).map((t) => ({
        name: `topic:${t.name}`,
        run: (ids: Map<string, string>, k: string, log?: RequestLog) =>
          env.cloud.createKafkaTopic(
            caller,
            { ...t, projectId: ids.get('project')!, clusterId: ids.get('kafkaCluster')! },
            k,
            log,
          ),
      })),
      ...(input.users ?? []).map((u) => ({
        name: `user:${u.name}`,
        run: (ids: Map<string, string>, k: string, log?: RequestLog) =>
          env.cloud.createKafkaUser(
            caller,
            { ...u, projectId: ids.get('project')!, clusterId: ids.get('kafkaCluster')! },
            k,
            log,
          ),
      })),
    ];
  }

  /** As provisionKafkaCluster: `logger` is the request's, which the run logs with. */
  async provisionVirtualMachine(
    caller: Caller,
    input: ProvisionVirtualMachineInput,
    key: string | null | undefined,
    logger: Logger,
  ): Promise<ProvisionResult> {
    checkBounds(input, this.bounds);
    v.checkTexts('input', input);
    for (const check of shapeChecks(input, false)) check();
    const sent = await this.precheck(caller, input, (env) => this.virtualMachineSteps(caller, input, env));
    return this.start(caller, 'VIRTUAL_MACHINE', input, sent, key, logger, () =>
      this.virtualMachineSteps(caller, input, this.env),
    );
  }

  /** The steps of provisionVirtualMachine, in the order they run. */
  virtualMachineSteps(caller: Caller, input: ProvisionVirtualMachineInput, env: StepEnv): PlannedStep[] {
    const placement = { region: input.region ?? 'MSK', zone: input.zone ?? 'MSK_AVNTG' } as const;
    const vm = input.virtualMachine;
    return [
      ...this.placementSteps(caller, input, placement, true, env),
      {
        name: 'virtualMachine',
        run: (ids, k, log) =>
          env.cloud.createVirtualMachine(
            caller,
            {
              ...vm,
              ...placement,
              projectId: ids.get('project')!,
              networkInterfaces: [
                { networkId: ids.get('network')!, subnetId: ids.get('subnet')!, ipAddressId: ids.get('ipAddress')! },
              ],
            },
            k,
            log,
          ),
      },
    ];
  }

  /** Project, network, subnet and IP address: reuse the given id or create from the given spec. */
  private placementSteps(
    caller: Caller,
    input: ProvisionKafkaClusterInput | ProvisionVirtualMachineInput,
    placement: { region: 'MSK'; zone: 'MSK_AVNTG' },
    ipRequired: boolean,
    env: StepEnv,
  ): PlannedStep[] {
    return [
      input.projectId
        ? { name: 'project', reuse: input.projectId }
        : { name: 'project', run: (_ids, k, log) => env.cloud.createProject(caller, input.project!, k, log) },
      input.networkId
        ? { name: 'network', reuse: input.networkId }
        : {
            name: 'network',
            run: (ids, k, log) =>
              env.cloud.createNetwork(
                caller,
                { ...input.network!, ...placement, projectId: ids.get('project')! },
                k,
                log,
              ),
          },
      input.subnetId
        ? { name: 'subnet', reuse: input.subnetId }
        : {
            name: 'subnet',
            run: (ids, k, log) =>
              env.cloud.createSubnet(
                caller,
                { ...input.subnet!, projectId: ids.get('project')!, networkId: ids.get('network')! },
                k,
                log,
              ),
          },
      input.ipAddressId
        ? { name: 'ipAddress', reuse: input.ipAddressId }
        : input.ipAddress || ipRequired
          ? {
              name: 'ipAddress',
              run: (ids, k, log) =>
                env.cloud.createIpAddress(
                  caller,
                  { ...input.ipAddress!, projectId: ids.get('project')!, networkId: ids.get('network')! },
                  k,
                  log,
                ),
            }
          : { name: 'ipAddress', skip: true },
    ];
  }

  private async start(
    caller: Caller,
    kind: ProvisioningKind,
    input: unknown,
    sent: unknown[],
    givenKey: string | null | undefined,
    logger: Logger,
    plan: () => PlannedStep[],
  ): Promise<ProvisionResult> {
    const key = givenKey ?? randomUUID();
    const id = provisioningId(caller.scope, key);
    const requests = { kind, steps: sent };
    const print = keyedFingerprint(this.digest, requests);
    const steps = plan();
    const existing = await this.records.read(id);
    const answer = (result: Provisioning, replayed: boolean): ProvisionResult => ({
      result,
      idempotencyKey: key,
      upstreamIdempotencyKey: upstreamKey(caller.scope, key),
      replayed,
    });
    let run: Provisioning;
    if (existing) {
      if (!this.sameAsStored(existing, kind, input, sent)) throw keyReused(key);
      const alive =
        this.runner.isRunning(id) ||
        (existing.state === 'RUNNING' && this.now() - existing.updatedAt.getTime() < this.staleMs);
      if (existing.state === 'SUCCEEDED' || alive) return answer(existing, true);
      // FAILED, or RUNNING but abandoned by a request that died: resume the steps that did not finish.
      run = {
        ...existing,
        revision: existing.revision + 1,
        updatedAt: new Date(this.now()),
        state: 'RUNNING',
        error: null,
        steps: existing.steps.map((s) =>
          s.state === 'FAILED' || s.state === 'RUNNING' ? { ...s, state: 'PENDING', error: null } : s,
        ),
      };
    } else {
      const now = new Date(this.now());
      run = {
        id,
        scope: caller.scope,
        kind,
        state: 'RUNNING',
        steps: steps.map((s) => ({
          name: s.name,
          state: 'PENDING',
          resourceId: null,
          idempotencyKey: null,
          error: null,
        })),
        error: null,
        idempotencyKey: key,
        fingerprint: print,
        revision: 0,
        createdAt: now,
        updatedAt: now,
      };
    }
    // Charged for what is still to create (a resume: the steps that did not finish), before the claim, so that a
    // refusal leaves the provisioning as it was. A call that claims nothing after all (a concurrent call with its key
    // won the insert or the resume, or storing failed) runs nothing: its points are given back, as a replay costs none.
    // Paired by position, as the run pairs them: a resume may write a topic's or a user's name with other spaces.
    const finished = new Set(
      (existing?.steps ?? []).flatMap((s, i) =>
        s.state !== 'FAILED' && s.state !== 'RUNNING' && s.state !== 'PENDING' ? [steps[i]!.name] : [],
      ),
    );
    const refund = await this.charge(caller, creations(steps, finished));
    // A key the caller gave may name another creation already (IDEMPOTENCY_KEY_REUSED); a fresh one cannot.
    const operation = operationOf(kind);
    const bind =
      givenKey == null ? null : () => this.keys.bind({ scope: caller.scope, key, operation, request: requests });
    const claimed = await this.claim(existing, run, bind).catch(async (err: unknown) => {
      await refund();
      throw err;
    });
    if (!claimed) {
      await refund();
      // The resume's claim lost: the provisioning as the call that won left it (resumed: RUNNING, its failed steps
      // PENDING again), not the FAILED one this call read. The insert lost: the winner's.
      if (existing) return answer((await this.records.read(id)) ?? existing, true);
      return this.start(caller, kind, input, sent, key, logger, plan);
    }
    // The row is the provisioning, stored now: it is run whatever its event does. A claim stored without its run would
    // read RUNNING with nothing behind it, and the next call with the key would be answered with it, replayed. The
    // event is the claim's announcement only: a subscriber reads the row first, and every later state has its own.
    await this.records
      .announce(run)
      .catch((err: unknown) =>
        logger.warn({ err, provisioning: id }, 'provisioning start stored but not announced; its run goes on'),
      );
    this.runner.launch(run, steps, logger);
    return answer(run, false);
  }

  /**
   * Whether `existing` was started with the request `kind`, `input` and `sent` make: the fingerprint of the canonical
   * upstream requests, as a cloud creation's, so an equal input written otherwise (spaces the steps trim, a null for an
   * omitted field, a CIDR the ledger knows given or left out) is the same. A provisioning stored before its requests
   * were fingerprinted has the fingerprint of its input as given.
   */
  private sameAsStored(existing: Provisioning, kind: ProvisioningKind, input: unknown, sent: unknown[]): boolean {
    const requests = { kind, steps: sent };
    return (
      sameRequest(existing.fingerprint, keyedFingerprint(this.digest, requests), requests) ||
      sameRequest(existing.fingerprint, keyedFingerprint(this.digest, { kind, input }), { kind, input })
    );
  }

  /**
   * The IDEMPOTENCY_KEY_REUSED a provisioning of `kind` with `input` and the caller's `key` would be refused with (the
   * key names the caller's provisioning of another request, or another creation), else null: a plan with that key shows it, since the run
   * would send nothing. An input whose own checks fail is left to the plan's step errors (null).
   */
  async keyReusedBy(
    caller: Caller,
    kind: ProvisioningKind,
    input: ProvisionKafkaClusterInput | ProvisionVirtualMachineInput,
    key: string,
  ): Promise<GatewayError | null> {
    const existing = await this.records.read(provisioningId(caller.scope, key));
    const stepsOf = (env: StepEnv) =>
      kind === 'KAFKA_CLUSTER'
        ? this.kafkaClusterSteps(caller, input as ProvisionKafkaClusterInput, env)
        : this.virtualMachineSteps(caller, input as ProvisionVirtualMachineInput, env);
    let sent: unknown[];
    try {
      sent = await this.precheck(caller, input, stepsOf);
    } catch {
      return null;
    }
    if (existing) return this.sameAsStored(existing, kind, input, sent) ? null : keyReused(key);
    // A key another creation holds (a plain creation's, or the other kind's provisioning), as the run's bind reads it.
    const operation = operationOf(kind);
    return this.keys.reusedBy({ scope: caller.scope, key, operation, request: { kind, steps: sent } });
  }

  /**
   * Stores `run` for this call to run: a new provisioning's insert, or a resume's claim of `existing` (on whichever
   * replica, one caller resumes it). False when a concurrent call with the same key got it first.
   */
  private async claim(
    existing: Provisioning | null,
    run: Provisioning,
    bind: (() => Promise<void>) | null,
  ): Promise<boolean> {
    if (!existing) {
      // A new provisioning binds its key among the idempotency records first, so no other creation can take it.
      await bind?.();
      return this.records.create(run);
    }
    return this.records.claimResume(existing, run, this.staleMs);
  }

  /** A provisioning of the caller, or null (another API key's provisioning is not visible). */
  async get(caller: Caller, id: string): Promise<Provisioning | null> {
    const p = await this.records.read(id);
    return p && readableBy(caller, p.scope) ? p : null;
  }

  /**
   * The current state (also for a subscriber that comes late), then every change, until SUCCEEDED or FAILED; with
   * `resume`, the states after its position instead, from the log, then live (ProvisioningRecords.follow).
   */
  async watch(caller: Caller, id: string, resume?: Resume): Promise<AsyncGenerator<Provisioning>> {
    // Where the bus stands before the row is read: every state stored after the read is announced outside it.
    const since = this.records.delivered();
    // As the stream's own reads of the log: a subscriber that (re)connects while the database restarts waits it out.
    const current = await readWaitingOut(() => this.get(caller, id));
    if (!current) throw new GatewayError(ErrorCode.NOT_FOUND, `provisioning ${id} not found`);
    return this.records.follow(caller, current, resume, since);
  }

  /** Waits for running provisionings (tests). */
  idle(): Promise<void> {
    return this.runner.idle();
  }

  /** Shutdown: each running provisioning stops after its step under way (ProvisioningRunner.stop). */
  stop(): Promise<void> {
    return this.runner.stop();
  }
}

/** The mutation a provisioning of `kind` runs: the operation its key is bound to. */
function operationOf(kind: ProvisioningKind): string {
  return kind === 'KAFKA_CLUSTER' ? 'provisionKafkaCluster' : 'provisionVirtualMachine';
}

/** A provisioning's id: one per (caller scope, key). */
function provisioningId(scope: string, key: string): string {
  return uuidv5(`${scope}/${key}`, NAMESPACE);
}

function keyReused(key: string): GatewayError {
  return new GatewayError(
    ErrorCode.IDEMPOTENCY_KEY_REUSED,
    `idempotency key ${key} was already used for a different provisioning; use a new key`,
    { idempotencyKey: key },
  );
}

/** The upstream creations `steps` will make, leaving out the `finished` ones (reused and skipped steps create nothing). */
export function creations(steps: readonly PlannedStep[], finished: ReadonlySet<string>): number {
  return steps.filter((s) => s.run !== undefined && !finished.has(s.name)).length;
}

/** The name the generated resolver types use for a provisioning (avoids a clash with the GraphQL type). */
export type ProvisioningModel = Provisioning;
