import fs from 'node:fs';
import path from 'node:path';
import { parse, validate, type GraphQLSchema } from 'graphql';
import { describe, expect, it } from 'vitest';

import { parseAppsFile } from '../src/auth/apps-file.js';
import { buildSchema } from '../src/graphql/schema.js';
import { IdentificationCompletions } from '../src/identity/completions.js';

const root = path.resolve(import.meta.dirname, '..');
/** README.md and the guides of docs/ (not the decisions: they keep the names of their day). */
const documents = [
  'README.md',
  ...fs
    .readdirSync(path.join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => path.join('docs', f)),
];
const read = (doc: string) => fs.readFileSync(path.join(root, doc), 'utf8');

/** Examples a guide shows on purpose as refused. */
const REFUSED_ON_PURPOSE = new Set(['{ projectz { id } }']);

/**
 * The GraphQL a reader would copy from a Markdown text, with its line: each ```graphql block, each `query`, `mutation`
 * or `subscription` or `{ field(…) … }` code span, the `"query"` of a JSON body in a ```sh block and the
 * `query: \`…\`` of a ```ts block.
 */
function graphqlExamples(text: string): { line: number; source: string }[] {
  const found: { line: number; source: string }[] = [];
  const lines = text.split('\n');
  let fence: { lang: string; start: number; body: string[] } | null = null;
  lines.forEach((line, i) => {
    const f = /^\s*```(\w*)/.exec(line);
    if (f) {
      if (fence === null) {
        fence = { lang: f[1]!, start: i + 2, body: [] };
        return;
      }
      const { lang, start, body } = fence;
      const block = body.join('\n');
      if (lang === 'graphql') found.push({ line: start, source: block });
      if (lang === 'sh')
        for (const m of block.matchAll(/"query":\s*("(?:\\.|[^"\\])*")/g))
          found.push({ line: start, source: JSON.parse(m[1]!) as string });
      if (lang === 'ts')
        for (const m of block.matchAll(/query: `([^`]*)`/g)) found.push({ line: start, source: m[1]! });
      fence = null;
      return;
    }
    if (fence !== null) {
      fence.body.push(line);
      return;
    }
    for (const m of line.matchAll(/`((?:query|mutation|subscription)\b[^`]*\{[^`]*|\{ [^`]*[({][^`]*\})`/g))
      if (!REFUSED_ON_PURPOSE.has(m[1]!)) found.push({ line: i + 1, source: m[1]! });
  });
  return found;
}

/** Each example that does not parse or validate against the schema, with its place and graphql-js's reason. */
function invalidExamples(doc: string, text: string, schema: GraphQLSchema): string[] {
  const wrong: string[] = [];
  for (const { line, source } of graphqlExamples(text)) {
    let errors: readonly { message: string }[];
    try {
      errors = validate(schema, parse(source));
    } catch (err) {
      errors = [err as Error];
    }
    if (errors.length > 0) wrong.push(`${doc}:${line}: ${errors.map((e) => e.message).join('; ')}`);
  }
  return wrong;
}

describe('the examples of README.md and the guides', () => {
  const schema = buildSchema([]);

  it('every GraphQL example (blocks, code spans, curl bodies, client code) parses and validates against the schema', () => {
    const all = documents.flatMap((doc) => graphqlExamples(read(doc)));
    expect(all.length).toBeGreaterThan(20);
    expect(documents.flatMap((doc) => invalidExamples(doc, read(doc), schema))).toEqual([]);
  });

  it('the check can fail: a misspelt field, a wrong argument and a curl body that does not parse are found', () => {
    const text = [
      '```graphql',
      '{ projects { id nmae } }',
      '```',
      'Then `{ project(ident: "x") { id } }` and',
      '```sh',
      `curl -d '{"query":"mutation { ping "}'`,
      '```',
      'but not `{ projectz { id } }`, `{{network.id}}` nor `{code, domain, details}`.',
    ].join('\n');
    const wrong = invalidExamples('doc.md', text, schema);
    expect(wrong.map((w) => w.split(':').slice(0, 2).join(':'))).toEqual(['doc.md:2', 'doc.md:4', 'doc.md:6']);
    expect(wrong[0]).toContain('Cannot query field "nmae"');
    expect(wrong[1]).toContain('Unknown argument "ident"');
    expect(wrong[2]).toContain('Syntax Error');
  });

  it('quote the refusal of an identification callback that names no identification as the gateway words it', async () => {
    const receipt = await new IdentificationCompletions({} as never).receive(
      { token: 't', createdBy: 'app', workflowId: 'onboarding' } as never,
      { status: 'COMPLETED' },
      {},
    );
    expect(receipt).toMatchObject({ status: 'invalid' });
    const { description } = receipt as { description: string };
    expect(read('docs/graphql-api.md')).toContain(
      JSON.stringify({ error: 'invalid_request', error_description: description }),
    );
  });

  it("quote the refusal of the apps file shown, with one scope misspelt, at the gateway's line and path", () => {
    const doc = read('docs/apps-and-security.md');
    const yaml = /```yaml\n(# apps\.yaml[\s\S]*?)```/.exec(doc)![1]!;
    const misspelt = yaml.replace(
      'scopes: [mobile-id:read, mobile-id:write]',
      'scopes: [mobile-id:read, mobile-id:writ]',
    );
    expect(misspelt).not.toBe(yaml);
    expect(() => parseAppsFile(misspelt, '/etc/gateway/apps.yaml')).toThrow(/apps\.0\.scopes\.1 is not a scope/);
    let message = '';
    try {
      parseAppsFile(misspelt, '/etc/gateway/apps.yaml');
    } catch (err) {
      message = (err as Error).message;
    }
    const quoted = `${message.slice(0, message.indexOf('cloud:read') + 'cloud:read'.length)}, …`;
    expect(doc).toContain(`\`GATEWAY_APPS_FILE: ${quoted}\``);
  });
});
