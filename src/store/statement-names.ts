/**
 * Names for the statements a PostgreSQL pool sends again and again (STORE_PG_NAMED_STATEMENTS, docs/decisions/104).
 *
 * `pg` sends a statement without a name as Parse, Bind, Execute each time: PostgreSQL parses, analyses and plans it
 * on every call. A statement with a name is parsed once per connection (`pg` remembers which names a connection has)
 * and then only bound and executed; after five runs PostgreSQL also keeps one generic plan for it when that plan costs
 * no more than the custom ones. The same text runs with the same parameters either way: only the work around it goes.
 *
 * A text is named from its third use, and at most MAX_NAMED texts are named (each is kept on every connection of the
 * pool for its life): the statements a gateway repeats (the log's insert, the replicas' reads, the NOTIFY, the
 * idempotency records) are a few dozen, built once each; a text that differs call by call (a list of keys written
 * into it) stays unnamed once the names are taken. Only statements with parameters that read or write rows are named
 * (transaction control, DDL and the migrations' scripts go as before).
 */
const MAX_NAMED = 128;
/** How many uses of a text before it is named: one-off statements (start-up, the migrations) never are. */
const NAMED_FROM_USE = 3;
/** The texts counted but not named yet; forgotten all at once past this many (texts that differ call by call). */
const MAX_COUNTED = 1024;
const NAMEABLE = /^\s*(select|insert|update|delete|with)\b/i;

export class StatementNames {
  private readonly names = new Map<string, string>();
  private readonly uses = new Map<string, number>();
  /** False once PostgreSQL refused a named statement whose plan no longer fits (see `refused`): nothing is named. */
  private on = true;

  /** The name to send `text` with, or undefined to send it unnamed. */
  nameOf(text: string, parameters: number): string | undefined {
    if (!this.on || parameters === 0) return undefined;
    const name = this.names.get(text);
    if (name !== undefined || this.names.size >= MAX_NAMED) return name;
    const used = (this.uses.get(text) ?? 0) + 1;
    if (used < NAMED_FROM_USE) {
      if (used === 1 && this.uses.size >= MAX_COUNTED) this.uses.clear();
      this.uses.set(text, used);
      return undefined;
    }
    if (!NAMEABLE.test(text)) {
      this.uses.delete(text);
      return undefined;
    }
    this.uses.delete(text);
    const named = `gw${this.names.size + 1}`;
    this.names.set(text, named);
    return named;
  }

  /**
   * Whether the error PostgreSQL answered a named statement with means its prepared form went stale: a migration
   * (another replica's, during a rolling upgrade) changed the columns a `select *` returns ("cached plan must not
   * change result type"). From then on nothing is named: the next statement is parsed afresh, as without the switch.
   */
  refused(err: unknown): boolean {
    if ((err as { code?: string } | null)?.code !== '0A000') return false;
    this.on = false;
    return true;
  }
}
