import { createHash } from 'node:crypto';
import { Kind, parse, validate, type DocumentNode, type GraphQLSchema, type SelectionSetNode } from 'graphql';
import { LRUCache } from 'lru-cache';

import { JsonFileError, readJsonFile, type JsonFile } from '../auth/json-file.js';
import { ConfigError } from '../config/index.js';
import { ErrorCode } from '../errors.js';
import { namingValidationStop } from '../execution/limits.js';
import { GATEWAY_PAGE_DOCUMENTS } from './approval-documents.js';

export type TrustedDocumentsMode = 'off' | 'allow' | 'enforce';

/** The request parameters of one operation, as any transport (HTTP body or query string, graphql-ws, graphql-sse) carries them. */
export interface OperationRequest {
  query?: unknown;
  /** A manifest id (GraphQL over HTTP, persisted documents appendix; GraphQL Code Generator's client preset). */
  documentId?: unknown;
  extensions?: unknown;
}

export type Admission =
  | { ok: true; query: string; extensions: Record<string, unknown> | undefined }
  | { ok: false; status: number; message: string; code: string };

/** Apollo's automatic persisted queries: the one version of the protocol. */
interface PersistedQueryExtension {
  version: number;
  sha256Hash: string;
}

const SHA256_HEX = /^[0-9a-f]{64}$/;
const SHA1_HEX = /^[0-9a-f]{40}$/;
/** Registered APQ documents (allow mode), by sha256: the protocol expects the server to remember them; at most this many (LRU). */
const APQ_CACHE_SIZE = 1000;
/**
 * Largest manifest read, in bytes. 20,000 documents as GraphQL Code Generator's client preset prints them (an operation
 * with a fragment, ~350 bytes) make a manifest of ~9 MiB, and loading one (each document parsed and validated) peaks
 * under ~35 times its size in heap: 32 MiB holds some 70,000 such documents and loads in about 1 GB of heap. A larger
 * file is refused before it is parsed: it is no manifest (the wrong path, a dump), or one whose load would end the
 * gateway.
 */
const MAX_MANIFEST_BYTES = 32 * 1024 * 1024;
/**
 * The documents of the gateway's own approval pages (the approvals page, GraphiQL's approval tab): fixed texts that
 * `enforce` runs beside the manifest's, by exact text only, as it runs introspection. Without them no approver could
 * approve an agent's plan through the page, and under MCP_APPROVAL=approver no plan could ever run. They reach only
 * what their resolvers let the caller reach (an approve scope), as they do without trusted documents.
 */
const GATEWAY_PAGES = new Set(GATEWAY_PAGE_DOCUMENTS);

function hash(algorithm: 'sha1' | 'sha256', text: string): string {
  return createHash(algorithm).update(text).digest('hex');
}

function notFound(message: string): Admission {
  // Apollo's clients recognise the message as well as the code (and answer it by resending the text).
  return { ok: false, status: 200, message, code: ErrorCode.PERSISTED_QUERY_NOT_FOUND };
}

function badRequest(message: string): Admission {
  return { ok: false, status: 400, message, code: ErrorCode.BAD_REQUEST };
}

/** True when every root field of every operation is `__schema`, `__type` or `__typename`. */
export function isIntrospectionOnly(document: DocumentNode): boolean {
  const fragments = new Map(
    document.definitions.flatMap((d) => (d.kind === Kind.FRAGMENT_DEFINITION ? [[d.name.value, d] as const] : [])),
  );
  const rootOnly = (set: SelectionSetNode, seen: Set<string>): boolean =>
    set.selections.every((s) => {
      if (s.kind === Kind.FIELD) return s.name.value.startsWith('__');
      if (s.kind === Kind.INLINE_FRAGMENT) return rootOnly(s.selectionSet, seen);
      const fragment = fragments.get(s.name.value);
      if (!fragment || seen.has(s.name.value)) return false;
      return rootOnly(fragment.selectionSet, new Set([...seen, s.name.value]));
    });
  const operations = document.definitions.filter((d) => d.kind === Kind.OPERATION_DEFINITION);
  return (
    operations.length > 0 && operations.every((o) => o.operation === 'query' && rootOnly(o.selectionSet, new Set()))
  );
}

