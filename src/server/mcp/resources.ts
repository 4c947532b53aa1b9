// The MCP endpoint's resources (docs/decisions/060, "Events as resources"): the SDL and the catalog, and each
// verification, identification, mobile-ID authentication and provisioning as a resource template. A resource is read
// by running the GraphQL read of its kind through the execution pipeline, like a tool call, so the caller's scopes,
// the owner check (another app's id reads as null, then "not found", exactly as an unknown one), the cost and rate
// limits and masking hold. A resource changes when the durable event log records an event of its kind and key; the
// event reader (src/events/cursor-read.ts, given by the composition root) says so on every replica.
import type {
  CallToolResult,
  ReadResourceResult,
  Resource,
  ResourceLink,
  ResourceTemplateType,
} from '@modelcontextprotocol/server';
import type { GraphQLFormattedError } from 'graphql';

import type { Caller } from '../../auth/caller.js';
import { ErrorCode } from '../../errors.js';
import { EVENT_KINDS as KINDS } from '../../events/kinds.js';
import type { Pipeline } from '../../execution/pipeline.js';
import { mcpSdk } from './sdk.js';
import { codeOf, refusalFor, type OperationTool } from './tools.js';

/** An event as the reader hands it out: its kind and key name the resource; its payload is never shown here. */
export interface LoggedEvent {
  readonly kind: string;
  readonly key: string;
  readonly receivedAt: Date;
  cursor?: string;
}

/** The app's events after a cursor, and their changes, as src/events/cursor-read.ts EventReader offers them. */
export interface EventSource {
  /**
   * Spends what one read of the caller's events costs (a point of its reads budget, as a GraphQL subscription spends),
   * or throws the refusal (RATE_LIMITED, a GraphQLError): each wait_for_events and each subscriptions/listen, before it
   * reads or watches anything.
   */
  admit(caller: Caller): Promise<void>;
  waitForEvents(
    caller: Caller,
    options: {
      cursor?: string | null;
      kinds: readonly string[];
      timeoutSeconds: number;
      signal?: AbortSignal;
      limit?: number;
    },
  ): Promise<{ events: LoggedEvent[]; cursor: string; timedOut: boolean; since: string }>;
  onResourceChanged(caller: Caller, kind: string, key: string, listener: (event: LoggedEvent) => void): () => void;
}

/** One kind of event-backed resource: its URI template, the event kind and the GraphQL read that presents it. */
interface EventKind {
  /** The event log's kind (src/identity, src/mobile-id, src/cloud: the bus key of each). */
  readonly kind: string;
  readonly prefix: string;
  readonly variable: string;
  readonly name: string;
  readonly title: string;
  readonly description: string;
  /** The built-in tool whose operation reads it. */
  readonly rootField: string;
  /** The tool's variables for a key. */
  readonly variables: (key: string) => Record<string, unknown>;
  /** The read's value for this key in the tool's data; null/undefined is "not found". */
  readonly pick: (data: Record<string, unknown>) => unknown;
}

export const EVENT_KINDS: readonly EventKind[] = [
  {
    kind: KINDS.verification,
    prefix: 'identity://verifications/',
    variable: 'externalId',
    name: 'verification',
    title: 'Verification',
    description:
      'A verification registered through this gateway by your app, by its externalId: its result from the verification interface. Updated when its completion callback arrives.',
    rootField: 'verificationResults',
    variables: (key) => ({ externalIds: [key] }),
    pick: (data) => (data.verificationResults as unknown[] | undefined)?.[0],
  },
  {
    kind: KINDS.identification,
    prefix: 'identity://identifications/',
    variable: 'id',
    name: 'identification',
    title: 'Identification',
    description: 'An identification link your app created, by its id. Updated when the identification completes.',
    rootField: 'identification',
    variables: (key) => ({ id: key }),
    pick: (data) => data.identification,
  },
  {
    kind: KINDS.mobileId,
    prefix: 'mobileid://authentications/',
    variable: 'authReqId',
    name: 'mobile-id-authentication',
    title: 'Mobile-ID authentication',
    description:
      'The end of a mobile-ID authentication, by its auth_req_id, once the mobile identity service notified it on a token your app issued. Updated when the notification arrives.',
    rootField: 'mobileIdAuthentication',
    variables: (key) => ({ authReqId: key }),
    pick: (data) => data.mobileIdAuthentication,
  },
  {
    kind: KINDS.provisioning,
    prefix: 'cloud://provisionings/',
    variable: 'id',
    name: 'provisioning',
    title: 'Provisioning',
    description:
      'A composite provisioning your app started (provision_kafka_cluster, provision_virtual_machine), by its id, with the state of each step. Updated as each step ends: the way to follow a long provisioning.',
    rootField: 'provisioning',
    variables: (key) => ({ id: key }),
    pick: (data) => data.provisioning,
  },
];

