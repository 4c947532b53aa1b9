import { bootDiskIops, fromWire, type DiskTypeName, type OsImageName } from '../catalog/index.js';
import type { LedgerRecord, ResourceKind } from '../store/ledger.js';
import type {
  IpAddressSpec,
  KafkaClusterSpec,
  KafkaTopicSpec,
  KafkaUserSpec,
  NetworkSpec,
  ProjectSpec,
  SubnetSpec,
  VirtualMachineSpec,
} from './model.js';

/**
 * Typed views of the cloud resources in the ledger: what GraphQL reads of them. A record is mapped to its
 * view once, where it enters GraphQL (the loaders, the mutation payloads, `projects`), and every field
 * that is a plain read of the view is served by the default resolver (docs/decisions/027).
 *
 * A view is a class whose fields are getters on the prototype: mapping a record allocates one small
 * object and no closures, and a getter reads the stored spec (or response) only when a query asks for
 * one of its fields. The ledger keeps both as JSON text until that first read.
 */
abstract class ResourceView<S> {
  readonly id: string;
  readonly kind: ResourceKind;
  readonly createdAt: Date;

  constructor(protected readonly record: LedgerRecord) {
    this.id = record.id;
    this.kind = record.kind;
    this.createdAt = record.createdAt;
  }

  /** The project it sits in (a project's is its own id): relations load by it. */
  get projectId(): string | null {
    return this.record.projectId;
  }

  /** The resource it was created in (a subnet's network, a topic's cluster), for relations. */
  get parentId(): string | null {
    return this.record.parentId;
  }

  /** The stored, non-secret spec, typed for the kind (parsed on first read). */
  protected get spec(): S {
    return this.record.spec as S;
  }

  /** The upstream's creation response as it arrived, secrets removed (parsed on first read). */
  get raw(): unknown {
    return this.record.response;
  }
}

/**
 * Defines on a view's prototype one getter per spec field that GraphQL exposes under the same name and
 * type: `Network.title` is `spec.title`. The view's interface declares the same keys, so both are typed.
 */
function specFields<S, K extends keyof S & string>(
  view: abstract new (record: LedgerRecord) => ResourceView<S>,
  keys: readonly K[],
): void {
  for (const key of keys) {
    Object.defineProperty(view.prototype, key, {
      get(this: { record: LedgerRecord }) {
        return (this.record.spec as S)[key];
      },
      enumerable: true,
      configurable: false,
    });
  }
}

const PLACEMENT = ['region', 'zone'] as const;
const TITLED = ['title', 'description', ...PLACEMENT] as const;

export class ProjectView extends ResourceView<ProjectSpec> {
  get name(): string {
    return this.record.title ?? '';
  }

  get description(): string {
    return String(this.spec.description ?? '');
  }
}

const NETWORK_FIELDS = [...TITLED, 'bandwidthMbps', 'defaultFirewallAction'] as const;
export interface NetworkView extends Pick<NetworkSpec, (typeof NETWORK_FIELDS)[number]> {}
export class NetworkView extends ResourceView<NetworkSpec> {}
specFields(NetworkView, NETWORK_FIELDS);

const SUBNET_FIELDS = [...TITLED, 'networkId', 'cidr'] as const;
export interface SubnetView extends Pick<SubnetSpec, (typeof SUBNET_FIELDS)[number]> {}
export class SubnetView extends ResourceView<SubnetSpec> {}
specFields(SubnetView, SUBNET_FIELDS);

export class IpAddressView extends ResourceView<IpAddressSpec> {
  get networkId(): string {
    return this.record.parentId ?? '';
  }

  get title(): string {
    return this.record.title ?? '';
  }

  get description(): string {
    return String(this.spec.description ?? '');
  }

  /** The stored creation answer, where its IPv4 address is read (CloudService.addressOf: a configured path or the guesses). */
  get response(): unknown {
    return this.record.response;
  }
}

const KAFKA_CLUSTER_FIELDS = [
  ...TITLED,
  'instanceCount',
  'cpuUtilization',
  'diskSize',
  'diskType',
  'instanceType',
  'kafkaVersion',
  'networkId',
  'subnetId',
  'subnetCidr',
  'publicIp',
] as const;
export interface KafkaClusterView extends Pick<KafkaClusterSpec, (typeof KAFKA_CLUSTER_FIELDS)[number]> {}
export class KafkaClusterView extends ResourceView<KafkaClusterSpec> {}
specFields(KafkaClusterView, KAFKA_CLUSTER_FIELDS);