/**
 * What the transports ask of the trusted documents: the running manifest's answer (a reload swaps the manifest,
 * docs/decisions/057; each operation's document is admitted once, by the manifest of that moment).
 */
export type DocumentAdmission = Pick<TrustedDocuments, 'admit'>;

/**
 * Trusted documents (TRUSTED_DOCUMENTS): operations by id from a manifest in the format of GraphQL Code
 * Generator's client preset (`persisted-documents.json`, `{ "<hash>": "<document>" }`), sent as `documentId`,
 * or by the sha256 of their text in Apollo's `extensions.persistedQuery`. `allow` runs those and any other
 * document; `enforce` runs only the manifest's documents, plus introspection when it is enabled (what
 * GraphiQL needs for its docs and completion) and the exact texts the gateway's own approval pages send. See
 * docs/decisions/021-trusted-documents.md.
 */
export class TrustedDocuments {
  private readonly byText = new Map<string, string>();
  private readonly bySha256 = new Map<string, string>();
  /**
   * Texts registered by the automatic persisted-queries handshake (`allow`), by owner and hash: a text is its app's, so
   * another app's hash alone reads as one nobody registered (src/auth/tenancy.ts); the manifest's are every app's.
   */
  private readonly registered = new LRUCache<string, string>({ max: APQ_CACHE_SIZE });

  /**
   * @param schema the schema every document of `byId` was validated against: a reload reuses a document (`reusable`)
   *   only against the same one
   * @param prepared how many of the documents this instance parsed and validated; the others were the running
   *   instance's, reused
   */
  constructor(
    readonly mode: Exclude<TrustedDocumentsMode, 'off'>,
    private readonly byId: ReadonlyMap<string, string>,
    private readonly introspection: boolean,
    private readonly schema?: GraphQLSchema,
    readonly prepared: number = byId.size,
  ) {
    for (const [id, text] of byId) {
      this.byText.set(text, id);
      this.bySha256.set(hash('sha256', text), text);
    }
  }

  /**
   * Reads and checks the manifest; throws a ConfigError naming TRUSTED_DOCUMENTS_MANIFEST for a file that is
   * missing or unreadable, not a JSON object of strings, empty, a document that does not parse or validate
   * against the schema, or a hex id that is not the sha1/sha256 of its document. `previous`: the running instance, on
   * a reload: a document it holds under the same id with the same text, validated against the same schema, is taken
   * as it is (parsing and validating 20,000 documents again held the event loop for seconds); only new and changed
   * documents are parsed and validated. Nothing of `previous` is kept but the texts it shares.
   */
  static load(options: {
    mode: Exclude<TrustedDocumentsMode, 'off'>;
    manifest: string;
    schema: GraphQLSchema;
    introspection: boolean;
    previous?: TrustedDocuments;
  }): TrustedDocuments {
    const fail = (message: string, line?: number): never => {
      throw new ConfigError(
        'TRUSTED_DOCUMENTS_MANIFEST',
        `${options.manifest}${line === undefined ? '' : ` line ${line}`}: ${message}`,
        { file: options.manifest, line: line ?? null },
      );
    };
    let file: JsonFile;
    try {
      file = readJsonFile(options.manifest, MAX_MANIFEST_BYTES);
    } catch (err) {
      if (err instanceof JsonFileError) throw ConfigError.ofFile('TRUSTED_DOCUMENTS_MANIFEST', err);
      throw err;
    }
    const json = file.value;
    if (!json || typeof json !== 'object' || Array.isArray(json)) {
      return fail(
        'must be a JSON object of document ids to documents, as persisted-documents.json of the GraphQL Code Generator client preset',
        1,
      );
    }
    const entries = Object.entries(json as Record<string, unknown>);
    if (entries.length === 0) fail('holds no documents');
    const byId = new Map<string, string>();
    let prepared = 0;
    for (const [id, document] of entries) {
      if (!id.trim()) fail('has an empty document id', file.lineOf([id]));
      if (typeof document !== 'string')
        fail(
          `document ${id} must be a string of GraphQL, not ${document === null ? 'null' : typeof document}`,
          file.lineOf([id]),
        );
      const doc = document as string;
      const lower = id.toLowerCase();
      const hex = lower.startsWith('sha256:') ? lower.slice(7) : lower;
      if (SHA256_HEX.test(hex) && hash('sha256', doc) !== hex)
        fail(`document ${id}: the id is not the sha256 of its text`, file.lineOf([id]));
      if (SHA1_HEX.test(hex) && hash('sha1', doc) !== hex)
        fail(`document ${id}: the id is not the sha1 of its text`, file.lineOf([id]));
      const kept = options.previous?.reusable(id, doc, options.schema);
      if (kept !== undefined) {
        byId.set(id, kept);
        continue;
      }
      let parsed: DocumentNode;
      try {
        parsed = parse(doc);
      } catch (err) {
        return fail(`document ${id} does not parse: ${(err as Error).message}`, file.lineOf([id]));
      }
      const errors = namingValidationStop(validate(options.schema, parsed));
      if (errors.length)
        fail(`document ${id} is not valid against the schema: ${errors[0]!.message}`, file.lineOf([id]));
      prepared += 1;
      byId.set(id, doc);
    }
    return new TrustedDocuments(options.mode, byId, options.introspection, options.schema, prepared);
  }

