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
import type { Caller } from '../caller.js';
import type { Ledger, LedgerRecord, ResourceKind } from '../store/ledger.js';
import { cloudLedgerRecord } from '../tenancy.js';
import type { Idempotency } from '../upstream/idempotency.js';
import type { CloudClient, Created } from './client.js';
import type { PauseAt } from '../phases.js';
import type { IncompleteAnswer } from '../errors.js';
import { withoutSecrets } from './model.js';
import * as v from './validation.js';
import * as wire from './wire.js';

export interface MutationResult {
  record: LedgerRecord;
  idempotencyKey: string;
  /** The Idempotency-Key the upstream got (derived from the caller's scope and key). */
  upstreamIdempotencyKey: string;
  replayed: boolean;
}

type StoredRecord = Omit<LedgerRecord, 'createdAt'> & { createdAt: string };

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
export class CloudService {
  constructor(
    private readonly client: CloudClient,
    private readonly ledger: Ledger,
    private readonly idempotency: Idempotency,
    /** Tests only (GATEWAY_TEST_PAUSE_AT): stops between the upstream's answer and the ledger write. */
    private readonly pauseAt?: PauseAt,
    private readonly dryRun?: DryRun,
  ) {
    if (dryRun) this.lookup = dryRun.lookup;
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
    return new CloudService(this.client, this.ledger, this.idempotency, undefined, dryRun);
  }

  /**
   * Parents are looked up in the shared cloud ledger only: an id of another app's verification or
   * identification must read as unknown, not as "a verification, not a project" (src/tenancy.ts).
   */
  private readonly lookup: v.Lookup = async (id) => cloudLedgerRecord(await this.ledger.get(id));

  createProject(caller: Caller, input: CreateProjectInput, key?: string | null): Promise<MutationResult> {
    const spec = v.validateProject(input);
    const body = wire.projectRequest(spec);
    return this.create(caller, key, {
      operation: 'createProject',
      kind: 'project',
      request: { path: wire.PATHS.projects, body },
      accept: false,
      send: (k) => this.client.createProject(body, k),
      reread: (incomplete) => this.client.reread(incomplete),
      spec,
      title: spec.name,
      projectId: null,
      parentId: null,
    });
  }

  async createNetwork(caller: Caller, input: CreateNetworkInput, key?: string | null): Promise<MutationResult> {
    const spec = await v.validateNetwork(input, this.lookup);
    return this.createService(caller, key, 'createNetwork', 'network', wire.networkCall(spec), spec, spec.title, spec.projectId, null);
  }

  async createSubnet(caller: Caller, input: CreateSubnetInput, key?: string | null): Promise<MutationResult> {
    const spec = await v.validateSubnet(input, this.lookup);
    return this.createService(caller, key, 'createSubnet', 'subnet', wire.subnetCall(spec), spec, spec.title, spec.projectId, spec.networkId);
  }

  async createIpAddress(caller: Caller, input: CreateIpAddressInput, key?: string | null): Promise<MutationResult> {
    const spec = await v.validateIpAddress(input, this.lookup);
    return this.createService(caller, key, 'createIpAddress', 'ip_address', wire.ipAddressCall(spec), spec, spec.title, spec.projectId, spec.networkId);
  }

  async createKafkaCluster(caller: Caller, input: CreateKafkaClusterInput, key?: string | null): Promise<MutationResult> {
    const spec = await v.validateKafkaCluster(input, this.lookup);
    return this.createService(caller, key, 'createKafkaCluster', 'kafka_cluster', wire.kafkaClusterCall(spec), spec, spec.title, spec.projectId, null);
  }

  async createKafkaTopic(caller: Caller, input: CreateKafkaTopicInput, key?: string | null): Promise<MutationResult> {
    const spec = await v.validateKafkaTopic(input, this.lookup);
    return this.createService(caller, key, 'createKafkaTopic', 'kafka_topic', wire.kafkaTopicCall(spec), spec, spec.name, spec.projectId, spec.clusterId);
  }

  async createKafkaUser(caller: Caller, input: CreateKafkaUserInput, key?: string | null): Promise<MutationResult> {
    const spec = await v.validateKafkaUser(input, this.lookup);
    return this.createService(caller, key, 'createKafkaUser', 'kafka_user', wire.kafkaUserCall(spec), spec, spec.name, spec.projectId, spec.clusterId);
  }

  async createVirtualMachine(caller: Caller, input: CreateVirtualMachineInput, key?: string | null): Promise<MutationResult> {
    const spec = await v.validateVirtualMachine(input, this.lookup);
    return this.createService(caller, key, 'createVirtualMachine', 'virtual_machine', wire.virtualMachineCall(spec), spec, spec.title, spec.projectId, null);
  }

  private createService(
    caller: Caller,
    key: string | null | undefined,
    operation: string,
    kind: ResourceKind,
    call: wire.ServiceCall,
    spec: object,
    title: string,
    projectId: string,
    parentId: string | null,
  ): Promise<MutationResult> {
    return this.create(caller, key, {
      operation,
      kind,
      request: { path: wire.PATHS.services, body: call.envelope },
      accept: call.accept,
      send: (k) => this.client.createService(call, k),
      reread: (incomplete) => this.client.reread(incomplete),
      spec,
      title,
      projectId,
      parentId,
    });
  }

  private async create(
    caller: Caller,
    key: string | null | undefined,
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
    const out = await this.idempotency.run<LedgerRecord>({
      scope: caller.scope,
      key,
      operation: p.operation,
      request: p.request,
      execute: async (idempotencyKey): Promise<LedgerRecord> => {
        const created = await p.send(idempotencyKey);
        if (this.pauseAt) await this.pauseAt('upstream-answered');
        return recordOf(created, idempotencyKey);
      },
      // The upstream created it already: its kept answer is read again, and nothing is sent (docs/decisions/042).
      recover: (incomplete, idempotencyKey) => recordOf(p.reread(incomplete), idempotencyKey),
      // The ledger record is written in the same commit as the completion of the key.
      storeWith: (record) => [this.ledger.recordWrite(record)],
      toStored: (record): StoredRecord => ({ ...record, createdAt: record.createdAt.toISOString() }),
      fromStored: (stored) => {
        const s = stored as StoredRecord;
        return { ...s, createdAt: new Date(s.createdAt) };
      },
    });
    return { record: out.result, idempotencyKey: out.idempotencyKey, upstreamIdempotencyKey: out.upstreamIdempotencyKey, replayed: out.replayed };
  }
}
