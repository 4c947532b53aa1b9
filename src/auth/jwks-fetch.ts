// The one fetch of a JWKS, for the identity provider of apps' JWTs (src/auth/jwt.ts) and for the mobile
// identity service (src/mobile-id/jwks.ts): bounded in time and size, and checked to be a JWKS. And the one read of a
// JWKS file (AUTH_JWKS_FILE, an issuer's jwksFile, MOBILEID_JWKS_FILE), at start and on each reload.
import { createPublicKey, type JsonWebKey } from 'node:crypto';
import {
  errors,
  type createLocalJWKSet,
  type FlattenedJWSInput,
  type JSONWebKeySet,
  type JWSHeaderParameters,
} from 'jose';

import { ConfigError, INTERNAL_ERROR_MESSAGE, shownUrl } from '../errors.js';
import { logUnexpected, type Logger } from '../logger.js';
import { JsonFileError, readJsonFile } from './json-file.js';

/**
 * The JWS algorithms a JWT or id_token of these key sets may use: asymmetric only. `none` is never accepted, and an HMAC
 * "signature" keyed with a public key of the JWKS is the classic confusion attack (RFC 8725 §2.1, §3.1); jose checks the
 * alg against this list before it asks for a key.
 */
export const ASYMMETRIC_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
];

/** A failed JWKS fetch in the gateway's words (the URL without its user info, a status, a code): apps may read it. */
export class JwksFetchError extends Error {}

/**
 * Why a JWKS fetch failed, in words apps may read (the failure a JwksUnavailableError names): a JwksFetchError's or
 * jose's own (a key set it cannot use). Any other error (a bug's) reads INTERNAL_ERROR_MESSAGE, and its words go to the
 * log only, in full, with `logger` (a request's, with its id, or the gateway's); `whose` names the JWKS there.
 */
export function jwksFailure(err: unknown, url: string, logger: Logger | undefined, whose: string): string {
  if (err instanceof JwksFetchError || err instanceof errors.JOSEError) return err.message;
  if (logger) logUnexpected(logger, err, { jwks: shownUrl(url) }, `unexpected error while ${whose} JWKS was fetched`);
  return INTERNAL_ERROR_MESSAGE;
}

const JWKS_TIMEOUT_MS = 5_000;
/**
 * Largest JWKS read, fetched or from a file, in bytes. A JWKS holds a few keys of a few hundred bytes each (a few KB):
 * 1 MiB holds well over a thousand, and refuses a wrong file or answer before it is parsed and its keys imported.
 */
const JWKS_MAX_BYTES = 1024 * 1024;

export async function fetchJwks(url: string): Promise<JSONWebKeySet> {
  // undici's whole API only where a JWKS is fetched: the upstreams' pools load just theirs (docs/decisions/124).
  const { request } = await import('undici');
  // The timeouts below bound each wait (the headers, the gap between two chunks of the body); the deadline bounds the
  // whole fetch, which a JWKS answering a byte at a time would otherwise hold for as long as it likes, and with it
  // every token that waits for the keys.
  const deadline = AbortSignal.timeout(JWKS_TIMEOUT_MS);
  let res: Awaited<ReturnType<typeof request>>;
  try {
    res = await request(url, {
      method: 'GET',
      headers: { accept: 'application/jwk-set+json, application/json' },
      headersTimeout: JWKS_TIMEOUT_MS,
      bodyTimeout: JWKS_TIMEOUT_MS,
      signal: deadline,
    });
  } catch (err) {
    throw failed(url, err, deadline);
  }
  if (res.statusCode !== 200) {
    await res.body.dump();
    throw new JwksFetchError(`GET ${shownUrl(url)} answered ${res.statusCode}`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > JWKS_MAX_BYTES) break;
      chunks.push(chunk);
    }
  } catch (err) {
    throw failed(url, err, deadline);
  }
  if (size > JWKS_MAX_BYTES) {
    res.body.destroy();
    throw new JwksFetchError(`GET ${shownUrl(url)} answered more than ${JWKS_MAX_BYTES} bytes`);
  }
  let jwks: unknown;
  try {
    jwks = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new JwksFetchError(`GET ${shownUrl(url)} answered something that is not JSON`);
  }
  if (!jwks || typeof jwks !== 'object' || !Array.isArray((jwks as { keys?: unknown }).keys))
    throw new JwksFetchError(`GET ${shownUrl(url)} answered JSON that is not a JWKS (no "keys" array)`);
  return jwks as JSONWebKeySet;
}

