import type { Scope } from '../auth/caller.js';
import { badUserInput } from '../errors.js';
import type { Resolvers } from '../generated/graphql.js';
import { verificationNodeId } from '../identity/service.js';
import type { ResourceKind } from '../store/ledger.js';
import type { Outcome } from '../upstream/idempotency.js';
import { DateTimeScalar, DecimalStringScalar, JSONScalar, UUIDScalar } from './scalars.js';

/** GraphQL type of each ledger kind, for `node(id)`. */
/** The payload of a creation mutation: its result under `field`, and the keys it ran under. */
type CreationPayload<F extends string, V> = { [P in F]: V } & {
  idempotencyKey: string;
  upstreamIdempotencyKey: string;
  replayed: boolean;
};

/**
 * The payload of every creation mutation: its result under `field` (through `view`, where its GraphQL type is a view
 * of the record), and the keys it ran under.
 */
export function creationPayload<F extends string, T>(field: F, outcome: Outcome<T>): CreationPayload<F, T>;
export function creationPayload<F extends string, T, V>(
  field: F,
  outcome: Outcome<T>,
  view: (result: T) => V,
): CreationPayload<F, V>;
export function creationPayload<F extends string, T, V>(
  field: F,
  outcome: Outcome<T>,
  view?: (result: T) => V,
): CreationPayload<F, T | V> {
  return {
    [field]: view ? view(outcome.result) : outcome.result,
    idempotencyKey: outcome.idempotencyKey,
    upstreamIdempotencyKey: outcome.upstreamIdempotencyKey,
    replayed: outcome.replayed,
  } as CreationPayload<F, T | V>;
}

/**
 * The page size a list argument (`first`) asks for: its default when not given, and at most `max`, the most the
 * schema says the list returns (a larger size is clamped to it: every row there is, up to the bound). A size below 1
 * is refused, BAD_USER_INPUT naming the argument: no page holds no rows or a negative number of them, so it is a
 * mistake, never read as the smallest page.
 */
export function pageSize(argument: string, value: number | null | undefined, fallback: number, max: number): number {
  if (value == null) return fallback;
  if (value < 1) throw badUserInput(argument, `must be 1 or more (at most ${max} are returned)`);
  return Math.min(value, max);
}

export const NODE_TYPES: Record<ResourceKind, string> = {
  project: 'Project',
  network: 'Network',
  subnet: 'Subnet',
  ip_address: 'IpAddress',
  kafka_cluster: 'KafkaCluster',
  kafka_topic: 'KafkaTopic',
  kafka_user: 'KafkaUser',
  virtual_machine: 'VirtualMachine',
  identification: 'Identification',
  verification: 'Verification',
};

/**
 * The read scope an object of each kind needs through `node(id)` (docs/decisions/046): `node` itself is open to every
 * app, and answers an object the app may not read exactly as an id that does not exist.
 */
export const NODE_READ_SCOPES: Record<ResourceKind, Scope> = {
  project: 'cloud:read',
  network: 'cloud:read',
  subnet: 'cloud:read',
  ip_address: 'cloud:read',
  kafka_cluster: 'cloud:read',
  kafka_topic: 'cloud:read',
  kafka_user: 'cloud:read',
  virtual_machine: 'cloud:read',
  identification: 'identity:read',
  verification: 'identity:read',
};

