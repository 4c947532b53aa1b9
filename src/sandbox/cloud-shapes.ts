// The response shapes the cloud sandbox can answer in. The spec shows none of them ("Body of the token
// request and the name of the token field in its response: not shown"; "Response bodies of project and
// resource creation beyond the presence of the identifier: not shown"), so the sandbox must not answer in
// the one shape the gateway happens to expect: it has one mode per plausible shape, and the test suite runs
// the cloud flows over every mode (docs/decisions/017-sandbox-response-shapes.md).
//
// Written from the spec alone, like the rest of the sandbox: nothing here comes from the gateway.

/** Where a creation answer carries the created id. `data.id`: the whole record is wrapped in `data`. */
export const ID_PLACEMENTS = ['id', 'serviceId', 'data.id', 'metadata.id'] as const;
/** The name of the token field in the answer of `POST /iam/v2/tokens`. */
export const TOKEN_FIELDS = ['access_token', 'accessToken', 'token'] as const;
/** The name of the IPv4 field in the answer of an IP address creation, or `absent` (no address at all). */
export const ADDRESS_FIELDS = ['address', 'ipAddress', 'ip_address', 'ip', 'publicIp', 'absent'] as const;

/**
 * Shapes beyond every list above: a name nobody guesses, nesting, and arrays (`items.0.id`: the record is the one
 * element of `items`). A gateway can read them only with an exact path configured; without one it must fail loudly
 * and keep what was created. Named like the others (`uuid+iamToken+addresses.0.ip`), never in CLOUD_SHAPE_MODES.
 */
export const UNLISTED_ID_PLACEMENTS = ['uuid', 'resource.uuid', 'items.0.id'] as const;
export const UNLISTED_TOKEN_FIELDS = ['iamToken', 'auth.iamToken'] as const;
export const UNLISTED_ADDRESS_FIELDS = ['externalAddress', 'addresses.0.ip'] as const;

export type IdPlacement = (typeof ID_PLACEMENTS)[number] | (typeof UNLISTED_ID_PLACEMENTS)[number];
export type TokenField = (typeof TOKEN_FIELDS)[number] | (typeof UNLISTED_TOKEN_FIELDS)[number];
export type AddressField = (typeof ADDRESS_FIELDS)[number] | (typeof UNLISTED_ADDRESS_FIELDS)[number];

const ALL_ID_PLACEMENTS: readonly string[] = [...ID_PLACEMENTS, ...UNLISTED_ID_PLACEMENTS];
const ALL_TOKEN_FIELDS: readonly string[] = [...TOKEN_FIELDS, ...UNLISTED_TOKEN_FIELDS];
const ALL_ADDRESS_FIELDS: readonly string[] = [...ADDRESS_FIELDS, ...UNLISTED_ADDRESS_FIELDS];

export interface CloudResponseShape {
  readonly id: IdPlacement;
  readonly token: TokenField;
  readonly address: AddressField;
}

export interface CloudShapeMode {
  /** `<id>+<token>+<address>`, e.g. `serviceId+accessToken+ip_address`: the value of SANDBOX_CLOUD_SHAPE. */
  readonly name: string;
  readonly shape: CloudResponseShape;
}

function modeOf(shape: CloudResponseShape): CloudShapeMode {
  return { name: `${shape.id}+${shape.token}+${shape.address}`, shape };
}

/**
 * One mode per plausible shape: every value of every dimension is in at least one mode (mode i takes the
 * i-th value of each list, wrapping around), so running every mode covers every field name. The first mode
 * is the default one: `id`, `access_token`, `address`.
 */
export const CLOUD_SHAPE_MODES: readonly CloudShapeMode[] = Array.from(
  { length: Math.max(ID_PLACEMENTS.length, TOKEN_FIELDS.length, ADDRESS_FIELDS.length) },
  (_, i) =>
    modeOf({
      id: ID_PLACEMENTS[i % ID_PLACEMENTS.length]!,
      token: TOKEN_FIELDS[i % TOKEN_FIELDS.length]!,
      address: ADDRESS_FIELDS[i % ADDRESS_FIELDS.length]!,
    }),
);