export const SDL_URI = 'graphql://schema';
export const CATALOG_URI = 'cloud://catalog';

/** A key as it appears in a URI: percent-encoded, so any key round-trips. */
const encodeKey = (key: string) => encodeURIComponent(key);

interface Bound {
  readonly kind: EventKind;
  readonly tool: OperationTool;
}

/** The resources of the endpoint, worked out once at start-up. */
export class McpResources {
  private readonly kinds: Bound[];
  private readonly catalog: OperationTool | undefined;

  constructor(
    private readonly pipeline: Pipeline,
    tools: readonly OperationTool[],
    /** The SDL, when introspection is on (GRAPHQL_INTROSPECTION): an agent sees no more of the schema than any app. */
    private readonly sdl: string | null,
    readonly events: EventSource,
  ) {
    const byField = new Map(tools.filter((t) => t.rootField).map((t) => [t.rootField!, t]));
    this.kinds = EVENT_KINDS.flatMap((kind) => {
      const tool = byField.get(kind.rootField);
      return tool ? [{ kind, tool }] : [];
    });
    this.catalog = byField.get('catalog');
  }

  /** Whether there is any resource at all (the capability is declared then). */
  get offered(): boolean {
    return this.kinds.length > 0 || this.catalog !== undefined || this.sdl !== null;
  }

  /** Whether some kind of event is a resource (wait_for_events is offered then). */
  get hasEvents(): boolean {
    return this.kinds.length > 0;
  }

  /** The fixed resources `caller` may read. */
  list(caller: Caller): Resource[] {
    const out: Resource[] = [];
    if (this.sdl !== null)
      out.push({
        uri: SDL_URI,
        name: 'schema',
        title: 'GraphQL schema',
        description: "The gateway's GraphQL schema (SDL): every operation the tools run, with its descriptions.",
        mimeType: 'application/graphql',
      });
    if (this.catalog && !refusalFor(this.catalog, caller)) {
      out.push({
        uri: CATALOG_URI,
        name: 'catalog',
        title: 'Cloud catalog',
        description: this.catalog.description,
        mimeType: 'application/json',
      });
    }
    return out;
  }

  /** The resource templates `caller` may read (one per event kind its scopes allow). */
  templates(caller: Caller): ResourceTemplateType[] {
    return this.kinds
      .filter((b) => !refusalFor(b.tool, caller))
      .map(({ kind }) => ({
        uriTemplate: `${kind.prefix}{${kind.variable}}`,
        name: kind.name,
        title: kind.title,
        description: kind.description,
        mimeType: 'application/json',
      }));
  }

  /** The resource a URI names: its kind and key, or null for a URI of no template. */
  parse(uri: string): { bound: Bound; key: string } | null {
    for (const bound of this.kinds) {
      if (!uri.startsWith(bound.kind.prefix)) continue;
      const raw = uri.slice(bound.kind.prefix.length);
      if (!raw || raw.includes('/')) return null;
      try {
        return { bound, key: decodeURIComponent(raw) };
      } catch {
        return null;
      }
    }
    return null;
  }

  /** The URI of the resource an event changes. */
  uriOf(kind: string, key: string): string | null {
    const found = this.kinds.find((b) => b.kind.kind === kind);
    return found ? `${found.kind.prefix}${encodeKey(key)}` : null;
  }

  /** The event kinds that are resources. */
  get eventKinds(): string[] {
    return this.kinds.map((b) => b.kind.kind);
  }

  /** The event kinds whose resources `caller` may read. */
  readableKinds(caller: Caller): string[] {
    return this.kinds.filter((b) => !refusalFor(b.tool, caller)).map((b) => b.kind.kind);
  }

  /** The scope `caller` lacks to read events of `kind`, or null. */
  missingScope(caller: Caller, kind: string): { message: string; scope: string | undefined } | null {
    const bound = this.kinds.find((b) => b.kind.kind === kind);
    return bound ? refusalFor(bound.tool, caller) : { message: `no event kind ${kind}`, scope: undefined };
  }

  /**
   * Reads a resource for `caller`. A URI of no resource, a key the caller does not own, and one that does not exist
   * all throw the same ResourceNotFoundError (no oracle); a read the caller's scopes refuse says which scope.
   */
  async read(uri: string, caller: Caller, requestId: string): Promise<ReadResourceResult> {
    if (uri === SDL_URI && this.sdl !== null)
      return { contents: [{ uri, mimeType: 'application/graphql', text: this.sdl }] };
    if (uri === CATALOG_URI && this.catalog)
      return this.run(this.catalog, {}, uri, caller, requestId, (data) => data.catalog);
    const found = this.parse(uri);
    if (!found) throw new (mcpSdk().ResourceNotFoundError)(uri);
    return this.run(
      found.bound.tool,
      found.bound.kind.variables(found.key),
      uri,
      caller,
      requestId,
      found.bound.kind.pick,
    );
  }

