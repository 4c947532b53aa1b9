import type { CompiledQuery } from 'kysely';

import type { Caller } from '../auth/caller.js';
import { cloudLedgerRecord } from '../auth/tenancy.js';
import type { IncompleteAnswer } from '../errors.js';
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
import type { RequestLog } from '../logger.js';
import type { PauseAt } from '../phases.js';
import type { Ledger, LedgerRecord, ResourceKind } from '../store/ledger.js';
import type { Idempotency, Outcome } from '../upstream/idempotency.js';
import type { CloudClient, Created } from './client.js';
import { withoutSecrets } from './model.js';
import * as v from './validation.js';
import * as wire from './wire.js';

/** A creation's outcome: the ledger record of what was created. */
export type MutationResult = Outcome<LedgerRecord>;

/** One creation, validated and built for the wire: what a mutation sends, and what a plan shows. */
export interface Creation {
  operation: string;
  kind: ResourceKind;
  /** The canonical upstream request: POST to `path` with `body` (fingerprinted for idempotency). */
  request: { path: string; body: unknown };
  /** Whether the request asks for `accept: application/json` (see creationHeaders). */
  accept: boolean;
  send: (idempotencyKey: string) => Promise<Created>;
  /** Reads an answer kept by an earlier UPSTREAM_ANSWER_INCOMPLETE again (the paths configured now), sending nothing. */
  reread: (incomplete: IncompleteAnswer) => Created;
  spec: object;
  title: string;
  projectId: string | null;
  parentId: string | null;
}

/**
 * A cloud that sends nothing (provisioning plans): its creations go to `create` instead of the upstream,
 * the idempotency records and the ledger, and `lookup` answers instead of the ledger: for planned resources, and for
 * the ledger's records as the plan read them (once per id, however many fields it tries).
 */
export interface DryRun {
  lookup: v.Lookup;
  create(caller: Caller, key: string | null | undefined, creation: Creation): Promise<MutationResult>;
}

/**
 * Cloud mutations, each in the same order: validate (no upstream call on bad input), build the wire
 * request, run it under the caller's idempotency key, and record the created resource in the ledger.
 */
export interface CloudServiceOptions {
  client: CloudClient;
  ledger: Ledger;
  idempotency: Idempotency;
  /** Tests only (GATEWAY_TEST_PAUSE_AT): stops between the upstream's answer and the ledger write. */
  pauseAt?: PauseAt | undefined;
  /** Plans only (withDryRun): nothing is sent or written. */
  dryRun?: DryRun;
}

export class CloudService {
  private readonly client: CloudClient;
  private readonly ledger: Ledger;
  private readonly idempotency: Idempotency;
  private readonly pauseAt: PauseAt | undefined;
  private readonly dryRun: DryRun | undefined;

  constructor(options: CloudServiceOptions) {
    ({
      client: this.client,
      ledger: this.ledger,
      idempotency: this.idempotency,
      pauseAt: this.pauseAt,
      dryRun: this.dryRun,
    } = options);
    if (this.dryRun) this.lookup = this.dryRun.lookup;
  }

  /** Where the cloud answers' unshown fields are read (a configured path or the guesses), for the start-up line. */
  describeShapes(): { createdId: string; token: string; address: string } {
    return this.client.answers.describe();
  }

  /** The IPv4 address of an IP address record, read from its creation answer (CLOUD_IP_ADDRESS_PATH or the guesses). */
  addressOf(record: Pick<LedgerRecord, 'response'>): wire.FoundAddress | null {
    return this.client.answers.address(record.response);
  }

  /** The same mutations, validating and building the same requests, with nothing sent or written. */
  withDryRun(dryRun: DryRun): CloudService {
    return new CloudService({ client: this.client, ledger: this.ledger, idempotency: this.idempotency, dryRun });
  }