export const DEFAULT_CLOUD_SHAPE: CloudShapeMode = CLOUD_SHAPE_MODES[0]!;

/**
 * The shape of a name `<id>+<token>+<address>` (any combination of the three lists and the unlisted ones, not only
 * the listed modes); undefined when a part is in neither. `random` is resolved by `randomCloudShape`.
 */
export function cloudShapeByName(name: string): CloudShapeMode | undefined {
  const [id, token, address, ...rest] = name.trim().split('+');
  if (rest.length > 0) return undefined;
  if (!ALL_ID_PLACEMENTS.includes(id ?? '')) return undefined;
  if (!ALL_TOKEN_FIELDS.includes(token ?? '')) return undefined;
  if (!ALL_ADDRESS_FIELDS.includes(address ?? '')) return undefined;
  return modeOf({ id: id as IdPlacement, token: token as TokenField, address: address as AddressField });
}

/** A random shape (one value per dimension, any combination) from a seed: the same seed gives the same shape. */
export function randomCloudShape(seed: number): CloudShapeMode {
  // mulberry32: small, good enough to pick three list entries reproducibly.
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const pick = <T>(list: readonly T[]): T => list[Math.floor(next() * list.length)]!;
  return modeOf({ id: pick(ID_PLACEMENTS), token: pick(TOKEN_FIELDS), address: pick(ADDRESS_FIELDS) });
}

/**
 * Puts `value` at a dotted path (`data.id`, `metadata.id`, `addresses.0.ip`) of a copy of `record`, merging with what
 * is there; a numeric segment makes an array of one element.
 */
function place(record: Record<string, unknown>, path: string, value: unknown): Record<string, unknown> {
  const [head, ...rest] = path.split('.');
  if (rest.length === 0) return { ...record, [head!]: value };
  if (/^\d+$/.test(rest[0]!)) {
    // `addresses.0.ip`: an array whose one element holds the rest.
    const element = rest.length === 1 ? value : place({}, rest.slice(1).join('.'), value);
    return { ...record, [head!]: [element] };
  }
  const inner = record[head!];
  return {
    ...record,
    [head!]: place(inner && typeof inner === 'object' ? (inner as Record<string, unknown>) : {}, rest.join('.'), value),
  };
}

/** A creation answer in `shape`: the record without `id`, with the id (and an IP's address) where the shape says. */
export function shapeCreated(
  shape: CloudResponseShape,
  id: string,
  record: Record<string, unknown>,
  address?: string,
): Record<string, unknown> {
  let body: Record<string, unknown> = { ...record };
  if (address !== undefined && shape.address !== 'absent') body = place(body, shape.address, address);
  // The whole record wrapped: in `data`, or as the one element of `items`.
  if (shape.id === 'data.id') return { data: { id, ...body } };
  if (shape.id === 'items.0.id') return { items: [{ id, ...body }] };
  body = place(body, shape.id, id);
  return body;
}

/** The token answer in `shape`. */
export function shapeToken(shape: CloudResponseShape, token: string, expiresIn: number): Record<string, unknown> {
  return { ...place({}, shape.token, token), token_type: 'Bearer', expires_in: expiresIn };
}

/**
 * SANDBOX_CLOUD_SHAPE resolved: a named shape as it is, `random` from `seed` (a new one when none is given).
 * The seed is returned so that the caller prints it and a run can be repeated.
 */
export function resolveCloudShape(name: string, seed?: number): { mode: CloudShapeMode; seed: number | null } {
  if (name === 'random') {
    const s = seed ?? Math.floor(Math.random() * 0x100000000);
    return { mode: randomCloudShape(s), seed: s };
  }
  const mode = cloudShapeByName(name);
  if (!mode) throw new RangeError(`unknown cloud sandbox response shape ${JSON.stringify(name)}`);
  return { mode, seed: null };
}