const KAFKA_TOPIC_FIELDS = [
  'clusterId',
  'name',
  'partitions',
  'replicationFactor',
  'compressionType',
  'maxMessageBytes',
  'minInsyncReplicas',
  'cleanupPolicy',
  'minCompactionLagMs',
  'maxCompactionLagMs',
  'deleteRetentionMs',
  'retentionBytes',
  'retentionMs',
] as const;
export interface KafkaTopicView extends Pick<KafkaTopicSpec, (typeof KAFKA_TOPIC_FIELDS)[number]> {}
export class KafkaTopicView extends ResourceView<KafkaTopicSpec> {}
specFields(KafkaTopicView, KAFKA_TOPIC_FIELDS);

const KAFKA_USER_FIELDS = ['clusterId', 'name', 'acls', 'groupAcls'] as const;
export interface KafkaUserView extends Pick<KafkaUserSpec, (typeof KAFKA_USER_FIELDS)[number]> {}
export class KafkaUserView extends ResourceView<KafkaUserSpec> {}
specFields(KafkaUserView, KAFKA_USER_FIELDS);

/** A VM login as the ledger keeps it: whether a password was set, never the password (`withoutSecrets`). */
export interface StoredVmUser {
  name: string;
  sshKeys: string[];
  hasPassword: boolean;
}

/** A VM's network interface: the ids, from which GraphQL loads the network, subnet and address. */
export type VmNetworkInterfaceView = VirtualMachineSpec['networkInterfaces'][number];

export interface BootDiskView {
  sizeGb: number;
  diskType: DiskTypeName;
  image: OsImageName | null;
  imageId: string;
  iops: number | null;
}

const VIRTUAL_MACHINE_FIELDS = [...TITLED, 'platform', 'instanceType', 'networkInterfaces', 'promo'] as const;
export interface VirtualMachineView extends Pick<VirtualMachineSpec, (typeof VIRTUAL_MACHINE_FIELDS)[number]> {}
export class VirtualMachineView extends ResourceView<VirtualMachineSpec> {
  /** The boot disk with its catalog image (when the id is one of the catalog's) and its IOPS. */
  get bootDisk(): BootDiskView {
    const d = this.spec.bootDisk;
    return {
      sizeGb: d.sizeGb,
      diskType: d.diskType,
      image: d.image ?? fromWire('OsImage', d.imageId) ?? null,
      imageId: d.imageId,
      iops: bootDiskIops(d.diskType, d.sizeGb),
    };
  }

  get users(): StoredVmUser[] {
    return (this.record.spec.users as StoredVmUser[] | undefined) ?? [];
  }
}
specFields(VirtualMachineView, VIRTUAL_MACHINE_FIELDS);

/** The view of each cloud kind. */
export interface CloudViews {
  project: ProjectView;
  network: NetworkView;
  subnet: SubnetView;
  ip_address: IpAddressView;
  kafka_cluster: KafkaClusterView;
  kafka_topic: KafkaTopicView;
  kafka_user: KafkaUserView;
  virtual_machine: VirtualMachineView;
}

export type CloudKind = keyof CloudViews;
export type CloudView = CloudViews[CloudKind];

const VIEWS: { [K in CloudKind]: new (record: LedgerRecord) => CloudViews[K] } = {
  project: ProjectView,
  network: NetworkView,
  subnet: SubnetView,
  ip_address: IpAddressView,
  kafka_cluster: KafkaClusterView,
  kafka_topic: KafkaTopicView,
  kafka_user: KafkaUserView,
  virtual_machine: VirtualMachineView,
};

export function isCloudKind(kind: ResourceKind): kind is CloudKind {
  return Object.hasOwn(VIEWS, kind);
}

/** The view of a cloud record, by its own kind. */
export function cloudView(record: LedgerRecord & { kind: CloudKind }): CloudView {
  return new VIEWS[record.kind](record);
}

/** The view of a record known to be of `kind` (a mutation's result, a child of a given kind). */
export function viewAs<K extends CloudKind>(kind: K, record: LedgerRecord): CloudViews[K] {
  return new VIEWS[kind](record);
}