  /**
   * Parents are looked up in the shared cloud ledger only: an id of another app's verification or
   * identification must read as unknown, not as "a verification, not a project" (src/auth/tenancy.ts).
   */
  private readonly lookup: v.Lookup = async (id) => cloudLedgerRecord(await this.ledger.get(id));

  /**
   * Each creation's `log` is the request it serves: what its call logs (a failed attempt upstream, its lease's
   * warnings) names that request's id. None: a caller with no request (the service-wide logger).
   */
  createProject(
    caller: Caller,
    input: CreateProjectInput,
    key?: string | null,
    log?: RequestLog,
  ): Promise<MutationResult> {
    const spec = v.validateProject(input);
    const body = wire.projectRequest(spec);
    return this.create(caller, key, log, {
      operation: 'createProject',
      kind: 'project',
      request: { path: wire.PATHS.projects, body },
      accept: false,
      send: (k) => this.client.createProject(body, k, log),
      reread: this.reread,
      spec,
      title: spec.name,
      projectId: null,
      parentId: null,
    });
  }

  async createNetwork(
    caller: Caller,
    input: CreateNetworkInput,
    key?: string | null,
    log?: RequestLog,
  ): Promise<MutationResult> {
    const spec = await v.validateNetwork(input, this.lookup);
    return this.createService(caller, key, log, {
      operation: 'createNetwork',
      kind: 'network',
      call: wire.networkCall(spec),
      spec,
      title: spec.title,
      projectId: spec.projectId,
      parentId: null,
    });
  }

  async createSubnet(
    caller: Caller,
    input: CreateSubnetInput,
    key?: string | null,
    log?: RequestLog,
  ): Promise<MutationResult> {
    const spec = await v.validateSubnet(input, this.lookup);
    return this.createService(caller, key, log, {
      operation: 'createSubnet',
      kind: 'subnet',
      call: wire.subnetCall(spec),
      spec,
      title: spec.title,
      projectId: spec.projectId,
      parentId: spec.networkId,
    });
  }

  async createIpAddress(
    caller: Caller,
    input: CreateIpAddressInput,
    key?: string | null,
    log?: RequestLog,
  ): Promise<MutationResult> {
    const spec = await v.validateIpAddress(input, this.lookup);
    return this.createService(caller, key, log, {
      operation: 'createIpAddress',
      kind: 'ip_address',
      call: wire.ipAddressCall(spec),
      spec,
      title: spec.title,
      projectId: spec.projectId,
      parentId: spec.networkId,
    });
  }

  async createKafkaCluster(
    caller: Caller,
    input: CreateKafkaClusterInput,
    key?: string | null,
    log?: RequestLog,
  ): Promise<MutationResult> {
    const spec = await v.validateKafkaCluster(input, this.lookup);
    return this.createService(caller, key, log, {
      operation: 'createKafkaCluster',
      kind: 'kafka_cluster',
      call: wire.kafkaClusterCall(spec),
      spec,
      title: spec.title,
      projectId: spec.projectId,
      parentId: null,
    });
  }

  async createKafkaTopic(
    caller: Caller,
    input: CreateKafkaTopicInput,
    key?: string | null,
    log?: RequestLog,
  ): Promise<MutationResult> {
    const spec = await v.validateKafkaTopic(input, this.lookup);
    return this.createService(caller, key, log, {
      operation: 'createKafkaTopic',
      kind: 'kafka_topic',
      call: wire.kafkaTopicCall(spec),
      spec,
      title: spec.name,
      projectId: spec.projectId,
      parentId: spec.clusterId,
    });
  }

  async createKafkaUser(
    caller: Caller,
    input: CreateKafkaUserInput,
    key?: string | null,
    log?: RequestLog,
  ): Promise<MutationResult> {
    const spec = await v.validateKafkaUser(input, this.lookup);
    return this.createService(caller, key, log, {
      operation: 'createKafkaUser',
      kind: 'kafka_user',
      call: wire.kafkaUserCall(spec),
      spec,
      title: spec.name,
      projectId: spec.projectId,
      parentId: spec.clusterId,
    });
  }