/**
 * A fetch that failed before a whole answer, named by its code only (ECONNREFUSED, ENOTFOUND, UND_ERR_HEADERS_TIMEOUT):
 * the message, which reaches apps, never holds the driver's sentence, which names the address the URL's host resolved
 * to. The driver's error is its `cause`, for the log.
 */
function failed(url: string, err: unknown, deadline: AbortSignal): JwksFetchError {
  if (deadline.aborted)
    return new JwksFetchError(`GET ${shownUrl(url)} did not answer in full within ${JWKS_TIMEOUT_MS / 1000} s`, {
      cause: err,
    });
  const code = (err as { code?: unknown } | null)?.code;
  return new JwksFetchError(`GET ${shownUrl(url)} failed: ${typeof code === 'string' ? code : 'ERROR'}`, {
    cause: err,
  });
}

/** A key of a fetched JWKS the gateway cannot verify with: its kid, and why, in words apps may read. */
export interface UnusableKey {
  kid: string | undefined;
  reason: string;
}

/** The algorithms of ASYMMETRIC_ALGORITHMS a key of this type and curve verifies. */
function algorithmsOf(kty: string, crv: unknown): readonly string[] {
  if (kty === 'RSA') return ASYMMETRIC_ALGORITHMS.filter((alg) => /^(RS|PS)/.test(alg));
  if (kty === 'EC') return crv === 'P-256' ? ['ES256'] : crv === 'P-384' ? ['ES384'] : crv === 'P-521' ? ['ES512'] : [];
  if (kty === 'OKP') return crv === 'Ed25519' ? ['EdDSA', 'Ed25519'] : [];
  return [];
}

/** A value of a JWK's member, for a reason: quoted, and cut short (a JWKS is anyone's to publish). */
const quoted = (value: unknown) => {
  const text = typeof value === 'string' ? value : String(value);
  return JSON.stringify(text.length > 64 ? `${text.slice(0, 64)}…` : text);
};

/**
 * Splits a fetched JWKS into the keys jose may verify with and the signing keys it could not: a private or symmetric
 * key, a key type or curve outside ASYMMETRIC_ALGORITHMS, an alg not of its key type, a key Node cannot import, an RSA
 * key under 2048 bits. jose would refuse a token of such a key as the token's fault (no key matches) or throw while it
 * imports it (an unexpected error); the provider's JWKS is at fault, so the key lookups answer a token that names
 * one's kid as for a JWKS that cannot be read. An encryption key (`use` "enc", or `key_ops` without "verify") is kept:
 * jose passes over it.
 */
export function usableKeys(jwks: JSONWebKeySet): { usable: JSONWebKeySet; unusable: UnusableKey[] } {
  const usable: JSONWebKeySet['keys'] = [];
  const unusable: UnusableKey[] = [];
  for (const key of jwks.keys as unknown[]) {
    const jwk = (key && typeof key === 'object' ? key : {}) as Record<string, unknown>;
    const kid = typeof jwk.kid === 'string' ? jwk.kid : undefined;
    const why = notForSigning(jwk) === null ? unusableBecause(jwk) : null;
    if (why === null) usable.push(jwk as JSONWebKeySet['keys'][number]);
    else unusable.push({ kid, reason: why });
  }
  return { usable: { keys: usable }, unusable };
}

