import DataLoader from 'dataloader';

import type { Caller } from '../auth/caller.js';
import { visibleRecord } from '../auth/tenancy.js';
import { cloudView, isCloudKind, viewAs, type CloudKind, type CloudView, type CloudViews } from '../cloud/views.js';
import type { Services } from '../services.js';
import type { LedgerRecord, ResourceKind } from '../store/ledger.js';

/**
 * What GraphQL resolves a ledger record as: the typed view of a cloud resource (src/cloud/views.ts), or
 * the record itself for the identity kinds, whose resolvers read it directly.
 */
export type NodeSource = CloudView | LedgerRecord;
export type ViewOf<K extends ResourceKind> = K extends CloudKind ? CloudViews[K] : LedgerRecord;

/** Maps a record to what GraphQL resolves it as, once, where it enters GraphQL. */
export function toNode(record: LedgerRecord): NodeSource {
  return isCloudKind(record.kind) ? cloudView(record as LedgerRecord & { kind: CloudKind }) : record;
}

/**
 * Per-request DataLoaders, created on first use: a tree of N rows costs one SQL statement per level,
 * never one per row. They load for one caller: a record another API key owns (src/auth/tenancy.ts) loads as null.
 * Cloud records come out as their typed views.
 */
export class Loaders {
  private resourceLoader?: DataLoader<string, NodeSource | null>;
  /** Made on first use: a subscription's context never loads anything. */
  private childLoadersMap?: Map<string, DataLoader<string, unknown>>;

  constructor(
    private readonly services: Services,
    private readonly caller: Caller,
  ) {}

  private get childLoaders(): Map<string, DataLoader<string, unknown>> {
    return (this.childLoadersMap ??= new Map());
  }

  get resource(): DataLoader<string, NodeSource | null> {
    this.resourceLoader ??= new DataLoader(async (ids) =>
      (await this.services.ledger.getMany(ids)).map((r) => {
        const visible = visibleRecord(this.caller, r);
        return visible && toNode(visible);
      }),
    );
    return this.resourceLoader;
  }

  /** A resource by id, or null when it is not in the ledger, another key's (src/auth/tenancy.ts) or of another kind. */
  async ofKind<K extends ResourceKind>(id: string | null | undefined, kind: K): Promise<ViewOf<K> | null> {
    if (!id) return null;
    const node = await this.resource.load(id);
    return node && node.kind === kind ? (node as ViewOf<K>) : null;
  }

  /**
   * A cloud resource by id, of any cloud kind: null as `ofKind` answers, and for an identity kind (what a provisioning
   * step reuses is a cloud resource; an id naming the caller's identification is not shown through it).
   */
  async cloudResource(id: string | null | undefined): Promise<CloudView | null> {
    if (!id) return null;
    const node = await this.resource.load(id);
    return node && isCloudKind(node.kind) ? (node as CloudView) : null;
  }

  /** Children of a parent resource (subnets of a network, topics of a cluster, ...). */
  children<K extends CloudKind>(kind: K): DataLoader<string, CloudViews[K][]> {
    return this.grouped(`child:${kind}`, kind, (ids) => this.services.ledger.childrenOf(kind, ids));
  }

  /** Resources of one kind that sit directly in a project. */
  inProject<K extends CloudKind>(kind: K): DataLoader<string, CloudViews[K][]> {
    return this.grouped(`project:${kind}`, kind, (ids) => this.services.ledger.inProjects(kind, ids));
  }

  /** Other per-request loaders (verification results, ...) keyed by name. */
  custom<K, V>(name: string, create: () => DataLoader<K, V>): DataLoader<K, V> {
    return this.named(`custom:${name}`, create);
  }

  private grouped<K extends CloudKind>(
    name: string,
    kind: K,
    batch: (ids: readonly string[]) => Promise<LedgerRecord[][]>,
  ): DataLoader<string, CloudViews[K][]> {
    return this.named(
      name,
      () =>
        new DataLoader(async (ids: readonly string[]) =>
          (await batch(ids)).map((group) => group.map((r) => viewAs(kind, r))),
        ),
    );
  }

  private named<K, V>(name: string, create: () => DataLoader<K, V>): DataLoader<K, V> {
    let loader = this.childLoaders.get(name) as unknown as DataLoader<K, V> | undefined;
    if (!loader) {
      loader = create();
      this.childLoaders.set(name, loader as unknown as DataLoader<string, unknown>);
    }
    return loader;
  }
}
