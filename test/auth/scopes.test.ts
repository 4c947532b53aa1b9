// Least privilege (docs/decisions/046): each app holds scopes, the SDL says which field needs which, and the admit
// stage refuses an operation that selects a field the app's scopes do not cover, before anything runs, with
// FORBIDDEN naming the field and the missing scope, over HTTP, graphql-ws and graphql-sse alike.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { getNamedType, isObjectType } from 'graphql';
import { createClient as createSseClient } from 'graphql-sse';
import { afterEach, describe, expect, it } from 'vitest';

import { SCOPES } from '../../src/auth/caller.js';
import { NODE_READ_SCOPES, NODE_TYPES } from '../../src/graphql/common.js';
import { buildSchema, requiredScopesOf } from '../../src/graphql/schema.js';
import { gatewaysPerTest, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { wsClient } from '../helpers/mobile-id.js';

const start = gatewaysPerTest();
const disposers: Array<() => void | Promise<void>> = [];
afterEach(async () => {
  for (const d of disposers.splice(0)) await d();
});

const sha = (key: string) => createHash('sha256').update(key).digest('hex');

/** Writes an apps file into a fresh directory and returns its path. */
function appsFile(text: string, name = 'apps.yaml'): string {
  const file = path.join(tempDataDir('apps-file-'), name);
  fs.writeFileSync(file, text);
  return file;
}

const WATCHER_KEY = 'watcher-key-0123456789';
const BUILDER_KEY = 'builder-key-0123456789';
const ADMIN_KEY = 'admin-key-0123456789';
const APPS = `# the apps of the test gateway
apps:
  - name: watcher
    scopes: [mobile-id:read]
    keys:
      - sha256: ${sha(WATCHER_KEY)}
  - name: builder
    scopes: [cloud:read, cloud:write]
    keys:
      - sha256: ${sha(BUILDER_KEY)}
  - name: admin
    scopes: [operator, cloud:read]
    keys:
      - sha256: ${sha(ADMIN_KEY)}
`;

type Result = {
  data?: unknown;
  errors?: Array<{ message: string; extensions?: Record<string, unknown> }>;
  status?: number;
};

/** One operation through graphql-ws or graphql-sse with a key: the first result, or the error the client reports. */
function once(
  kind: 'ws' | 'sse',
  gw: TestGateway,
  query: string,
  key: string,
  variables: Record<string, unknown> = {},
): Promise<Result> {
  const client =
    kind === 'ws'
      ? wsClient(gw, { key })
      : createSseClient({
          url: `${gw.url}/graphql/stream`,
          headers: { authorization: `Bearer ${key}` },
          singleConnection: false,
          retryAttempts: 0,
        });
  disposers.push(() => client.dispose());
  return new Promise((resolve) => {
    client.subscribe(
      { query, variables },
      {
        next: (v) => resolve(v as Result),
        error: (e) =>
          resolve({
            errors: Array.isArray(e) ? (e as Result['errors']) : [{ message: String((e as Error)?.message ?? e) }],
          }),
        complete: () => undefined,
      },
    );
  });
}

function run(
  transport: 'http' | 'ws' | 'sse',
  gw: TestGateway,
  query: string,
  key: string,
  variables: Record<string, unknown> = {},
): Promise<Result> {
  return transport === 'http' ? gw.graphql(query, variables, { key }) : once(transport, gw, query, key, variables);
}

const CREATE_PROJECT = 'mutation { createProject(input: { name: "scoped" }) { project { id } } }';

describe('scopes in the admit stage', () => {
  it.each(['http', 'ws', 'sse'] as const)(
    'an operation selecting a field the app may not use is refused over %s before anything runs, with FORBIDDEN naming the field and the scope',
    async (transport) => {
      const gw = await start({ GATEWAY_APPS_FILE: appsFile(APPS) });
      const refused = await run(transport, gw, CREATE_PROJECT, WATCHER_KEY);
      expect(refused.data ?? undefined).toBeUndefined();
      expect(refused.errors).toHaveLength(1);
      expect(refused.errors![0]!.extensions).toMatchObject({
        code: 'FORBIDDEN',
        field: 'Mutation.createProject',
        scope: 'cloud:write',
      });
      expect(refused.errors![0]!.message).toMatch(/Mutation\.createProject needs the scope cloud:write/);
      if (transport === 'http') expect(refused.status).toBe(403);
      // Nothing ran: the cloud ledger, which every app reads, holds no project.
      expect((await gw.graphql('{ projects { id } }', {}, { key: BUILDER_KEY })).data).toEqual({ projects: [] });
    },
  );

  it.each(['http', 'ws', 'sse'] as const)(
    'an app is admitted over %s for the fields its scopes cover',
    async (transport) => {
      const gw = await start({ GATEWAY_APPS_FILE: appsFile(APPS) });
      const created = await run(transport, gw, CREATE_PROJECT, BUILDER_KEY);
      expect(created.errors).toBeUndefined();
      expect((created.data as { createProject: { project: { id: string } } }).createProject.project.id).toEqual(
        expect.any(String),
      );
      const read = await run(
        transport,
        gw,
        '{ mobileIdAuthentication(authReqId: "never-seen") { __typename } }',
        WATCHER_KEY,
      );
      expect(read).toMatchObject({ data: { mobileIdAuthentication: null } });
    },
  );

  it.each(['ws', 'sse'] as const)(
    'a subscription the app may not open is refused over %s with FORBIDDEN',
    async (transport) => {
      const gw = await start({ GATEWAY_APPS_FILE: appsFile(APPS) });
      const refused = await once(transport, gw, 'subscription { verificationCompleted { externalId } }', WATCHER_KEY);
      expect(refused.errors?.[0]?.extensions).toMatchObject({
        code: 'FORBIDDEN',
        field: 'Subscription.verificationCompleted',
        scope: 'identity:read',
      });
    },
  );

  it('a field reached through a fragment, an inline fragment or under @skip is still checked', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFile(APPS) });
    const viaFragment = await gw.graphql(
      'query { ...F } fragment F on Query { projects { id } }',
      {},
      { key: WATCHER_KEY },
    );
    expect(viaFragment.errors?.[0]?.extensions).toMatchObject({
      code: 'FORBIDDEN',
      field: 'Query.projects',
      scope: 'cloud:read',
    });
    const inline = await gw.graphql('query { ... on Query { catalog { images { name } } } }', {}, { key: WATCHER_KEY });
    expect(inline.errors?.[0]?.extensions).toMatchObject({ code: 'FORBIDDEN', field: 'Query.catalog' });
    const skipped = await gw.graphql(
      'query($s: Boolean = true) { projects @skip(if: $s) { id } }',
      {},
      { key: WATCHER_KEY },
    );
    expect(skipped.errors?.[0]?.extensions).toMatchObject({ code: 'FORBIDDEN', field: 'Query.projects' });
  });

  it('node(id) answers an object of a kind the app may not read as an id that does not exist', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFile(APPS) });
    const created = await gw.graphql<{ createProject: { project: { id: string } } }>(
      CREATE_PROJECT,
      {},
      { key: BUILDER_KEY },
    );
    const id = created.data!.createProject.project.id;
    expect(
      (await gw.graphql('query($id: ID!) { node(id: $id) { id __typename } }', { id }, { key: BUILDER_KEY })).data,
    ).toEqual({ node: { id, __typename: 'Project' } });
    const hidden = await gw.graphql(
      'query($id: ID!) { node(id: $id) { id __typename } }',
      { id },
      { key: WATCHER_KEY },
    );
    const unknown = await gw.graphql(
      'query($id: ID!) { node(id: $id) { id __typename } }',
      { id: '00000000-0000-4000-8000-000000000000' },
      { key: WATCHER_KEY },
    );
    expect(hidden).toEqual(unknown);
    expect(hidden.data).toEqual({ node: null });
  });

  it('introspection shows the whole schema to every app, and each field states its scope in its description', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFile(APPS) });
    const res = await gw.graphql<{ __type: { fields: Array<{ name: string; description: string }> } }>(
      '{ __type(name: "Mutation") { fields { name description } } }',
      {},
      { key: WATCHER_KEY },
    );
    const fields = new Map(res.data!.__type.fields.map((f) => [f.name, f.description]));
    expect(fields.get('createProject')).toMatch(/Requires the scope `cloud:write`\.$/);
    expect(fields.get('registerVerification')).toMatch(/Requires the scope `identity:write`\.$/);
    expect(fields.get('issueMobileIdNotificationToken')).toMatch(/Requires the scope `mobile-id:write`\.$/);
    expect(fields.get('ping')).not.toMatch(/Requires the scope/);
  });

  it('keys of GATEWAY_API_KEYS hold every scope but operator; keys of OPERATOR_API_KEYS hold every scope', async () => {
    const gw = await start({
      GATEWAY_API_KEYS: 'shop:shop-key-0123456789,bare-key-0123456789',
      OPERATOR_API_KEYS: 'ops:ops-key-0123456789',
    });
    for (const key of ['shop-key-0123456789', 'bare-key-0123456789']) {
      expect((await gw.graphql(CREATE_PROJECT, {}, { key })).errors).toBeUndefined();
      expect((await gw.graphql('{ mobileIdRejections { id } }', {}, { key })).errors).toBeUndefined();
      const apps = await gw.graphql('{ apps { name } }', {}, { key });
      expect(apps.errors?.[0]?.extensions).toMatchObject({ code: 'FORBIDDEN', field: 'Query.apps', scope: 'operator' });
    }
    expect((await gw.graphql('{ apps { name } }', {}, { key: 'ops-key-0123456789' })).errors).toBeUndefined();
  });
});