/** Why a JWK is no signing key (`use` other than "sig", `key_ops` without "verify"), or null when it may be one. */
function notForSigning(jwk: Record<string, unknown>): string | null {
  const { use, key_ops: keyOps } = jwk;
  if (use !== undefined && use !== 'sig') return `its use ${quoted(use)} is not "sig": it is no signing key`;
  if (Array.isArray(keyOps) && !keyOps.includes('verify'))
    return `its key_ops ${quoted(JSON.stringify(keyOps))} lack "verify": it is no signing key`;
  return null;
}

/**
 * base64url, as RFC 7518 writes a key's numbers (padding tolerated). Node decodes any other text leniently, into
 * another number: a mangled modulus would read as "an RSA key of 72 bits" rather than as the typing mistake it is.
 */
const BASE64URL = /^[A-Za-z0-9_-]+={0,2}$/;

/** The members each key type must hold as base64url numbers (RFC 7518 §6.2.1, §6.3.1; RFC 8037 §2). */
const NUMBER_MEMBERS: Record<string, readonly string[]> = { RSA: ['n', 'e'], EC: ['x', 'y'], OKP: ['x'] };

/** Why a signing key (a JWK with a kty) cannot verify, in words apps and the operator may read; null when it can. */
function unusableBecause(jwk: Record<string, unknown>): string | null {
  return unsupportedBecause(jwk) ?? malformedBecause(jwk);
}

/**
 * Why a signing key is of a kind the gateway does not verify with (a key type, curve or alg), or holds a secret; null
 * when it is of a kind it does.
 */
function unsupportedBecause(jwk: Record<string, unknown>): string | null {
  const { kty, crv, alg } = jwk;
  if (typeof kty !== 'string') return 'it is not a JWK (an object with a "kty")';
  const secret = SECRET_MEMBERS.find((m) => m in jwk);
  if (secret !== undefined)
    return `it holds a private or secret key (member "${secret}"): a JWKS publishes public keys`;
  if (!['RSA', 'EC', 'OKP'].includes(kty))
    return `its kty ${quoted(kty)} is no key type the gateway verifies with (RSA, EC, OKP)`;
  const algorithms = algorithmsOf(kty, crv);
  if (algorithms.length === 0)
    return `its crv ${quoted(crv)} is no curve the gateway verifies with (${kty === 'EC' ? 'P-256, P-384, P-521' : 'Ed25519'})`;
  if (alg !== undefined && !algorithms.includes(alg as string))
    return `its alg ${quoted(alg)} is not an algorithm of its key type (${algorithms.join(', ')})`;
  return null;
}

/** Why a key of a kind the gateway verifies with cannot be used: its numbers are missing or malformed, or too small. */
function malformedBecause(jwk: Record<string, unknown>): string | null {
  const kty = jwk.kty as string;
  const malformed = NUMBER_MEMBERS[kty]!.find((m) => typeof jwk[m] !== 'string' || !BASE64URL.test(jwk[m]));
  if (malformed !== undefined)
    return jwk[malformed] === undefined ? `it lacks its "${malformed}"` : `its "${malformed}" is not base64url`;
  let bits: number | undefined;
  try {
    bits = createPublicKey({ key: jwk as JsonWebKey, format: 'jwk' }).asymmetricKeyDetails?.modulusLength;
  } catch {
    return `it cannot be imported as an ${kty} public key`;
  }
  if (kty === 'RSA' && (bits === undefined || bits < MIN_RSA_BITS))
    return `it is an RSA key of ${bits ?? 'unknown'} bits: signatures are verified only with keys of ${MIN_RSA_BITS} bits or more`;
  return null;
}

/** Why a key usableKeys let through is not used after all: the import WebCrypto refused. */
const NOT_IMPORTED = 'it cannot be imported as a public key';

/**
 * The key `local` finds for a token. Its one error that is neither jose's nor a lookup's miss is the key's import
 * failing (a key usableKeys let through that WebCrypto refuses): the JWKS's key, not a bug, and not the token's fault;
 * `unusable` is told (to warn, with the import's words) and makes the error thrown.
 */
