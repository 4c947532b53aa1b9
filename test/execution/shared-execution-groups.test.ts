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
 * subscribe time, and share one execution per event; any difference makes another group; and a group goes with its
 * last member.
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

  it('a group of one executes each event for its member and keeps nothing for the turn; with two, the last shares the first’s', () => {
    const shared = new SharedExecution(schema);
    const args = argsOf(appA, 'alone-1');
    const group = shared.groupOf(args)!;
    const event = { n: 3 };
    const first = shared.execute(event, group, args);
    expect(first).toMatchObject({ data: { tick: 3 } });
    // Nothing was kept: the same event asked again (which no stream does) executes again.
    expect(shared.execute(event, group, args)).not.toBe(first);
    expect(shared.stats).toMatchObject({ executions: 2, shared: 0 });
    // With a second member the group's result is kept for the turn and shared, also after the first member, having
    // got it, left the group (as a stream ended by its last result does) and the second is the last one.
    const second = argsOf(appA, 'alone-1');
    expect(shared.groupOf(second)).toBe(group);
    const other = { n: 4 };
    const a = shared.execute(other, group, args);
    shared.leave(group);
    expect(shared.execute(other, group, second)).toBe(a);
    expect(shared.stats).toMatchObject({ executions: 3, shared: 1 });
  });

  it('a group goes with its last member, and the same subscription later gets a group of its own', () => {
    const shared = new SharedExecution(schema);
    const base = shared.liveGroups;
    const held = Array.from({ length: 50 }, (_, i) => shared.groupOf(argsOf(appA, `gone-${i}`))!);
    expect(new Set(held).size).toBe(50);
    // A second member of the first group: the group stays while either holds it.
    const twice = shared.groupOf(argsOf(appA, 'gone-0'))!;
    expect(twice).toBe(held[0]);
    expect(shared.liveGroups - base).toBe(50);
    for (const group of held) shared.leave(group);
    expect(shared.liveGroups - base).toBe(1);
    expect(shared.groupOf(argsOf(appA, 'gone-0'))).toBe(twice);
    shared.leave(twice);
    shared.leave(twice);
    expect(shared.liveGroups - base).toBe(0);
    // A new subscription with the same key makes a new group, which executes as any other.
    const again = shared.groupOf(argsOf(appA, 'gone-0'));
    expect(again).toBeInstanceOf(Group);
    expect(again).not.toBe(twice);
    expect(shared.execute({ n: 1 }, again, argsOf(appA, 'gone-0'))).toMatchObject({ data: { tick: 1 } });
  });
});
