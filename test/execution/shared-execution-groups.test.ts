import { queryObjects } from 'node:v8';
import { makeExecutableSchema } from '@graphql-tools/schema';
import { parse, type ExecutionArgs } from 'graphql';
import { describe, expect, it } from 'vitest';

import { APP_GRANTS, Grants, type Caller } from '../../src/auth/caller.js';
import { Group, SharedExecution } from '../../src/execution/shared.js';
import { createContext } from '../../src/graphql/context.js';
import { createLogger } from '../../src/logger.js';
import type { Services } from '../../src/services.js';

/**
 * The groups of a shared execution (src/execution/shared.ts, docs/decisions/030 and 100): subscriptions whose
 * executions would be identical (document, operation, caller's scope and grants, variables) hold one Group, found at
 * subscribe time, and share one execution per event; any difference makes another group; and a group nothing holds
 * any more is collected.
 */
const schema = makeExecutableSchema({
  typeDefs: /* GraphQL */ `
    type Query {
      ok: Boolean
    }
    type Subscription {
      tick(id: ID!): Int!
    }
  `,
  resolvers: {
    Subscription: { tick: { subscribe: () => undefined, resolve: (event: { n: number }) => event.n } },
  },
});
const document = parse('subscription Tick($id: ID!) { tick(id: $id) }');
const services = {} as unknown as Services;
const logger = createLogger({ level: 'silent' } as never);
const appA: Caller = { scope: 'app:a', app: 'a', grants: APP_GRANTS };

function argsOf(caller: Caller, id: string): ExecutionArgs {
  return {
    schema,
    document,
    operationName: 'Tick',
    variableValues: { id },
    contextValue: createContext(services, caller, `ws:${id}`, logger),
  };
}

describe('the groups of a shared execution', () => {
  it('identical subscriptions hold one group and share one execution per event; any difference is another group', () => {
    const shared = new SharedExecution(schema);
    // Each subscription's key is a string of its own, as each subscribe message makes one.
    const members = Array.from({ length: 5 }, () => argsOf(appA, ['id', '1'].join('-')));
    const groups = members.map((args) => shared.groupOf(args));
    expect(groups[0]).toBeInstanceOf(Group);
    expect(groups.every((g) => g === groups[0])).toBe(true);
    const others = [
      shared.groupOf(argsOf(appA, 'id-2')),
      shared.groupOf(argsOf({ ...appA, scope: 'app:b', app: 'b' }, 'id-1')),
      shared.groupOf(argsOf({ ...appA, grants: Grants.of(['mobile-id:read']) }, 'id-1')),
      shared.groupOf({ ...argsOf(appA, 'id-1'), document: parse('subscription Tick($id: ID!) { tick(id: $id) }') }),
    ];
    expect(new Set([groups[0], ...others]).size).toBe(5);

    const event = { n: 7 };
    const results = members.map((args, i) => shared.execute(event, groups[i]!, args));
    expect(results.every((r) => r === results[0])).toBe(true);
    expect(results[0]).toMatchObject({ data: { tick: 7 } });
    expect(shared.stats).toMatchObject({ executions: 1, shared: 4 });
    // Another group of the same event executes on its own.
    expect(shared.execute(event, others[0]!, argsOf(appA, 'id-2'))).not.toBe(results[0]);
    expect(shared.stats.executions).toBe(2);
  });

  it('a group no subscription holds is collected, and the same subscription later gets a group of its own', async () => {
    const shared = new SharedExecution(schema);
    // Live groups after a full collection (queryObjects collects first); what earlier tests left is the base.
    const live = () => queryObjects(Group, { format: 'count' }) as number;
    const before = live();
    (() => {
      const held = Array.from({ length: 50 }, (_, i) => shared.groupOf(argsOf(appA, `gone-${i}`)));
      expect(new Set(held).size).toBe(50);
      expect(live()).toBeGreaterThanOrEqual(before + 50);
    })();
    // A WeakRef keeps its target until the end of the job that made or read it: the groups can go after this turn.
    await new Promise((resolve) => setImmediate(resolve));
    expect(live()).toBeLessThanOrEqual(before);
    const again = shared.groupOf(argsOf(appA, 'gone-0'));
    expect(again).toBeInstanceOf(Group);
    expect(shared.execute({ n: 1 }, again, argsOf(appA, 'gone-0'))).toMatchObject({ data: { tick: 1 } });
  });
});