export async function keyOf(
  local: ReturnType<typeof createLocalJWKSet>,
  header: JWSHeaderParameters,
  token: FlattenedJWSInput,
  unusable: (kid: unknown, reason: string, err: string | undefined) => Error,
): Promise<CryptoKey> {
  try {
    return await local(header, token);
  } catch (err) {
    if (err instanceof errors.JOSEError) throw err;
    throw unusable(header.kid, NOT_IMPORTED, (err as Error | undefined)?.message);
  }
}

/** The unusable key a token's kid names (a token without a kid names a key without one), if any. */
export function unusableKeyOf(unusable: readonly UnusableKey[], kid: unknown): UnusableKey | undefined {
  return unusable.find((k) => k.kid === kid);
}

/** A token's kid as an error an app reads may repeat it. */
export function shownKid(kid: unknown): string {
  return typeof kid === 'string' ? quoted(kid) : '(none)';
}

/** The members of a JWK that hold a private or secret key (RFC 7518 §6.2.2, §6.3.2, §6.4; RFC 8037 §2). */
const SECRET_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];
/** jose verifies RS* and PS* signatures only with an RSA key of at least this many bits. */
const MIN_RSA_BITS = 2048;

/** A key of a JWKS file that tokens are not verified with: where it is, its kid, and why. */
interface PassedOverKey {
  readonly index: number;
  readonly kid: string | undefined;
  readonly line: number;
  readonly reason: string;
}

/** A JWKS file as read: the keys tokens are verified with, and a warning of the keys passed over. */
export interface JwksFile {
  /** The file's signing keys the gateway verifies with: at least one. */
  readonly jwks: JSONWebKeySet;
  /**
   * Logs the keys passed over in one warning, naming the variable, the file, and each key's kid, line and reason
   * (nothing when there are none). Called when these keys come into force (at start, by the reload that swaps them
   * in), so that a read a reload refuses, or reads again, warns of nothing.
   */
  warn(logger: Logger | undefined): void;
}

/** Keys passed over, in the words of a refusal and of a warning: `keys[2] (kid "a", line 14): its crv …`. */
function passedOverWords(keys: readonly PassedOverKey[]): string {
  return keys
    .map(
      (k) =>
        `keys[${k.index}] (${k.kid === undefined ? 'no kid' : `kid ${quoted(k.kid)}`}, line ${k.line}): ${k.reason}`,
    )
    .join('; ');
}

/**
 * Reads the JWKS file a variable names (AUTH_JWKS_FILE, an AUTH_ISSUERS entry's jwksFile, MOBILEID_JWKS_FILE), at
 * start and on each reload: the one reading of the three. Throws a ConfigError naming the variable, the file and the
 * line of the first problem, never a member's value, for a file that is no JWKS (unreadable, not JSON, no "keys"
 * array, an entry that is no JWK), that holds a secret (a private or symmetric key: the file was meant to hold none,
 * and the secret is the one to move), two keys a token of one kid would both match, or a key of a kind the gateway
 * verifies with that cannot be used (its numbers missing or not base64url, an RSA key under 2048 bits: a typing
 * mistake to mend); and for a file with no key the gateway can verify signatures with, listing each key's kid, line
 * and reason. A key of another kind beside usable ones (a key type, curve, alg or use the gateway does not verify
 * with) is passed over, as in a fetched JWKS (usableKeys), and `warn` names it: a provider's published set often holds
 * an encryption key, or a key for other relying parties, that the operator copies with the rest.
 */
export function readJwksFile(variable: string, file: string): JwksFile {
  try {
    return jwksFileOf(file, variable);
  } catch (err) {
    if (err instanceof JsonFileError) throw ConfigError.ofFile(variable, err);
    throw err;
  }
}

