import type { CloudService, MutationResult } from '../cloud/service.js';
import type { FoundAddress } from '../cloud/wire.js';
import type { RequestLog } from '../logger.js';
import type { LedgerRecord } from '../store/ledger.js';
import { stepKey, upstreamKey } from '../upstream/idempotency.js';

/** The shapes of a composite provisioning, shared by its planning, running and storing units. */
export type ProvisioningKind = 'KAFKA_CLUSTER' | 'VIRTUAL_MACHINE';
export type ProvisioningState = 'RUNNING' | 'SUCCEEDED' | 'FAILED';
export type StepState = 'PENDING' | 'RUNNING' | 'DONE' | 'REUSED' | 'SKIPPED' | 'FAILED';

export interface StepError {
  code: string;
  message: string;
  status: number | null;
}

export interface Step {
  name: string;
  state: StepState;
  resourceId: string | null;
  idempotencyKey: string | null;
  error: StepError | null;
  /** kafkaCluster step only: the white_host it sent, and where it came from. */
  publicAddress?: PublicAddress | null;
}

/** The cluster's public IPv4 (`white_host`) and its origin: the caller's input, or a field of the IP's creation response. */
export interface PublicAddress {
  address: string;
  source: 'CALLER' | 'IP_ADDRESS_RESPONSE';
  /** The response field it was read from (`address`, `data.ipAddress`, ...), for IP_ADDRESS_RESPONSE. */
  responseField: string | null;
  ipAddressId: string | null;
}

export interface Provisioning {
  id: string;
  scope: string;
  kind: ProvisioningKind;
  state: ProvisioningState;
  steps: Step[];
  error: StepError | null;
  idempotencyKey: string;
  fingerprint: string;
  revision: number;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * One step of a plan: runs with the ids of the steps before it, returns the created resource. `log`: the run's, whose
 * logger names the request that launched (or resumed) it, for what the step's creation logs.
 */
export interface PlannedStep {
  name: string;
  /** An id the caller gave: nothing to create. */
  reuse?: string;
  skip?: boolean;
  run?: (
    ids: Map<string, string>,
    key: string,
    log?: RequestLog,
  ) => Promise<MutationResult & { publicAddress?: PublicAddress | null }>;
}

/**
 * What the steps call: the cloud mutations and the lookup of the cluster's public address. Provisioning
 * runs them against the upstream; a dry run (dry-run.ts) runs the very same steps against a cloud
 * that records each prepared request instead of sending it.
 */
export interface StepEnv {
  cloud: Pick<
    CloudService,
    | 'createProject'
    | 'createNetwork'
    | 'createSubnet'
    | 'createIpAddress'
    | 'createKafkaCluster'
    | 'createKafkaTopic'
    | 'createKafkaUser'
    | 'createVirtualMachine'
  >;
  lookup: (id: string) => Promise<LedgerRecord | null>;
  /** The IPv4 address in an IP address's creation answer (CloudService.addressOf), and where the gateway looks for it. */
  address: { read: (response: unknown) => FoundAddress | null; lookedFor: string };
}

export function terminal(state: ProvisioningState): boolean {
  return state !== 'RUNNING';
}
/** The caller key a step runs under (its own upstream Idempotency-Key derives from it like any mutation's). */
export function stepIdempotencyKey(p: Pick<Provisioning, 'scope' | 'idempotencyKey'>, step: string): string {
  return stepKey(upstreamKey(p.scope, p.idempotencyKey), step);
}
