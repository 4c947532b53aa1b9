import { GraphQLScalarType, Kind, type ValueNode } from 'graphql';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function fail(name: string, message: string): never {
  throw new TypeError(`${name}: ${message}`);
}

export const UUIDScalar = new GraphQLScalarType({
  name: 'UUID',
  serialize: (v) => String(v),
  parseValue(v) {
    if (typeof v !== 'string' || !UUID_RE.test(v))
      fail('UUID', `expected a UUID such as 3fa85f64-5717-4562-b3fc-2c963f66afa6, got ${JSON.stringify(v)}`);
    return v.toLowerCase();
  },
  parseLiteral(ast) {
    if (ast.kind !== Kind.STRING || !UUID_RE.test(ast.value)) fail('UUID', 'expected a UUID string');
    return ast.value.toLowerCase();
  },
});

export const DateTimeScalar = new GraphQLScalarType({
  name: 'DateTime',
  serialize(v) {
    if (v instanceof Date) return v.toISOString();
    if (typeof v === 'number') return new Date(v).toISOString();
    if (typeof v === 'string') return new Date(v).toISOString();
    return fail('DateTime', 'cannot serialize ' + typeof v);
  },
  parseValue(v) {
    if (typeof v !== 'string' || Number.isNaN(Date.parse(v))) fail('DateTime', 'expected an ISO-8601 timestamp');
    return new Date(v).toISOString();
  },
  parseLiteral(ast) {
    if (ast.kind !== Kind.STRING || Number.isNaN(Date.parse(ast.value)))
      fail('DateTime', 'expected an ISO-8601 timestamp');
    return new Date(ast.value).toISOString();
  },
});

/** Deepest nesting of arrays and objects a JSON input may have, as a webhook body (src/server/webhooks/body.ts). */
export const MAX_JSON_INPUT_DEPTH = 64;

/**
 * A JSON value written in the document: refused as its variable is (`jsonValue`, and the pipeline's unsoundPath) when
 * it nests deeper than MAX_JSON_INPUT_DEPTH or holds a number JSON cannot hold (`1e400` reads as Infinity, which
 * nothing downstream can write: the fingerprint threw, an unexpected error after the point was spent). Validation
 * calls this, so such a document is refused before anything runs.
 */
function literalToJson(ast: ValueNode, variables?: Record<string, unknown> | null, depth = 0): unknown {
  switch (ast.kind) {
    case Kind.STRING:
    case Kind.BOOLEAN:
      return ast.value;
    case Kind.INT:
    case Kind.FLOAT: {
      const n = Number(ast.value);
      return Number.isFinite(n) ? n : fail('JSON', `${ast.value} is not a number JSON can hold`);
    }
    case Kind.NULL:
      return null;
    case Kind.LIST:
    case Kind.OBJECT:
      if (depth >= MAX_JSON_INPUT_DEPTH) fail('JSON', `nests deeper than ${MAX_JSON_INPUT_DEPTH} levels`);
      return ast.kind === Kind.LIST
        ? ast.values.map((v) => literalToJson(v, variables, depth + 1))
        : Object.fromEntries(ast.fields.map((f) => [f.name.value, literalToJson(f.value, variables, depth + 1)]));
    case Kind.VARIABLE:
      return variables?.[ast.name.value];
    default:
      return fail('JSON', `unsupported literal ${ast.kind}`);
  }
}

/**
 * A JSON variable as given, unless it nests arrays and objects deeper than MAX_JSON_INPUT_DEPTH: what takes it
 * (fingerprints, canonical JSON, the upstream's body) walks it recursively, and a few thousand levels (30 KB) would
 * overflow the stack. Iterative, and it looks only inside containers.
 */
function jsonValue(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  const containers: object[] = [value];
  const depths: number[] = [1];
  while (containers.length > 0) {
    const v = containers.pop()!;
    const depth = depths.pop()!;
    if (depth > MAX_JSON_INPUT_DEPTH) fail('JSON', `nests deeper than ${MAX_JSON_INPUT_DEPTH} levels`);
    for (const child of Array.isArray(v) ? v : Object.values(v))
      if (child !== null && typeof child === 'object') {
        containers.push(child as object);
        depths.push(depth + 1);
      }
  }
  return value;
}

export const JSONScalar = new GraphQLScalarType({
  name: 'JSON',
  serialize: (v) => v,
  parseValue: jsonValue,
  parseLiteral: literalToJson,
});

const DECIMAL_RE = /^-?(0|[1-9]\d*)$/;

/** Millisecond and byte counts: an Int or a decimal string, kept as the decimal string the wire wants. */
export const DecimalStringScalar = new GraphQLScalarType({
  name: 'DecimalString',
  serialize: (v) => String(v),
  parseValue(v) {
    if (typeof v === 'number' && Number.isSafeInteger(v)) return String(v);
    if (typeof v === 'string' && DECIMAL_RE.test(v.trim())) return v.trim();
    return fail(
      'DecimalString',
      `expected a whole number or a decimal string such as "604800000", got ${JSON.stringify(v)}`,
    );
  },
  parseLiteral(ast) {
    if (ast.kind === Kind.INT) return ast.value;
    if (ast.kind === Kind.STRING && DECIMAL_RE.test(ast.value.trim())) return ast.value.trim();
    return fail('DecimalString', 'expected a whole number or a decimal string');
  },
});
