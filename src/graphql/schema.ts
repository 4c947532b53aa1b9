import fs from 'node:fs';
import path from 'node:path';
import { makeExecutableSchema } from '@graphql-tools/schema';
import type { GraphQLSchema } from 'graphql';
import { SCHEMA_DIR } from '../paths.js';

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

export function buildSchema(resolvers: readonly ResolverMap[]): GraphQLSchema {
  return makeExecutableSchema({ typeDefs: readTypeDefs(), resolvers: mergeResolvers(resolvers) as never });
}
