import DataLoader from 'dataloader';
import type { Caller } from '../caller.js';
import type { Services } from '../services.js';
import type { LedgerRecord, ResourceKind } from '../store/ledger.js';
import { visibleRecord } from '../tenancy.js';

/**
 * Per-request DataLoaders, created on first use: a tree of N rows costs one SQL statement per level,
 * never one per row. They load for one caller: a record another API key owns (src/tenancy.ts) loads as null.
 */
export class Loaders {
  private resourceLoader?: DataLoader<string, LedgerRecord | null>;
  /** Made on first use: a subscription's context never loads anything. */
  private childLoadersMap?: Map<string, DataLoader<string, LedgerRecord[]>>;

  constructor(
    private readonly services: Services,
    private readonly caller: Caller,
  ) {}

  private get childLoaders(): Map<string, DataLoader<string, LedgerRecord[]>> {
    return (this.childLoadersMap ??= new Map());
  }

  get resource(): DataLoader<string, LedgerRecord | null> {
    this.resourceLoader ??= new DataLoader(async (ids) => (await this.services.ledger.getMany(ids)).map((r) => visibleRecord(this.caller, r)));
    return this.resourceLoader;
  }

  /** A resource by id, or null when it is not in the ledger, another key's (src/tenancy.ts) or of another kind. */
  async ofKind(id: string | null | undefined, kind: ResourceKind): Promise<LedgerRecord | null> {
    if (!id) return null;
    const record = await this.resource.load(id);
    return record && record.kind === kind ? record : null;
  }

  /** Children of a parent resource (subnets of a network, topics of a cluster, ...). */
  children(kind: ResourceKind): DataLoader<string, LedgerRecord[]> {
    return this.grouped(`child:${kind}`, (ids) => this.services.ledger.childrenOf(kind, ids));
  }

  /** Resources of one kind that sit directly in a project. */
  inProject(kind: ResourceKind): DataLoader<string, LedgerRecord[]> {
    return this.grouped(`project:${kind}`, (ids) => this.services.ledger.inProjects(kind, ids));
  }

  /** Other per-request loaders (verification results, ...) keyed by name. */
  custom<K, V>(name: string, create: () => DataLoader<K, V>): DataLoader<K, V> {
    let loader = this.childLoaders.get(`custom:${name}`) as unknown as DataLoader<K, V> | undefined;
    if (!loader) {
      loader = create();
      this.childLoaders.set(`custom:${name}`, loader as unknown as DataLoader<string, LedgerRecord[]>);
    }
    return loader;
  }

  private grouped(name: string, batch: (ids: readonly string[]) => Promise<LedgerRecord[][]>): DataLoader<string, LedgerRecord[]> {
    let loader = this.childLoaders.get(name);
    if (!loader) {
      loader = new DataLoader(batch);
      this.childLoaders.set(name, loader);
    }
    return loader;
  }
}