export const commonResolvers: Resolvers = {
  UUID: UUIDScalar,
  DateTime: DateTimeScalar,
  JSON: JSONScalar,
  DecimalString: DecimalStringScalar,
  Query: {
    apps: async (_p, _a, ctx) => {
      const { configured, activity } = ctx.services.apps;
      const seen = await activity.all();
      const jwtOf = (name: string) => {
        const s = seen.jwt.get(name);
        return s ? { scopes: s.scopes.split(' ').filter(Boolean), lastActivityAt: new Date(s.lastSeenAt) } : null;
      };
      const latest = (...times: (number | undefined)[]) => {
        const at = Math.max(...times.map((t) => t ?? -Infinity));
        return at === -Infinity ? null : new Date(at);
      };
      const names = new Set(configured.map((a) => a.name));
      // Configured apps (with the JWT activity under their name, when AUTH_APPS makes a client that app), then the JWT
      // apps some replica has seen (an app removed from the configuration is not listed).
      return [
        ...configured.map((a) => ({
          name: a.name,
          source: a.source,
          scopes: [...a.scopes],
          keys: a.keys,
          lastActivityAt: latest(seen.keys.get(a.name), seen.jwt.get(a.name)?.lastSeenAt),
          jwt: jwtOf(a.name),
        })),
        ...[...seen.jwt]
          .filter(([name]) => !names.has(name))
          .map(([name, s]) => ({
            name,
            source: 'JWT' as const,
            scopes: s.scopes.split(' ').filter(Boolean),
            keys: null,
            lastActivityAt: new Date(s.lastSeenAt),
            jwt: jwtOf(name),
          })),
      ].sort((a, b) => a.name.localeCompare(b.name));
    },
    node: async (_p, { id }, ctx) => {
      const lowercase = verificationNodeId(id);
      // A verification's id is a UUID kept in lowercase (src/identity/service.ts): named in capitals, it is the same
      // verification. Any other record's id is found only as it is written.
      const record =
        (await ctx.loaders.resource.load(id)) ??
        (lowercase === null ? null : await ctx.loaders.ofKind(lowercase, 'verification'));
      return record && ctx.caller.grants.has(NODE_READ_SCOPES[record.kind]) ? record : null;
    },
  },
  Mutation: {
    ping: () => true,
  },
  Subscription: {
    heartbeat: {
      subscribe: (_p, { intervalMs, count }) => heartbeats(intervalMs ?? 1000, count ?? 3),
    },
  },
  Node: {
    __resolveType: (r) => NODE_TYPES[r.kind] as never,
  },
};

type Heartbeat = { heartbeat: Date };
const HEARTBEATS_DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/**
 * `n` heartbeats `interval` ms apart, the first at once. A plain iterator rather than an async generator: its
 * `return()` ends a `next()` waiting between two ticks at once (and clears the timer), where a generator would hold
 * it until its sleep is over, so a subscription stopped or ended at its token's expiry ends now. Bad arguments are
 * the first `next()`'s error, as a generator's would be.
 */
function heartbeats(interval: number, n: number): AsyncGenerator<Heartbeat> {
  let sent = 0;
  let done = false;
  let timer: NodeJS.Timeout | undefined;
  let waiting: ((r: IteratorResult<Heartbeat>) => void) | null = null;
  const finish = () => {
    done = true;
    clearTimeout(timer);
    const w = waiting;
    waiting = null;
    w?.(HEARTBEATS_DONE);
  };
  const beat = (): IteratorResult<Heartbeat> => {
    sent += 1;
    return { done: false, value: { heartbeat: new Date() } };
  };
  const iterator = {
    async next(): Promise<IteratorResult<Heartbeat>> {
      if (sent === 0 && !done) {
        const bad =
          interval < 10 || interval > 60_000
            ? badUserInput('intervalMs', 'must be from 10 to 60000')
            : n < 1 || n > 1000
              ? badUserInput('count', 'must be from 1 to 1000')
              : null;
        if (bad !== null) {
          done = true;
          throw bad;
        }
      }
      if (done || sent >= n) {
        done = true;
        return HEARTBEATS_DONE;
      }
      if (sent === 0) return beat();
      return new Promise((resolve) => {
        waiting = resolve;
        timer = setTimeout(() => {
          waiting = null;
          resolve(beat());
        }, interval);
      });
    },
    async return(): Promise<IteratorResult<Heartbeat>> {
      finish();
      return HEARTBEATS_DONE;
    },
    async throw(err: unknown): Promise<IteratorResult<Heartbeat>> {
      finish();
      throw err;
    },
    [Symbol.asyncIterator]() {
      return iterator;
    },
  } as AsyncGenerator<Heartbeat>;
  return iterator;
}