  /**
   * This instance's text of document `id` when it is `text` and was validated against `schema`: a reload takes it
   * without parsing and validating it again (the same string, so the new manifest's copy is not kept as well).
   */
  reusable(id: string, text: string, schema: GraphQLSchema): string | undefined {
    const known = this.byId.get(id);
    return known === text && schema === this.schema ? known : undefined;
  }

  /** How many documents the manifest holds. */
  get size(): number {
    return this.byId.size;
  }

  /** The manifest's documents, by id (the MCP endpoint makes a tool of each named operation). */
  documents(): Iterable<readonly [string, string]> {
    return this.byId.entries();
  }

  /**
   * Turns the request's id or hash into the text to run, or refuses it. `extensions` comes back without
   * `persistedQuery`. `owner`: the caller's owner scope, whose registered texts a hash alone may name; null registers
   * and finds none. `runs`: whether a text parses and validates; a hash is registered only with a text that does (as
   * Apollo keeps a persisted query only once it validated), so that a refused text changes nothing.
   */
  admit(request: OperationRequest, owner: string | null, runs?: (text: string) => boolean): Admission {
    const { query, documentId } = request;
    let extensions = request.extensions;
    if (
      extensions !== undefined &&
      extensions !== null &&
      (typeof extensions !== 'object' || Array.isArray(extensions))
    ) {
      return badRequest('extensions must be an object');
    }
    const ext = (extensions ?? undefined) as Record<string, unknown> | undefined;
    let persisted: PersistedQueryExtension | undefined;
    if (ext && 'persistedQuery' in ext) {
      const pq = ext.persistedQuery as Partial<PersistedQueryExtension> | null;
      if (!pq || typeof pq !== 'object' || pq.version !== 1)
        return badRequest('extensions.persistedQuery must have version 1');
      if (typeof pq.sha256Hash !== 'string' || !SHA256_HEX.test(pq.sha256Hash)) {
        return badRequest('extensions.persistedQuery.sha256Hash must be 64 lowercase hex digits');
      }
      persisted = pq as PersistedQueryExtension;
      const { persistedQuery: _pq, ...rest } = ext;
      extensions = Object.keys(rest).length ? rest : undefined;
    }
    const rest = extensions as Record<string, unknown> | undefined;
    if (query !== undefined && query !== null && typeof query !== 'string') return badRequest('query must be a string');
    const text = typeof query === 'string' && query !== '' ? query : undefined;

    if (documentId !== undefined && documentId !== null) {
      if (typeof documentId !== 'string' || !documentId) return badRequest('documentId must be a non-empty string');
      if (text !== undefined) return badRequest('send documentId or query, not both');
      const found = this.byId.get(documentId);
      if (found === undefined)
        return notFound(
          `unknown documentId ${JSON.stringify(documentId.slice(0, 128))}: it is not in this gateway's trusted documents`,
        );
      return { ok: true, query: found, extensions: rest };
    }

    if (persisted) {
      const known = this.bySha256.get(persisted.sha256Hash);
      if (known !== undefined) return { ok: true, query: known, extensions: rest };
      if (text === undefined) {
        const registered =
          this.mode === 'allow' && owner !== null
            ? this.registered.get(`${owner}\0${persisted.sha256Hash}`)
            : undefined;
        return registered !== undefined
          ? { ok: true, query: registered, extensions: rest }
          : notFound('PersistedQueryNotFound');
      }
      if (hash('sha256', text) !== persisted.sha256Hash) return badRequest('provided sha does not match query');
      if (this.mode === 'enforce') return this.refuse();
      if (owner !== null && runs?.(text) !== false) this.registered.set(`${owner}\0${persisted.sha256Hash}`, text);
      return { ok: true, query: text, extensions: rest };
    }

    if (text === undefined) return badRequest('send a query, a documentId or extensions.persistedQuery');
    if (this.mode === 'allow' || this.byText.has(text) || GATEWAY_PAGES.has(text))
      return { ok: true, query: text, extensions: rest };
    if (this.introspection && introspectionOnly(text)) return { ok: true, query: text, extensions: rest };
    return this.refuse();
  }

