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

/** Two digits, zero first. */
const two = (n: number): string => (n < 10 ? `0${n}` : `${n}`);

/** The last instant of year 9999 plus one millisecond: below it, a year has four digits and no sign. */
const YEAR_10000 = 253_402_300_800_000;

/**
 * `new Date(ms).toISOString()`, the same text, written here for the years 1970–9999: V8's own looks up the local time
 * zone's offset on every call (ICU), which it does not print; ~3–4 µs of a delivery's CPU where the cache is cold
 * (docs/decisions/108). Any other instant (or none: NaN), or a fraction of a millisecond, is V8's, with its RangeError.
 */
export function isoString(ms: number): string {
  if (!(ms >= 0 && ms < YEAR_10000 && Number.isInteger(ms))) return new Date(ms).toISOString();
  const inDay = ms % 86_400_000;
  // The civil date of a count of days since 1970-01-01 (H. Hinnant's days_from_civil inverted), in eras of 400 years.
  const z = (ms - inDay) / 86_400_000 + 719_468;
  const era = Math.floor(z / 146_097);
  const ofEra = z - era * 146_097;
  const yearOfEra = Math.floor(
    (ofEra - Math.floor(ofEra / 1460) + Math.floor(ofEra / 36_524) - Math.floor(ofEra / 146_096)) / 365,
  );
  const dayOfYear = ofEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const m = Math.floor((5 * dayOfYear + 2) / 153);
  const day = dayOfYear - Math.floor((153 * m + 2) / 5) + 1;
  const month = m < 10 ? m + 3 : m - 9;
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);
  const milli = inDay % 1000;
  return (
    `${year}-${two(month)}-${two(day)}T${two(Math.floor(inDay / 3_600_000))}:` +
    `${two(Math.floor(inDay / 60_000) % 60)}:${two(Math.floor(inDay / 1000) % 60)}.` +
    `${milli < 10 ? '00' : milli < 100 ? '0' : ''}${milli}Z`
  );
}

export const DateTimeScalar = new GraphQLScalarType({
  name: 'DateTime',
  serialize(v) {
    if (v instanceof Date) return isoString(v.getTime());
    if (typeof v === 'number') return isoString(new Date(v).getTime());
    if (typeof v === 'string') return isoString(new Date(v).getTime());
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

function literalToJson(ast: ValueNode, variables?: Record<string, unknown> | null): unknown {
  switch (ast.kind) {
    case Kind.STRING:
    case Kind.BOOLEAN:
      return ast.value;
    case Kind.INT:
    case Kind.FLOAT:
      return Number(ast.value);
    case Kind.NULL:
      return null;
    case Kind.LIST:
      return ast.values.map((v) => literalToJson(v, variables));
    case Kind.OBJECT:
      return Object.fromEntries(ast.fields.map((f) => [f.name.value, literalToJson(f.value, variables)]));
    case Kind.VARIABLE:
      return variables?.[ast.name.value];
    default:
      return fail('JSON', `unsupported literal ${ast.kind}`);
  }
}

export const JSONScalar = new GraphQLScalarType({
  name: 'JSON',
  serialize: (v) => v,
  parseValue: (v) => v,
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