  async createVirtualMachine(
    caller: Caller,
    input: CreateVirtualMachineInput,
    key?: string | null,
    log?: RequestLog,
  ): Promise<MutationResult> {
    const spec = await v.validateVirtualMachine(input, this.lookup);
    return this.createService(caller, key, log, {
      operation: 'createVirtualMachine',
      kind: 'virtual_machine',
      call: wire.virtualMachineCall(spec),
      spec,
      title: spec.title,
      projectId: spec.projectId,
      parentId: null,
    });
  }

  /** A creation through the services endpoint (every kind but a project): its envelope, as `call` built it. */
  private createService(
    caller: Caller,
    key: string | null | undefined,
    log: RequestLog | undefined,
    s: {
      operation: string;
      kind: ResourceKind;
      call: wire.ServiceCall;
      spec: object;
      title: string;
      projectId: string;
      parentId: string | null;
    },
  ): Promise<MutationResult> {
    const { call } = s;
    return this.create(caller, key, log, {
      operation: s.operation,
      kind: s.kind,
      request: { path: wire.PATHS.services, body: call.envelope },
      accept: call.accept,
      send: (k) => this.client.createService(call, k, log),
      reread: this.reread,
      spec: s.spec,
      title: s.title,
      projectId: s.projectId,
      parentId: s.parentId,
    });
  }

  /**
   * `log`: the request the creation serves, whose logger writes what the call logs (its upstream call's lines, its
   * key's): read only when a line is written (RequestLog).
   */
  private create(
    caller: Caller,
    key: string | null | undefined,
    log: RequestLog | undefined,
    p: Creation,
  ): Promise<MutationResult> {
    if (this.dryRun) return this.dryRun.create(caller, key, p);
    const recordOf = (created: Created, idempotencyKey: string): LedgerRecord => ({
      id: created.id,
      kind: p.kind,
      // A project's own id is its project.
      projectId: p.kind === 'project' ? created.id : p.projectId,
      parentId: p.parentId,
      title: p.title,
      spec: withoutSecrets(p.kind, p.spec),
      response: created.response,
      idempotencyKey,
      createdBy: caller.scope,
      createdAt: new Date(),
    });
    /** What the upstream answered this call (or the kept answer read again). */
    let answer: Created | undefined;
    return this.idempotency.run<LedgerRecord>({
      scope: caller.scope,
      key,
      operation: p.operation,
      request: p.request,
      execute: async (idempotencyKey): Promise<LedgerRecord> => {
        const created = (answer = await p.send(idempotencyKey));
        if (this.pauseAt) await this.pauseAt('upstream-answered');
        return recordOf(created, idempotencyKey);
      },
      // The upstream created it already: its kept answer is read again, and nothing is sent (docs/decisions/042).
      recover: (incomplete, idempotencyKey) => recordOf((answer = p.reread(incomplete)), idempotencyKey),
      storeWith: this.storeWith,
      // The ledger holds the answer's id for another creation: its record changed no row, and nothing was stored.
      unstorable: () => this.client.alreadyRecorded(answer!),
      toStored: this.toStored,
      fromStored: this.fromStored,
      log,
    });
  }

  /** Reads a kept answer again (the same for every creation: made once, not per call). */
  private readonly reread = (incomplete: IncompleteAnswer): Created => this.client.reread(incomplete);

  /** The ledger record is written in the same commit as the completion of the key. */
  private readonly storeWith = (record: LedgerRecord): readonly CompiledQuery[] => [this.ledger.recordWrite(record)];
  /** What the key's record keeps for a replay, and the record read back from it (src/store/ledger.ts). */
  private readonly toStored = (record: LedgerRecord): unknown => this.ledger.storedResult(record);
  private readonly fromStored = (stored: unknown): Promise<LedgerRecord> => this.ledger.replayOf(stored);
}
