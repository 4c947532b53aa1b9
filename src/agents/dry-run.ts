// An agent's plan shows, and its hash covers, the exact upstream requests its document would send (docs/decisions/060):
// each root field's arguments as the resolver would get them (graphql-js's own coercion of the stored text and
// variables), run through the code that sends them with nothing sent or written: a cloud creation through
// CloudService.withDryRun, a provisioning through its plan (ProvisioningPlanner, the same dry run), an identity
// check through IdentityService.plannedRequest.
import { getArgumentValues, getOperationAST, getVariableValues, Kind, parse, type GraphQLSchema } from 'graphql';

import type { Caller } from '../auth/caller.js';
import { creationHeaders } from '../cloud/client.js';
import type { CloudService, Creation } from '../cloud/service.js';
import { maskSecrets } from '../cloud/wire.js';
import type { ProvisionKafkaClusterInput, ProvisionVirtualMachineInput } from '../generated/graphql.js';
import type { IdentityService } from '../identity/service.js';
import type { ProvisioningPlanner } from '../provisioning/plan.js';
import type { LedgerRecord } from '../store/ledger.js';
import { upstreamKey } from '../upstream/idempotency.js';
import { UPSTREAM_WRITES } from './writes.js';

export interface PlannedRequest {
  /** The upstream it goes to: cloud, identification, identification-prodlike, verification, rfm. */
  readonly upstream: string;
  readonly method: 'POST';
  readonly path: string;
  /** As sent, the token masked: `authorization: Bearer ***`. */
  readonly headers: readonly { name: string; value: string }[];
  /** As sent, secrets masked (passwords, a verification's callback token). */
  readonly body: unknown;
}

export interface PlannedStep {
  /** The root field's response key, and for a provisioning its step (`provisionKafkaCluster.subnet`). */
  readonly name: string;
  readonly action: 'CREATE' | 'REUSE' | 'SKIP';
  readonly request: PlannedRequest | null;
}

export interface PlanError {
  readonly field: string | null;
  readonly code: string;
  readonly message: string;
}

export type DryRunOutcome =
  | {
      readonly ok: true;
      readonly steps: readonly PlannedStep[];
      /** The bodies as sent, secrets in clear: hashed with the plan, never stored or shown. */
      readonly sent: readonly unknown[];
    }
  | { readonly ok: false; readonly errors: readonly PlanError[] };

export interface DryRunOptions {
  readonly schema: GraphQLSchema;
  readonly cloud: CloudService;
  readonly plans: ProvisioningPlanner;
  readonly identity: IdentityService;
  /** The cloud ledger as validation reads it (a parent's record). */
  readonly lookup: (id: string) => Promise<LedgerRecord | null>;
}

const TOKEN = { name: 'authorization', value: 'Bearer ***' };

function headersOf(h: Record<string, string>): { name: string; value: string }[] {
  return [...Object.entries(h).map(([name, value]) => ({ name, value })), TOKEN];
}

/** A refusal a plan shows: the gateway's own errors (BAD_USER_INPUT naming the field); anything else is thrown on. */
function planError(err: unknown): PlanError {
  const ext = (err as { extensions?: Record<string, unknown> }).extensions;
  if (!ext || typeof ext.code !== 'string') throw err;
  return {
    field: typeof ext.field === 'string' ? ext.field : null,
    code: ext.code,
    message: (err as Error).message,
  };
}

export class AgentDryRun {
  constructor(private readonly o: DryRunOptions) {}

  /** The requests `document` (an agent plan's stored text, keys filled in) would send with `variables`. */
  async run(
    caller: Caller,
    document: string,
    operationName: string | null,
    variables: Record<string, unknown>,
  ): Promise<DryRunOutcome> {
    const parsed = parse(document);
    const operation = getOperationAST(parsed, operationName);
    const mutation = this.o.schema.getMutationType();
    if (!operation || !mutation)
      return { ok: false, errors: [{ field: null, code: 'BAD_REQUEST', message: 'no operation' }] };
    const coerced = getVariableValues(this.o.schema, operation.variableDefinitions ?? [], variables);
    if (coerced.errors)
      return {
        ok: false,
        errors: coerced.errors.map((e) => ({ field: null, code: 'BAD_USER_INPUT', message: e.message })),
      };
    const steps: PlannedStep[] = [];
    const sent: unknown[] = [];
    const errors: PlanError[] = [];
    for (const node of operation.selectionSet.selections) {
      if (node.kind !== Kind.FIELD) continue;
      const field = node.name.value;
      if (!UPSTREAM_WRITES[field]) continue;
      const args = getArgumentValues(mutation.getFields()[field]!, node, coerced.coerced) as {
        input: unknown;
        idempotencyKey?: string | null;
      };
      const name = (node.alias ?? node.name).value;
      const key = args.idempotencyKey ?? null;
      try {
        if (field === 'provisionKafkaCluster' || field === 'provisionVirtualMachine') {
          const plan =
            field === 'provisionKafkaCluster'
              ? await this.o.plans.planKafkaCluster(caller, args.input as ProvisionKafkaClusterInput, key)
              : await this.o.plans.planVirtualMachine(caller, args.input as ProvisionVirtualMachineInput, key);
          const invalid = [...plan.errors, ...plan.steps.flatMap((st) => st.errors)];
          if (!plan.valid || invalid.length) {
            errors.push(...invalid);
            continue;
          }
          for (const st of plan.steps) {
            steps.push({
              name: `${name}.${st.name}`,
              action: st.action,
              request: st.request && { upstream: 'cloud', ...st.request },
            });
            // A provisioning's bodies are shown with secrets masked; its input (in the plan's variables) is hashed in clear.
            if (st.request) sent.push(st.request.body);
          }
        } else if (UPSTREAM_WRITES[field] === 'cloud') {
          let recorded: Creation | null = null;
          const dry = this.o.cloud.withDryRun({
            lookup: this.o.lookup,
            async create(_who, _key, creation) {
              recorded = creation;
              throw DONE;
            },
          });
          try {
            await (dry[field as 'createProject'] as (c: Caller, i: unknown, k: string | null) => Promise<unknown>).call(
              dry,
              caller,
              args.input,
              key,
            );
          } catch (err) {
            if (err !== DONE) throw err;
          }
          const creation = recorded as unknown as Creation;
          steps.push({
            name,
            action: 'CREATE',
            request: {
              upstream: 'cloud',
              method: 'POST',
              path: creation.request.path,
              headers: headersOf(creationHeaders(creation.accept, keyShown(caller, key))),
              body: maskSecrets(creation.request.body),
            },
          });
          sent.push(creation.request.body);
        } else {
          const planned = this.o.identity.plannedRequest(
            caller,
            field as 'createIdentification',
            args.input,
            key ?? KEY_AT_RUN_TIME,
          );
          steps.push({
            name,
            action: 'CREATE',
            request: {
              upstream: planned.upstream,
              method: 'POST',
              path: planned.path,
              headers: headersOf({ 'content-type': 'application/json', 'idempotency-key': keyShown(caller, key) }),
              body: planned.shown,
            },
          });
          sent.push(planned.body);
        }
      } catch (err) {
        errors.push(planError(err));
      }
    }
    return errors.length ? { ok: false, errors } : { ok: true, steps, sent };
  }
}

/** Thrown by the recording cloud once it has the creation: nothing after it (the ledger write) runs. */
const DONE = Symbol('recorded');
const KEY_AT_RUN_TIME = '(derived at run time)';

function keyShown(caller: Caller, key: string | null): string {
  return key === null ? KEY_AT_RUN_TIME : upstreamKey(caller.scope, key);
}
