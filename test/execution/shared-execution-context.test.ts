import { makeExecutableSchema } from '@graphql-tools/schema';
import { parse, type ExecutionArgs, type ExecutionResult } from 'graphql';
import { describe, expect, it } from 'vitest';

import { APP_GRANTS, type Caller } from '../../src/auth/caller.js';
import { SharedExecution } from '../../src/execution/shared.js';
import { createContext, type GraphQLContext } from '../../src/graphql/context.js';
import { createLogger } from '../../src/logger.js';
import type { Services } from '../../src/services.js';

/**
 * The context an execution of a subscription's selection runs with (src/execution/shared.ts): resolvers read the
 * subscription's own caller, services, DataLoaders, request id and logger through it, and a warning raised while it
 * runs goes with that result (to every subscriber sharing it), not onto the subscription's context. Both ways the
 * selection runs: graphql-jit's compiled form and graphql-js.
 */
const schema = makeExecutableSchema({
  typeDefs: /* GraphQL */ `
    type Query {
      ok: Boolean
    }
    type Tick {
      n: Int!
      seen: String!
    }
    type Subscription {
      tick: Tick!
    }
  `,
  resolvers: {
    Subscription: { tick: { subscribe: () => undefined, resolve: (event: { n: number }) => event } },
    Tick: {
      seen: (_t: unknown, _a: unknown, ctx: GraphQLContext) => {
        ctx.warn({ code: 'DEGRADED' as never, message: `warned by ${ctx.requestId}` });
        const services = ctx.services as unknown as { marker: string };
        return [ctx.caller.app, services.marker, typeof ctx.loaders, typeof ctx.logger.info].join(' ');
      },
    },
  },
});
const document = parse('subscription { tick { n seen } }');
const caller: Caller = { scope: 'app:a', app: 'a', grants: APP_GRANTS };
const services = { marker: 'the services' } as unknown as Services;
const logger = createLogger({ level: 'silent' } as never);

describe.each([
  ['compiled', new SharedExecution(schema)],
  ['graphql-js', new SharedExecution()],
])('a subscription execution’s context (%s)', (name, shared) => {
  it('reads the subscription’s context and keeps its warnings to the result', async () => {
    const context = createContext(services, caller, 'ws:1', logger);
    const args: ExecutionArgs = { schema, document, contextValue: context };
    const result = (await shared.execute({ n: 1 }, shared.groupOf(args), args)) as ExecutionResult;
    expect(result).toEqual({
      data: { tick: { n: 1, seen: 'a the services object function' } },
      extensions: { warnings: [{ code: 'DEGRADED', message: 'warned by ws:1' }] },
    });
    expect(context.warnings).toBeNull();
    // A second execution of the same context starts with no warnings of the first.
    const again = (await shared.execute({ n: 2 }, null, args)) as ExecutionResult;
    expect(again.extensions).toEqual({ warnings: [{ code: 'DEGRADED', message: 'warned by ws:1' }] });
    expect(context.warnings).toBeNull();
    expect(shared.stats.compiled).toBe(name === 'compiled' ? 2 : 0);
  });
});