describe('logs name the app', () => {
  it.each(['http', 'sse'] as const)('the %s request line names the app, never its key', async (transport) => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFile(APPS) });
    await run(transport, gw, '{ mobileIdAuthentication(authReqId: "logged") { __typename } }', WATCHER_KEY);
    await expect
      .poll(() => gw.logs())
      .toMatch(/"app":"watcher"[^\n]*"msg":"request"|"msg":"request"[^\n]*"app":"watcher"/);
    expect(gw.logs()).not.toContain(WATCHER_KEY);
  });
});

describe('the schema states every entry point’s scope', () => {
  it('every Query, Mutation and Subscription field names known scopes, but the few open to every app', async () => {
    const schema = buildSchema([]);
    const open = new Set(['Query.node', 'Mutation.ping', 'Subscription.heartbeat']);
    for (const root of [schema.getQueryType()!, schema.getMutationType()!, schema.getSubscriptionType()!]) {
      for (const field of Object.values(root.getFields())) {
        const coordinate = `${root.name}.${field.name}`;
        const scopes = requiredScopesOf(field.astNode!);
        if (open.has(coordinate)) expect(scopes, coordinate).toBeNull();
        else {
          expect(scopes, coordinate).not.toBeNull();
          for (const s of scopes!.flat()) expect(SCOPES, coordinate).toContain(s);
        }
      }
    }
  });

  it('every object node(id) can return has the read scope of its kind', async () => {
    const schema = buildSchema([]);
    const node = schema.getType('Node');
    const implementations = schema
      .getPossibleTypes(node as never)
      .map((t) => t.name)
      .sort();
    expect(Object.values(NODE_TYPES).sort()).toEqual(implementations);
    for (const kind of Object.keys(NODE_TYPES) as (keyof typeof NODE_TYPES)[])
      expect(SCOPES).toContain(NODE_READ_SCOPES[kind]);
    expect(isObjectType(getNamedType(schema.getQueryType()!.getFields().node!.type))).toBe(false);
  });
});
