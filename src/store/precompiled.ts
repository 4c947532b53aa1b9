import type { Compilable, CompiledQuery } from 'kysely';

/** Stands for the i-th argument while kysely compiles: a string, so that kysely passes it through untouched. */
const placeholder = (i: number) => `\u0000precompiled-argument-${i}\u0000`;

/**
 * A statement that kysely builds and compiles once, at its first use: every later call binds new values to
 * the same SQL text, without building the query tree again or compiling it (about a tenth of a mutation's CPU
 * went there; decision 031). The SQL text is also the key of the SQLite statement cache, so the statement
 * is prepared once too.
 *
 * `build` gets placeholders for its arguments and must use each one as a value, as it is: no branching on it,
 * no computation with it (serialize JSON before the call). Values that `build` writes itself (a constant
 * state, a null) stay in the statement as they were compiled.
 */
export function precompiled<A extends readonly unknown[]>(
  build: (...args: A) => Compilable,
): (...args: A) => CompiledQuery {
  // Per parameter of the compiled statement: the index of the argument bound there, or -1 for a value `build` wrote
  // (kept in `values`).
  let template:
    | {
        sql: string;
        query: CompiledQuery['query'];
        queryId: CompiledQuery['queryId'];
        args: number[];
        values: unknown[];
      }
    | undefined;
  return (...args: A): CompiledQuery => {
    if (!template) {
      const names = args.map((_, i) => placeholder(i));
      const compiled = build(...(names as unknown as A)).compile();
      const slots = compiled.parameters.map((p) => (typeof p === 'string' ? names.indexOf(p) : -1));
      for (let i = 0; i < names.length; i++) {
        if (!slots.includes(i))
          throw new Error(`a precompiled statement must use its argument ${i} as a value: ${compiled.sql}`);
      }
      template = {
        sql: compiled.sql,
        query: compiled.query,
        queryId: compiled.queryId,
        args: slots,
        values: [...compiled.parameters],
      };
    }
    // A plain object, not a spread of kysely's frozen one (V8 copies a frozen object on its slow path).
    const { args: slots, values } = template;
    const parameters: unknown[] = new Array(slots.length);
    for (let i = 0; i < slots.length; i++) {
      const arg = slots[i]!;
      parameters[i] = arg === -1 ? values[i] : args[arg];
    }
    return { sql: template.sql, query: template.query, queryId: template.queryId, parameters };
  };
}
