import { parse } from 'graphql';
import { describe, expect, it } from 'vitest';

import { authorizationOf, resolveOperation, sameOriginEndpoints } from '../../src/graphiql-app/fetcher.js';
import { headersTemplate, readPageConfig, tabsFromExamples } from '../../src/graphiql-app/page-config.js';
import { namespacedLocalStorage } from '../../src/graphiql-app/storage.js';

/** An in-memory stand-in for window.localStorage. */
class MemoryStorage implements Storage {
  private readonly items = new Map<string, string>();
  get length(): number {
    return this.items.size;
  }
  key(index: number): string | null {
    return [...this.items.keys()][index] ?? null;
  }
  getItem(key: string): string | null {
    return this.items.get(key) ?? null;
  }
  setItem(key: string, value: string): void {
    this.items.set(key, value);
  }
  removeItem(key: string): void {
    this.items.delete(key);
  }
  clear(): void {
    this.items.clear();
  }
}

describe('GraphiQL page config', () => {
  it('opens each example as a tab titled by a comment, with its variables', () => {
    const config = readPageConfig({
      apiKeyRequired: false,
      examples: [
        {
          title: 'Create a project',
          query: 'mutation CreateProject { createProject(input: {}) { replayed } }',
          variables: '{"a": 1}',
        },
        { title: 'Two\nlines', query: '{ projects { id } }' },
      ],
    });
    expect(tabsFromExamples(config)).toEqual([
      {
        query: '# Create a project\nmutation CreateProject { createProject(input: {}) { replayed } }',
        variables: '{"a": 1}',
      },
      { query: '# Two lines\n{ projects { id } }' },
    ]);
  });

  it('puts a commented Authorization template in every tab when an API key is required', () => {
    const config = readPageConfig({ apiKeyRequired: true, examples: [{ title: 'x', query: '{ a }' }] });
    const template = headersTemplate(config);
    expect(template).toContain('// "Authorization": "Bearer <your API key>"');
    expect(tabsFromExamples(config)[0]?.headers).toBe(template);
    expect(headersTemplate(readPageConfig({ apiKeyRequired: false }))).toBe('');
  });

  it('falls back to safe defaults when the injected config is missing or malformed', () => {
    expect(readPageConfig(undefined)).toEqual({
      sandbox: false,
      apiKeyRequired: false,
      defaultQuery: '',
      examples: [],
    });
    const malformed = {
      sandbox: 'yes',
      examples: [
        { title: 1, query: '{ a }' },
        { title: 'ok', query: '{ b }' },
      ],
    } as never;
    expect(readPageConfig(malformed)).toEqual({
      sandbox: false,
      apiKeyRequired: false,
      defaultQuery: '',
      examples: [{ title: 'ok', query: '{ b }' }],
    });
  });
});

describe('GraphiQL fetcher endpoints and credentials', () => {
  it('talks to /graphql on the page origin, over wss when the page is https', () => {
    expect(sameOriginEndpoints({ protocol: 'http:', host: '127.0.0.1:4000' })).toEqual({
      url: 'http://127.0.0.1:4000/graphql',
      subscriptionUrl: 'ws://127.0.0.1:4000/graphql',
    });
    expect(sameOriginEndpoints({ protocol: 'https:', host: 'gw.example' }).subscriptionUrl).toBe(
      'wss://gw.example/graphql',
    );
  });

  it('finds the Authorization header whatever its case, for connectionParams.authorization', () => {
    expect(authorizationOf({ Authorization: 'Bearer k1' })).toBe('Bearer k1');
    expect(authorizationOf({ authorization: 'Bearer k2', other: 'x' })).toBe('Bearer k2');
    expect(authorizationOf({ AUTHORIZATION: 3 })).toBeUndefined();
    expect(authorizationOf(undefined)).toBeUndefined();
  });
});