  private async run(
    tool: OperationTool,
    variables: Record<string, unknown>,
    uri: string,
    caller: Caller,
    requestId: string,
    pick: (data: Record<string, unknown>) => unknown,
  ): Promise<ReadResourceResult> {
    const outcome = await this.pipeline.runOperation({
      caller,
      params: { ...tool.params, variables },
      transport: 'mcp',
      requestId,
      allow: [tool.estimate.operation],
    });
    const errors = outcome.ok ? outcome.result.errors : outcome.errors;
    if (errors?.length) {
      const first = errors[0]!;
      const scope = first.extensions?.scope;
      const retryAfter = first.extensions?.retryAfter;
      const { ProtocolError, ProtocolErrorCode } = mcpSdk();
      // The read's variables hold nothing but the id in the URI: a refusal of its input is one of the URI the client
      // sent, a bad param (-32602), said of that id, not of the read's variable, which the client never sent.
      if (first.extensions?.code === ErrorCode.BAD_USER_INPUT)
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, `${uri}: its id ${reasonOf(first)}`, {
          uri,
          code: ErrorCode.BAD_USER_INPUT,
        });
      // A refusal (scope, rate limit, cost) is said as it is; it depends on the caller, never on whose the id is.
      throw new ProtocolError(ProtocolErrorCode.InvalidRequest, `${uri}: ${first.message}`, {
        uri,
        code: codeOf(first),
        ...(typeof scope === 'string' ? { scope } : {}),
        ...(typeof retryAfter === 'number' ? { retryAfterSeconds: retryAfter } : {}),
      });
    }
    const value = outcome.ok ? pick((outcome.result.data ?? {}) as Record<string, unknown>) : null;
    if (value === null || value === undefined) throw new (mcpSdk().ResourceNotFoundError)(uri);
    return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify(value) }] };
  }

  /** Whether `watch` signals the changes of `uri` to `caller`: a resource's URI, of a kind its scopes read. */
  watchable(caller: Caller, uri: string): boolean {
    const found = this.parse(uri);
    return found !== null && !refusalFor(found.bound.tool, caller);
  }

  /**
   * Calls `changed(uri)` whenever the durable log records an event for one of `uris` that `caller` may read, on any
   * replica. URIs of no resource, and of kinds outside the caller's scopes, are listened to as if they were resources
   * that never change (no oracle). Returns the function that stops it.
   */
  watch(caller: Caller, uris: readonly string[], changed: (uri: string) => void): () => void {
    const offs: (() => void)[] = [];
    for (const uri of new Set(uris)) {
      const found = this.parse(uri);
      if (!found || refusalFor(found.bound.tool, caller)) continue;
      offs.push(this.events.onResourceChanged(caller, found.bound.kind.kind, found.key, () => changed(uri)));
    }
    return () => {
      for (const off of offs.splice(0)) off();
    };
  }
}

/**
 * Why an input was refused, without the field it names (`extensions.field`): what follows the field where the message
 * opens with it, as a resolver's refusal (`externalIds[0]: must not be empty`, src/errors.ts badUserInput) and the
 * pipeline's of unsound variables (`Variable "$id" must not contain …; nothing was run`) do.
 */
function reasonOf(error: GraphQLFormattedError): string {
  const field = error.extensions?.field;
  if (typeof field === 'string')
    for (const named of [`${field}: `, `Variable "$${field}" `])
      if (error.message.startsWith(named)) return error.message.slice(named.length).replace(/; nothing was run$/, '');
  return 'is not one this gateway takes';
}

/**
 * Long provisioning (docs/decisions/060): a tool result that started or replayed a provisioning links its resource,
 * which the agent reads, listens to (notifications/resources/updated as each step ends) or waits on
 * (wait_for_events with kinds [provisioning]), on any replica.
 */
export function linkProvisionings(resources: McpResources, result: CallToolResult): CallToolResult {
  if (result.isError || !result.structuredContent) return result;
  const links: ResourceLink[] = [];
  for (const value of Object.values(result.structuredContent)) {
    const id = (value as { provisioning?: { id?: unknown } } | null)?.provisioning?.id;
    const uri = typeof id === 'string' ? resources.uriOf(KINDS.provisioning, id) : null;
    if (uri === null) continue;
    links.push({
      type: 'resource_link',
      uri,
      name: 'provisioning',
      title: `Provisioning ${id as string}`,
      mimeType: 'application/json',
      description:
        'Its steps as they end: read this resource, listen to it (notifications/resources/updated), or call wait_for_events with kinds ["provisioning"].',
    });
  }
  return links.length ? { ...result, content: [...result.content, ...links] } : result;
}
