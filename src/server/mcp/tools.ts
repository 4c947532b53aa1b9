// The tools of the MCP endpoint (docs/decisions/060): named GraphQL operations, never free GraphQL for writes. The
// built-in set covers the main flows, one tool per root field with a selection made from the schema; the trusted
// documents' named operations are tools too. The built-in tools are worked out once, at start-up; the trusted
// documents' at start-up and again after each reload that changed the manifest.
import {
  Kind,
  parse,
  type GraphQLField,
  type GraphQLFormattedError,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';

import { classify, type Classified, type OperationKind } from '../../agents/writes.js';
import type { Caller } from '../../auth/caller.js';
import { ErrorCode } from '../../errors.js';
import type { OperationEstimate, OperationParams, Pipeline } from '../../execution/pipeline.js';
import { requiredScopesOf } from '../../graphql/schema.js';
import { defaultSelection, resultJsonSchema, variablesJsonSchema, type JsonSchema } from './shapes.js';

/**
 * What a tool does, which decides how MCP_MUTATIONS treats it: read from its operation's root fields
 * (src/agents/writes.ts), never from a variable's name. `read`: a query, always offered; `creation`: a mutation with a
 * field that reaches an upstream, planned and approved under `approve`; `write`: a mutation of harmless writes only
 * (a notification token), run at once unless MCP_MUTATIONS is none.
 */
export type ToolKind = OperationKind;

export interface ToolAnnotations {
  readonly title?: string;
  readonly readOnlyHint: boolean;
  readonly destructiveHint: boolean;
  readonly idempotentHint: boolean;
  readonly openWorldHint: boolean;
}

/** A tool that runs one GraphQL operation through the execution pipeline. */
export interface OperationTool {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  readonly kind: ToolKind;
  /** The root field of a built-in tool (null for a trusted document's operation). */
  readonly rootField: string | null;
  readonly params: Pick<OperationParams, 'query' | 'documentId' | 'operationName'>;
  readonly inputSchema: JsonSchema;
  readonly outputSchema: JsonSchema;
  readonly annotations: ToolAnnotations;
  /** What its root fields do: the approve scopes they need, why it cannot be planned, the key variables a plan fills. */
  readonly classified: Classified;
  readonly estimate: OperationEstimate;
  /**
   * The document's text in the manifest the tool was made from, at start-up or at the last reload (a plan stores the
   * text it runs, with its keys filled in).
   */
  readonly text: string;
  /** Its operation's name in `text` (undefined for the only, anonymous, operation). */
  readonly operationName: string | undefined;
  /** A trusted document's id (a plan checks the manifest's text of it now), or null for a built-in tool. */
  readonly documentId: string | null;
}

/** The root fields that are built-in tools, in the order tools/list shows them. */
const BUILT_IN_FIELDS: readonly { field: string; type: 'query' | 'mutation'; openWorld?: boolean }[] = [
  { field: 'catalog', type: 'query' },
  { field: 'projects', type: 'query' },
  { field: 'project', type: 'query' },
  { field: 'planKafkaCluster', type: 'query' },
  { field: 'planVirtualMachine', type: 'query' },
  { field: 'provisioning', type: 'query' },
  { field: 'identification', type: 'query' },
  { field: 'verificationResults', type: 'query', openWorld: true },
  { field: 'identificationCallbackUrl', type: 'query' },
  { field: 'mobileIdAuthentication', type: 'query' },
  { field: 'createProject', type: 'mutation' },
  { field: 'createNetwork', type: 'mutation' },
  { field: 'createSubnet', type: 'mutation' },
  { field: 'createIpAddress', type: 'mutation' },
  { field: 'createKafkaCluster', type: 'mutation' },
  { field: 'createKafkaTopic', type: 'mutation' },
  { field: 'createKafkaUser', type: 'mutation' },
  { field: 'createVirtualMachine', type: 'mutation' },
  { field: 'provisionKafkaCluster', type: 'mutation' },
  { field: 'provisionVirtualMachine', type: 'mutation' },
  { field: 'createIdentification', type: 'mutation' },
  { field: 'registerVerification', type: 'mutation' },
  { field: 'issueMobileIdNotificationToken', type: 'mutation' },
];

/** `createKafkaCluster` → `create_kafka_cluster`. */
export function snakeCase(name: string): string {
  return name.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();
}

function titleOf(name: string): string {
  const words = snakeCase(name).split('_');
  return [words[0]!.charAt(0).toUpperCase() + words[0]!.slice(1), ...words.slice(1)].join(' ');
}

/** Whether a root field's type is non-null: the selection of a leaf root field is empty. */
function builtInDocument(field: GraphQLField<unknown, unknown>, type: 'query' | 'mutation'): string {
  const defs = field.args.map((a) => `$${a.name}: ${a.type.toString()}`).join(', ');
  const args = field.args.map((a) => `${a.name}: $${a.name}`).join(', ');
  const opName = field.name.charAt(0).toUpperCase() + field.name.slice(1);
  // The scopes the root field asks (its first alternative): fields below asking no more come along.
  const granted = new Set(field.astNode ? (requiredScopesOf(field.astNode)?.[0] ?? []) : []);
  const selection = defaultSelection(field.type, granted);
  return `${type} Mcp${opName}${defs ? `(${defs})` : ''} { ${field.name}${args ? `(${args})` : ''} ${selection} }`;
}

function annotationsOf(kind: ToolKind, openWorld: boolean): ToolAnnotations {
  if (kind === 'read')
    return { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: openWorld };
  // A mutation that reaches an upstream spends money or checks a person's identity and cannot be undone through the
  // gateway; with the same idempotency key (an approved plan's, or one given) a repeat replays instead of creating again.
  if (kind === 'creation')
    return { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: true };
  return { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false };
}

/**
 * The admit stage's view of a tool's operation, or null when the gateway's own limits refuse it (GRAPHQL_MAX_DEPTH set
 * below a built-in tool's depth, say): such a tool is left out and named in `skipped`, since no call of it could run.
 */
function estimateOf(
  pipeline: Pipeline,
  params: OperationParams,
  name: string,
  skipped: string[],
): OperationEstimate | null {
  const estimate = pipeline.estimate(params);
  if (!('ok' in estimate)) return estimate;
  skipped.push(`${name} (${estimate.errors.map((e) => e.message).join('; ')})`);
  return null;
}

/** The built-in tools: one per root field of BUILT_IN_FIELDS that the schema has. */
export function builtInTools(schema: GraphQLSchema, pipeline: Pipeline, skipped: string[]): OperationTool[] {
  const tools: OperationTool[] = [];
  for (const { field: name, type, openWorld } of BUILT_IN_FIELDS) {
    const root = type === 'query' ? schema.getQueryType() : schema.getMutationType();
    const field = root?.getFields()[name];
    if (!field) continue;
    const query = builtInDocument(field, type);
    const document = parse(query);
    const operation = document.definitions[0] as OperationDefinitionNode;
    const toolName = snakeCase(name);
    const params = { query };
    const classified = classify(schema, operation);
    const kind = classified.kind;
    const estimate = estimateOf(pipeline, params, toolName, skipped);
    if (estimate === null) continue;
    const argumentDescriptions = new Map(
      field.args.flatMap((a) => (a.description ? [[a.name, a.description] as const] : [])),
    );
    tools.push({
      name: toolName,
      title: titleOf(name),
      description: (field.description ?? titleOf(name)).trim(),
      kind,
      rootField: name,
      params,
      inputSchema: variablesJsonSchema(schema, operation, argumentDescriptions),
      outputSchema: resultJsonSchema(schema, document, operation),
      annotations: { title: titleOf(name), ...annotationsOf(kind, openWorld ?? kind !== 'read') },
      classified,
      estimate,
      text: query,
      operationName: operation.name!.value,
      documentId: null,
    });
  }
  return tools;
}

/**
 * The names MCP allows a tool (1 to 128 of these characters). A GraphQL name holds none but letters, digits and `_`,
 * so only its length can take an operation's name out of them.
 */
const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/**
 * A named operation of a trusted document: its tool, or, when the GraphQL limits refuse it or its name cannot be a
 * tool's, why (and no tool).
 */
interface DocumentOperation {
  readonly name: string;
  readonly tool: OperationTool | null;
  readonly refused: string | null;
}

/** The named queries and mutations of one trusted document, each made a tool (or refused by the GraphQL limits). */
function documentOperations(
  schema: GraphQLSchema,
  pipeline: Pipeline,
  documentId: string,
  text: string,
): DocumentOperation[] {
  const operations: DocumentOperation[] = [];
  const document = parse(text);
  for (const operation of document.definitions) {
    if (operation.kind !== Kind.OPERATION_DEFINITION || !operation.name || operation.operation === 'subscription')
      continue;
    const name = operation.name.value;
    // Left out where the operator sees it, as the names taken are (`ManifestTools.tools`), not dropped without a word.
    if (!TOOL_NAME.test(name)) {
      operations.push({
        name,
        tool: null,
        refused:
          `${name} of trusted document ${documentId} (an MCP tool's name is 1 to 128 of the characters A-Z, a-z, ` +
          `0-9, _, . and -, and this one is ${name.length} characters long: rename the operation to offer it)`,
      });
      continue;
    }
    const root = schema.getRootType(operation.operation);
    const fields = operation.selectionSet.selections
      .flatMap((s) => (s.kind === Kind.FIELD ? [root?.getFields()[s.name.value]] : []))
      .filter((f) => f !== undefined);
    const argumentDescriptions = new Map<string, string>();
    for (const f of fields)
      for (const a of f.args)
        if (a.description && !argumentDescriptions.has(a.name)) argumentDescriptions.set(a.name, a.description);
    const params = { documentId, operationName: name };
    const classified = classify(schema, operation);
    const kind = classified.kind;
    const refused: string[] = [];
    const estimate = estimateOf(pipeline, params, `${name} of trusted document ${documentId}`, refused);
    if (estimate === null) {
      operations.push({ name, tool: null, refused: refused[0]! });
      continue;
    }
    operations.push({
      name,
      refused: null,
      tool: {
        name,
        title: titleOf(name),
        description: [
          `Trusted operation ${name}.`,
          ...fields.map((f) => `${f.name}: ${(f.description ?? '').trim()}`),
        ].join('\n'),
        kind,
        rootField: null,
        params,
        inputSchema: variablesJsonSchema(schema, operation, argumentDescriptions),
        outputSchema: resultJsonSchema(schema, document, operation),
        annotations: { title: titleOf(name), ...annotationsOf(kind, kind !== 'read') },
        classified,
        estimate,
        text,
        operationName: name,
        documentId,
      },
    });
  }
  return operations;
}

/**
 * The tools of the trusted documents: each named query or mutation of the manifest, by its operation name, run by
 * its document id. A document's description is its operation's leading comment, or the root fields' descriptions.
 * They are made from the manifest in force, at start-up and again after each reload; a document whose text a reload
 * left as it was keeps the tools made of it, so that a reload of a large manifest works out only what changed.
 */
export class ManifestTools {
  private byDocument = new Map<string, { readonly text: string; readonly operations: DocumentOperation[] }>();

  constructor(
    private readonly schema: GraphQLSchema,
    private readonly pipeline: Pipeline,
    /**
     * The names of the gateway's own tools on this gateway: an operation of one of these names would stand beside
     * that tool under one name, and a call would reach only one of the two, so it is left out (named in `skipped`).
     */
    private readonly reserved: ReadonlySet<string>,
  ) {}

  /** The tools of `documents`; an operation left out is named in `skipped`, with its document and why. */
  tools(documents: Iterable<readonly [string, string]>, skipped: string[]): OperationTool[] {
    const tools: OperationTool[] = [];
    /** Each operation name taken, and the document whose operation took it. */
    const names = new Map<string, string>();
    const byDocument = new Map<string, { readonly text: string; readonly operations: DocumentOperation[] }>();
    for (const [documentId, text] of documents) {
      const known = this.byDocument.get(documentId);
      const operations =
        known?.text === text ? known.operations : documentOperations(this.schema, this.pipeline, documentId, text);
      byDocument.set(documentId, { text, operations });
      for (const { name, tool, refused } of operations) {
        // A name no tool may have takes no tool's name: an operation of it in a later document is its own to report.
        if (!TOOL_NAME.test(name)) {
          skipped.push(refused!);
          continue;
        }
        if (this.reserved.has(name)) {
          skipped.push(
            `${name} of trusted document ${documentId} (the name of the gateway's own tool ${name}: rename the ` +
              'operation to offer it)',
          );
          continue;
        }
        // The first operation of a name is its tool: a tool is called by its name alone, so a second operation of that
        // name could never be reached, and is left out where the operator sees it rather than dropped without a word.
        const first = names.get(name);
        if (first !== undefined) {
          skipped.push(
            `${name} of trusted document ${documentId} (trusted document ${first} has an operation of that name ` +
              'before it, and a tool is called by its name alone: rename one of them to offer both)',
          );
          continue;
        }
        names.set(name, documentId);
        if (tool) tools.push(tool);
        else skipped.push(refused!);
      }
    }
    this.byDocument = byDocument;
    return tools;
  }
}

/** Whether `caller` may call the tool: the admit stage's scope refusal of its operation, or null. */
export function refusalFor(tool: OperationTool, caller: Caller): { message: string; scope: string | undefined } | null {
  const forbidden = tool.estimate.forbidden(caller);
  if (!forbidden) return null;
  const scope = forbidden.extensions?.scope;
  return { message: forbidden.message, scope: typeof scope === 'string' ? scope : undefined };
}

/**
 * The code of an error of a tool's operation as the pipeline presented it, for a tool error and a resource read alike.
 * The presenter has named every refusal by its stage (src/execution/present.ts documentRefusal: a document that does
 * not parse or validate is GRAPHQL_PARSE_FAILED or GRAPHQL_VALIDATION_FAILED, as over POST /graphql) and masked what
 * was not raised on purpose as INTERNAL_SERVER_ERROR, so every error has a code; one without is read as
 * INTERNAL_SERVER_ERROR all the same.
 */
export function codeOf(error: GraphQLFormattedError): string {
  const code = error.extensions?.code;
  return typeof code === 'string' ? code : ErrorCode.INTERNAL_SERVER_ERROR;
}