describe('GraphiQL storage', () => {
  it('keeps a user’s tabs while the examples stay the same and starts afresh when they change', () => {
    const backing = new MemoryStorage();
    backing.setItem('unrelated', 'kept');
    const first = namespacedLocalStorage(backing, 'examples v1');
    first.setItem('graphiql:tabState', 'tabs v1');
    expect(namespacedLocalStorage(backing, 'examples v1').getItem('graphiql:tabState')).toBe('tabs v1');

    const second = namespacedLocalStorage(backing, 'examples v2');
    expect(second.getItem('graphiql:tabState')).toBeNull();
    expect(second.length).toBe(0);
    // The old namespace is gone; other keys of the origin are untouched.
    expect(backing.length).toBe(1);
    expect(backing.getItem('unrelated')).toBe('kept');
  });

  it('keeps the history of operations and starred ones without the header editor’s text (its Authorization)', () => {
    const backing = new MemoryStorage();
    const run = { query: '{ projects { id } }', variables: '{}', operationName: 'Projects' };
    const withKey = { ...run, headers: '{ "Authorization": "Bearer secret-key" }' };
    // What a page before this one left behind is cleaned when the page opens.
    namespacedLocalStorage(backing, 'examples').setItem('graphiql:tabState', 'tabs');
    const key = [...Array(backing.length).keys()].map((i) => backing.key(i)!).find((k) => k.endsWith('tabState'))!;
    const namespace = key.slice(0, -'graphiql:tabState'.length);
    backing.setItem(`${namespace}graphiql:favorites`, JSON.stringify({ favorites: [{ ...withKey, favorite: true }] }));

    const storage = namespacedLocalStorage(backing, 'examples');
    storage.setItem('graphiql:queries', JSON.stringify({ queries: [withKey] }));
    expect(JSON.parse(storage.getItem('graphiql:queries')!)).toEqual({ queries: [run] });
    expect(JSON.parse(storage.getItem('graphiql:favorites')!)).toEqual({ favorites: [{ ...run, favorite: true }] });
    for (let i = 0; i < backing.length; i += 1) expect(backing.getItem(backing.key(i)!)).not.toContain('secret-key');
    // Anything else is stored as it is given.
    storage.setItem('graphiql:tabState', 'tabs "headers"');
    expect(storage.getItem('graphiql:tabState')).toBe('tabs "headers"');
  });
});

describe('GraphiQL operation routing', () => {
  const documentOf = (query: string) => parse(query);

  it('runs the sole operation of the query text even when GraphiQL passes a stale name and document', () => {
    const query = 'subscription Ticks { ticks }';
    // What GraphiQL passed right after switching from a tab holding `query SayHello`.
    const staleOpts = { documentAST: documentOf('query SayHello { hello }'), headers: { a: 'b' } };
    const { params, opts } = resolveOperation({ query, operationName: 'SayHello' }, staleOpts);
    expect(params.operationName).toBe('Ticks');
    expect(opts?.documentAST).toEqual(documentOf(query));
    expect(opts?.headers).toEqual({ a: 'b' });
    expect(resolveOperation({ query, operationName: null }, undefined).params.operationName).toBe('Ticks');
    const anonymous = 'subscription { ticks }';
    expect(
      resolveOperation({ query: anonymous, operationName: 'SayHello' }, undefined).params.operationName,
    ).toBeNull();
  });

  it('keeps a name that picks one of several operations, and leaves the rest to the server', () => {
    const two = 'query A { a } subscription B { b }';
    expect(resolveOperation({ query: two, operationName: 'B' }, undefined).params.operationName).toBe('B');
    expect(resolveOperation({ query: two, operationName: 'Gone' }, undefined).params.operationName).toBe('Gone');
    expect(resolveOperation({ query: two }, undefined).params.operationName).toBeUndefined();
    const broken = { query: 'query {', operationName: 'X' };
    expect(resolveOperation(broken, undefined).params).toBe(broken);
  });
});