  private refuse(): Admission {
    return notFound(
      'this gateway runs trusted documents only (TRUSTED_DOCUMENTS=enforce): send the documentId of a document in its manifest',
    );
  }
}

function introspectionOnly(text: string): boolean {
  try {
    return isIntrospectionOnly(parse(text));
  } catch {
    return false;
  }
}

/** A refusal of the trusted-documents stage, or of Apollo's persisted-query extension with TRUSTED_DOCUMENTS off. */
export type DocumentRefusal = Extract<Admission, { ok: false }>;

/**
 * With TRUSTED_DOCUMENTS off, what POST and GET /graphql answer, in Apollo's words, for Apollo's persisted-query
 * extension and for a `documentId` (Apollo reads them there, keeping nothing: src/execution/apollo.ts), so that
 * graphql-ws and graphql-sse answer them alike: a version other than 1 and a hash that is not the text's are refused
 * (BAD_REQUEST), a hash alone is PERSISTED_QUERY_NOT_FOUND (the client sends the text with it), and an id with no text
 * is a request that names no operation. Null: the text runs as it was sent (an id beside it is not looked up).
 * An empty `query` is no text, as graphql-ws carries an id or a hash alone. The text is hashed only when the extension
 * comes with it, so a request without one does no more work than before.
 */
export function untrustedRefusal(request: OperationRequest): DocumentRefusal | null {
  const { query, documentId, extensions } = request;
  const text = typeof query === 'string' && query !== '' ? query : undefined;
  // Apollo takes any truthy `persistedQuery` for the extension (so `"yes"` has no version 1), and a falsy one for none.
  const persisted =
    extensions !== null && typeof extensions === 'object'
      ? (extensions as { persistedQuery?: unknown }).persistedQuery
      : undefined;
  if (persisted) {
    const { version, sha256Hash } = Object(persisted) as Partial<PersistedQueryExtension>;
    if (version !== 1) return badRequest('Unsupported persisted query version') as DocumentRefusal;
    if (text === undefined) return notFound('PersistedQueryNotFound') as DocumentRefusal;
    if (hash('sha256', text) !== sha256Hash) return badRequest('provided sha does not match query') as DocumentRefusal;
    return null;
  }
  if (documentId !== undefined && documentId !== null && text === undefined)
    return badRequest(
      'GraphQL operations must contain a non-empty `query` or a `persistedQuery` extension.',
    ) as DocumentRefusal;
  return null;
}

