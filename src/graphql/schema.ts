import fs from 'node:fs';
import path from 'node:path';
import { makeExecutableSchema } from '@graphql-tools/schema';
import {
  isObjectType,
  Kind,
  parse,
  valueFromASTUntyped,
  visit,
  type DocumentNode,
  type FieldDefinitionNode,
  type GraphQLSchema,
} from 'graphql';

import { SCHEMA_DIR } from '../config/paths.js';
import { PAGE_CAPS, withPageCaps } from './pages.js';

/** The SDL files of schema/, in a stable order (common first: it defines the root types). */
export function readTypeDefs(dir = SCHEMA_DIR): string[] {
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.graphql'));
  files.sort((a, b) => (a === 'common.graphql' ? -1 : b === 'common.graphql' ? 1 : a.localeCompare(b)));
  return files.map((f) => fs.readFileSync(path.join(dir, f), 'utf8'));
}

type ResolverMap = Record<string, unknown>;

/** Merges the per-domain resolver maps type by type; a field defined twice is a programming error. */
export function mergeResolvers(maps: readonly ResolverMap[]): ResolverMap {
  const merged: ResolverMap = {};
  for (const map of maps) {
    for (const [type, fields] of Object.entries(map)) {
      const existing = merged[type];
      if (existing === undefined) {
        merged[type] = fields;
        continue;
      }
      if (Object.getPrototypeOf(existing) !== Object.prototype || Object.getPrototypeOf(fields) !== Object.prototype) {
        throw new Error(`resolver ${type} is defined twice`);
      }
      for (const field of Object.keys(fields as object)) {
        if (field in (existing as object)) throw new Error(`resolver ${type}.${field} is defined twice`);
      }
      merged[type] = { ...(existing as object), ...(fields as object) };
    }
  }
  return merged;
}

/**
 * The executable schema. Its SDL is parsed without locations: every type and field keeps its AST node (the scopes
 * are read from its directives), and with locations each node's `loc` would keep the whole token list of its
 * file alive, ~14,000 objects of a started gateway's ~320,000 that every mark-compact walks. Nothing reads a schema
 * node's location; a mistake in the SDL is reported by name either way. Each field of PAGE_CAPS carries its cap
 * (src/graphql/pages.ts), with or without its resolvers.
 */
export function buildSchema(resolvers: readonly ResolverMap[]): GraphQLSchema {
  const schema = makeExecutableSchema({
    typeDefs: readTypeDefs().map((sdl) => describeScopes(parse(sdl, { noLocation: true }))),
    resolvers: withPageCaps(mergeResolvers(resolvers)) as never,
  });
  for (const [type, caps] of Object.entries(PAGE_CAPS)) {
    const object = schema.getType(type);
    const fields = isObjectType(object) ? object.getFields() : {};
    for (const field of Object.keys(caps)) {
      if (!fields[field]?.args.some((a) => a.name === 'first')) throw new Error(`${type}.${field} takes no first`);
    }
  }
  return schema;
}

/**
 * The scopes a field definition's `@requiresScopes(scopes: [[...]])` asks for (any one inner list, all of it), or
 * null without the directive. Throws on a malformed argument: the schema is the gateway's own, so that is a bug.
 */
export function requiredScopesOf(field: FieldDefinitionNode): string[][] | null {
  const directive = field.directives?.find((d) => d.name.value === 'requiresScopes');
  if (!directive) return null;
  const arg = directive.arguments?.find((a) => a.name.value === 'scopes');
  const value: unknown = arg ? valueFromASTUntyped(arg.value) : null;
  if (
    !Array.isArray(value) ||
    value.length === 0 ||
    !value.every((all) => Array.isArray(all) && all.length > 0 && all.every((s) => typeof s === 'string'))
  ) {
    throw new Error(`@requiresScopes on ${field.name.value} needs a non-empty list of non-empty lists of scopes`);
  }
  return value as string[][];
}

/**
 * The SDL with each field's scopes written at the end of its description: GraphiQL's docs pane, like every tool
 * that introspects, never sees applied directives.
 */
function describeScopes(typeDefs: DocumentNode): DocumentNode {
  return visit(typeDefs, {
    FieldDefinition(node) {
      const anyOf = requiredScopesOf(node);
      if (!anyOf) return undefined;
      const text = `Requires the scope ${anyOf.map((all) => all.map((s) => `\`${s}\``).join(' and ')).join(', or ')}.`;
      const before = node.description?.value.trimEnd();
      return {
        ...node,
        description: { kind: Kind.STRING, value: before ? `${before}\n\n${text}` : text, block: true },
      };
    },
  });
}
