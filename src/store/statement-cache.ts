/**
 * Prepared statements kept by SQL text, at most `capacity` of them, the least lately used dropped first
 * (second chance: a hit marks its entry; the sweep for room moves a marked entry to the back, unmarked, and drops the
 * first unmarked one).
 *
 * A hit writes one flag and changes nothing else. A cache that deleted and re-inserted its key on every hit (to keep
 * the Map in recency order) made V8 rebuild the Map's table every few hundred hits: a new table for a Map that lives
 * in the old generation, promoted at the next scavenge, ~100 bytes of old generation per creation
 * (docs/decisions/123).
 */
export class StatementCache<T> {
  private readonly entries = new Map<string, { value: T; used: boolean }>();

  constructor(private readonly capacity: number) {}

  /** The value kept for `key` (marked as used), or undefined. */
  find(key: string): T | undefined {
    const hit = this.entries.get(key);
    if (hit === undefined) return undefined;
    hit.used = true;
    return hit.value;
  }

  /** Keeps `value` for `key`, which `find` did not have, dropping the least lately used entry when full. */
  keep(key: string, value: T): void {
    if (this.entries.size >= this.capacity) this.dropOne();
    this.entries.set(key, { value, used: false });
  }

  get size(): number {
    return this.entries.size;
  }

  private dropOne(): void {
    // Every entry marked is moved back once and unmarked, so this ends within size + 1 steps.
    for (;;) {
      const [key, entry] = this.entries.entries().next().value!;
      this.entries.delete(key);
      if (!entry.used) return;
      entry.used = false;
      this.entries.set(key, entry);
    }
  }
}
