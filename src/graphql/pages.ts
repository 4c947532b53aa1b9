import { MAX_AUDIT_ROWS } from '../agents/plans.js';
import { MAX_REJECTIONS_PAGE } from '../mobile-id/quarantine.js';

/**
 * The most rows each list field paged by `first` returns, by type and field: its resolver clamps `first` to it
 * (pageSize), and the schema carries it in the field's extensions (`maxPageSize`, set by buildSchema), where the cost
 * limit reads it (src/execution/cost-formula.ts, limits.ts): a list counts min(first, cap) rows, the most it can
 * return, so asking for more than there can be costs no more than asking for the cap.
 */
export const PAGE_CAPS = {
  Query: {
    projects: 500,
    mobileIdRejections: MAX_REJECTIONS_PAGE,
    pendingAgentPlans: MAX_AUDIT_ROWS,
    agentAudit: MAX_AUDIT_ROWS,
  },
  Subscription: {
    pendingAgentPlansChanged: MAX_AUDIT_ROWS,
  },
} as const satisfies Record<string, Record<string, number>>;

declare module 'graphql' {
  interface GraphQLFieldExtensions<_TSource, _TContext, _TArgs> {
    /** The most rows this list field returns, whatever its `first` asks for (PAGE_CAPS). */
    maxPageSize?: number;
  }
}

type ResolverMap = Record<string, unknown>;

/**
 * The resolvers with each capped field's PAGE_CAPS entry in its extensions, as graphql-tools reads a field given as
 * an object (`{ resolve, subscribe, extensions }`); a field without a resolver gets the extensions alone.
 */
export function withPageCaps(resolvers: ResolverMap): ResolverMap {
  const out: ResolverMap = { ...resolvers };
  for (const [type, caps] of Object.entries(PAGE_CAPS)) {
    const fields: Record<string, unknown> = { ...(resolvers[type] as Record<string, unknown> | undefined) };
    for (const [field, maxPageSize] of Object.entries(caps)) {
      const given = fields[field];
      const config = typeof given === 'function' ? { resolve: given } : ((given ?? {}) as Record<string, unknown>);
      fields[field] = {
        ...config,
        extensions: { ...(config.extensions as object | undefined), maxPageSize },
      };
    }
    out[type] = fields;
  }
  return out;
}