export type HttpAdmission =
  | { ok: true; body: unknown; search: string }
  | { ok: false; status: number; body: { errors: { message: string; extensions: { code: string } }[] } };

function refusal(a: Extract<Admission, { ok: false }>): HttpAdmission {
  return { ok: false, status: a.status, body: { errors: [{ message: a.message, extensions: { code: a.code } }] } };
}

/**
 * POST /graphql and GET /graphql before Apollo sees them, with TRUSTED_DOCUMENTS off: the refusal graphql-ws and SSE
 * make (untrustedRefusal), or null to leave the request to Apollo as it was sent. Apollo would refuse the same requests,
 * but two of them (a version other than 1, a hash that is not the text's) with no code, which it answers as
 * INTERNAL_SERVER_ERROR; answered here, every transport words them alike from one check. A body Apollo refuses whole
 * (a batch, an extensions parameter that is not JSON) is left to it. A JSON body without the extension or an id reads
 * three properties here.
 */
export function untrustedHttp(method: string, body: unknown, search: string): HttpAdmission | null {
  if (method === 'POST') {
    if (!body || typeof body !== 'object' || Array.isArray(body)) return null;
    const refused = untrustedRefusal(body as OperationRequest);
    return refused && refusal(refused);
  }
  const params = new URLSearchParams(search.startsWith('?') ? search.slice(1) : search);
  if (!params.has('documentId') && !params.has('extensions')) return null;
  const request = getRequest(params);
  const refused = request && untrustedRefusal(request);
  return refused && refusal(refused);
}

/** A GET request's operation, from its query string; null when its `extensions` parameter is not JSON. */
function getRequest(params: URLSearchParams): OperationRequest | null {
  let extensions: unknown;
  try {
    extensions = params.has('extensions') ? JSON.parse(params.get('extensions')!) : undefined;
  } catch {
    return null;
  }
  return { query: params.get('query') ?? undefined, documentId: params.get('documentId') ?? undefined, extensions };
}

/**
 * POST /graphql and GET /graphql before Apollo sees them: the id or hash of each operation (in the JSON body,
 * a batch of them, or the query string) becomes its text, and `persistedQuery` is removed so that Apollo's own
 * APQ cache never answers in place of the manifest.
 */
export function admitHttp(
  trusted: DocumentAdmission,
  method: string,
  body: unknown,
  search: string,
  owner: string,
): HttpAdmission {
  if (method === 'POST') {
    const one = (item: unknown): Admission | { ok: true; item: unknown } => {
      if (!item || typeof item !== 'object' || Array.isArray(item)) return { ok: true, item };
      const params = item as Record<string, unknown>;
      const a = trusted.admit(params, owner);
      if (!a.ok) return a;
      const { documentId: _id, extensions: _e, ...rest } = params;
      return { ok: true, item: { ...rest, query: a.query, ...(a.extensions ? { extensions: a.extensions } : {}) } };
    };
    if (Array.isArray(body)) {
      const items: unknown[] = [];
      for (const item of body) {
        const a = one(item);
        if (!a.ok) return refusal(a);
        items.push((a as { item: unknown }).item);
      }
      return { ok: true, body: items, search };
    }
    const a = one(body);
    if (!a.ok) return refusal(a);
    return { ok: true, body: (a as { item: unknown }).item, search };
  }
  const params = new URLSearchParams(search.startsWith('?') ? search.slice(1) : search);
  if (!params.has('query') && !params.has('documentId') && !params.has('extensions')) return { ok: true, body, search };
  const request = getRequest(params);
  if (request === null)
    return refusal({
      ok: false,
      status: 400,
      message: 'the extensions parameter is not valid JSON',
      code: ErrorCode.BAD_REQUEST,
    });
  const a = trusted.admit(request, owner);
  if (!a.ok) return refusal(a);
  params.delete('documentId');
  params.set('query', a.query);
  if (a.extensions) params.set('extensions', JSON.stringify(a.extensions));
  else params.delete('extensions');
  return { ok: true, body, search: `?${params.toString()}` };
}