function jwksFileOf(file: string, variable: string): JwksFile {
  const json = readJsonFile(file, JWKS_MAX_BYTES);
  const jwks = json.value as { keys?: unknown } | null;
  if (!jwks || typeof jwks !== 'object' || Array.isArray(jwks) || !Array.isArray(jwks.keys)) {
    throw new JsonFileError(file, json.lineOf(['keys']), 'is not a JWKS (an object with a "keys" array)');
  }
  if (jwks.keys.length === 0)
    throw new JsonFileError(
      file,
      json.lineOf(['keys']),
      `holds no key ("keys" is empty): a JWKS file needs at least one public key the gateway can verify signatures with (${KEY_KINDS})`,
    );
  const usable: JSONWebKeySet['keys'] = [];
  const passedOver: PassedOverKey[] = [];
  /** Per kid, kty and curve, the keys a token of that kid could match: jose refuses a token that two keys match. */
  const byKid = new Map<string, { index: number; alg: unknown }[]>();
  jwks.keys.forEach((key: unknown, i) => {
    const refuse = (reason: string, member?: string) =>
      new JsonFileError(file, json.lineOf(member === undefined ? ['keys', i] : ['keys', i, member]), reason);
    if (!key || typeof key !== 'object' || typeof (key as { kty?: unknown }).kty !== 'string')
      throw refuse(`keys[${i}] is not a JWK (an object with a "kty")`);
    const jwk = key as Record<string, unknown> & { kty: string };
    if (jwk.kty === 'oct')
      throw refuse(
        `keys[${i}] is a symmetric key (kty "oct"): a JWKS file holds public keys only, and JWTs are verified with asymmetric signatures only; remove it`,
      );
    const secret = SECRET_MEMBERS.find((m) => m in jwk);
    if (secret !== undefined)
      throw refuse(
        `keys[${i}] holds a private key (member "${secret}"): a JWKS file holds public keys only; publish the public half (without d, p, q, dp, dq, qi) and keep the private key away from the gateway`,
        secret,
      );
    const { kid, use, alg, crv } = jwk;
    if (typeof kid === 'string' && (use === undefined || use === 'sig')) {
      const same = `${kid}\u0000${jwk.kty}\u0000${String(crv)}`;
      const earlier = byKid.get(same) ?? [];
      const twin = earlier.find((k) => k.alg === undefined || alg === undefined || k.alg === alg);
      if (twin !== undefined)
        throw refuse(
          `keys[${i}] has the kid ${quoted(kid)} of keys[${twin.index}] (line ${json.lineOf(['keys', twin.index, 'kid'])}): a token of that kid would match both and be refused; give each key its own kid`,
          'kid',
        );
      byKid.set(same, [...earlier, { index: i, alg }]);
    }
    const why = notForSigning(jwk) ?? unsupportedBecause(jwk);
    if (why === null) {
      // A key of a kind the gateway verifies with is one the file means to be used: a typing mistake in it (a
      // mangled modulus, a key cut short) is the file's error, refused, not passed over as a key meant for another.
      const malformed = malformedBecause(jwk);
      if (malformed !== null) throw refuse(`keys[${i}] cannot be used: ${malformed}; mend it or remove it`);
      usable.push(jwk as JSONWebKeySet['keys'][number]);
    } else
      passedOver.push({
        index: i,
        kid: typeof kid === 'string' ? kid : undefined,
        line: json.lineOf(['keys', i]),
        reason: why,
      });
  });
  if (usable.length === 0)
    throw new JsonFileError(
      file,
      passedOver[0]!.line,
      `holds no key the gateway can verify signatures with: ${passedOverWords(passedOver)}`,
    );
  return {
    jwks: { keys: usable },
    warn(logger) {
      if (passedOver.length === 0 || logger === undefined) return;
      logger.warn(
        {
          variable,
          file,
          passedOver: passedOver.map(({ kid, line, reason }) => ({ kid: kid ?? null, line, reason })),
        },
        `${variable}: ${file} holds keys the gateway cannot verify signatures with: they are passed over (a token or id_token that names one's kid is refused), the file's other keys are in force: ${passedOverWords(passedOver)}`,
      );
    },
  };
}

/** The keys the gateway verifies signatures with, in a refusal's words. */
const KEY_KINDS = 'RSA of 2048 bits or more, EC on P-256, P-384 or P-521, or Ed25519';
