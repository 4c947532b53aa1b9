// AUTH_ISSUERS (docs/decisions/058): the identity providers whose JWTs apps may send, each with its JWKS, issuer,
// audience, app claim, scope claims and the apps it may sign in, in JSON or YAML like the apps file. A token is checked
// against the entry of its own iss only.
import path from 'node:path';
import { z } from 'zod';

import { FileError } from '../errors.js';
import { lineOf, parseYamlFile, readYamlText } from './apps-file.js';

/** One provider of the file, as written (src/config/index.ts checks its apps against the configured ones). */
export interface IssuerFileEntry {
  readonly issuer: string;
  /** jwksUrl, or jwksFile resolved against the directory of the issuers file. */
  readonly jwks: { readonly url: string } | { readonly file: string };
  readonly audience: readonly string[];
  readonly appClaim: string | null;
  /** Absent: AUTH_SCOPE_CLAIMS. */
  readonly scopeClaims: readonly string[] | undefined;
  /** Absent: AUTH_SCOPE_PREFIX. */
  readonly scopePrefix: string | undefined;
  readonly apps: readonly string[];
  readonly operatorApps: readonly string[];
  /** The line of the entry, and of each of its fields, for the errors src/config/index.ts finds. */
  readonly line: number;
  lineOf(field: string, index?: number): number;
}

/** A claim name: the characters AUTH_APP_CLAIM allows. */
export const CLAIM_NAME = /^[A-Za-z0-9_.:/-]{1,128}$/;

const strings = (what: string) =>
  z.union([
    z
      .string()
      .min(1, `must not be empty`)
      .transform((s) => [s]),
    z.array(z.string().min(1, `must not hold an empty ${what}`)).min(1, `must list at least one ${what}`),
  ]);
const httpUrl = z.string().refine((s) => {
  try {
    return ['http:', 'https:'].includes(new URL(s).protocol);
  } catch {
    return false;
  }
}, 'must be an http(s) URL');

const issuerSchema = z
  .strictObject({
    issuer: z.string().min(1, 'must be the iss the provider writes in its tokens'),
    jwksUrl: httpUrl.optional(),
    jwksFile: z.string().min(1).optional(),
    audience: strings('audience'),
    appClaim: z.string().regex(CLAIM_NAME, 'must be a claim name (letters, digits, _ . : / -)').optional(),
    scopeClaims: z
      .array(z.string().regex(CLAIM_NAME, 'must be a claim name (letters, digits, _ . : / -)'))
      .min(1, 'must name at least one claim')
      .optional(),
    scopePrefix: z.string().regex(/^\S*$/, 'must not hold spaces').optional(),
    apps: z
      .array(z.string().min(1))
      .min(1, 'must list the apps accepted, as AUTH_APPS does (`shop`, `<client id>=<name>` or `*`)'),
    operatorApps: z.array(z.string()).optional(),
    note: z.string().optional(),
  })
  .refine((e) => (e.jwksUrl === undefined) !== (e.jwksFile === undefined), {
    message: 'needs jwksUrl or jwksFile (one of them)',
    path: ['jwksUrl'],
  });

const fileSchema = z.strictObject({ issuers: z.array(issuerSchema).min(1, 'must list at least one issuer') });

/** A bad issuers file: the message names the file and the line. */
export class IssuersFileError extends FileError {}

export function readIssuersFile(file: string): IssuerFileEntry[] {
  const text = readYamlText(file, (line, reason, message) => new IssuersFileError(file, line, reason, message));
  const { data, doc, lines } = parseYamlFile(
    text,
    file,
    fileSchema,
    (line, reason) => new IssuersFileError(file, line, reason),
  );
  const seen = new Map<string, number>();
  return data.issuers.map((e, i) => {
    const line = lineOf(doc, lines, ['issuers', i]);
    const first = seen.get(e.issuer);
    if (first !== undefined)
      throw new IssuersFileError(
        file,
        line,
        `issuer ${e.issuer} is listed twice (first at line ${first}): a token is checked against one entry, the one of its iss`,
      );
    seen.set(e.issuer, line);
    return {
      issuer: e.issuer,
      jwks:
        e.jwksUrl !== undefined
          ? { url: e.jwksUrl }
          : { file: path.resolve(path.dirname(path.resolve(file)), e.jwksFile!) },
      audience: e.audience,
      appClaim: e.appClaim ?? null,
      scopeClaims: e.scopeClaims,
      scopePrefix: e.scopePrefix,
      apps: e.apps,
      operatorApps: e.operatorApps ?? [],
      line,
      lineOf: (field: string, index?: number) =>
        lineOf(doc, lines, index === undefined ? ['issuers', i, field] : ['issuers', i, field, index]),
    };
  });
}
