// GATEWAY_APPS_FILE (docs/decisions/046): the apps of a gateway, each with its name, its scopes and the SHA-256 of
// each of its keys, in JSON or YAML. The file holds no key: it can live in a config map or a repository, and a key
// is rotated by adding the new key's digest, moving the app to the new key, then removing the old digest.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import type { Document, LineCounter } from 'yaml';
import { z } from 'zod';

import { FileError } from '../errors.js';
import { APP_NAME, isScope, KEY_LABEL, KEY_LABEL_RULE, SCOPES, type Scope } from './caller.js';
import { NOT_A_FILE, NotAFileError, openRegularFile } from './regular-file.js';

/** One app of the file. */
export interface AppFileEntry {
  readonly name: string;
  readonly scopes: readonly Scope[];
  /** The sha256 digests of its keys, as 64 lowercase hex digits. */
  readonly keyDigests: readonly string[];
  /** For an approver: the apps whose agents' plans it may approve; undefined: every app's. */
  readonly approves?: readonly string[];
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

const keySchema = z.strictObject({
  sha256: z
    .string()
    .transform((s) => s.trim().toLowerCase())
    .refine(
      (s) => SHA256_HEX.test(s),
      'must be the SHA-256 of the key as 64 hex digits (for example: printf %s "$KEY" | sha256sum)',
    ),
  /** Free text for the operator (who holds the key, when it was issued); never read by the gateway. */
  note: z.string().optional(),
});

const appSchema = z.strictObject({
  name: z
    .string()
    .regex(APP_NAME, 'must be 1 to 64 letters, digits, `_`, `.` or `-`, starting with a letter or digit')
    .refine((name) => !KEY_LABEL.test(name), `must not be of a bare key's label's form: ${KEY_LABEL_RULE}`),
  scopes: z
    .array(z.string().refine(isScope, { message: `is not a scope; the scopes are ${SCOPES.join(', ')}` }))
    .min(1, 'must list at least one scope (an app that may do nothing needs no key)'),
  keys: z.array(keySchema).min(1, 'must list at least one key digest'),
  /** The apps whose agents' plans this approver may approve (cloud:approve, identity:approve); absent: every app's. */
  approves: z
    .array(z.string().regex(APP_NAME, 'must be an app name'))
    .min(1, 'must list at least one app (leave approves out to approve every app)')
    .optional(),
  note: z.string().optional(),
});

const fileSchema = z.strictObject({ apps: z.array(appSchema).min(1, 'must list at least one app') });

/** A bad apps file: the message names the file and the line. */
export class AppsFileError extends FileError {}

/** Reads and checks the apps file; throws AppsFileError naming the line of the first problem. */
export function readAppsFile(file: string): AppFileEntry[] {
  return parseAppsFile(
    readYamlText(file, (line, reason, message) => new AppsFileError(file, line, reason, message)),
    file,
  );
}

/**
 * The text of a YAML file (the apps file, the issuers file), a file over MAX_YAML_FILE_BYTES refused unread (line 1),
 * as readJsonFile refuses a JSON file: read whole first, a file far past any real one (the wrong path, a dump) was held
 * in memory twice over, a buffer and a string, before parseYamlFile's bound refused it, and the reload that read it
 * could end the gateway it was to leave unchanged; past ~512 MiB it was said as "cannot be read: ERR_STRING_TOO_LONG".
 * The size is asked of the open file, then checked again of what was read (a file that grew says so only then); a
 * path that is no regular file (a pipe, a device, a folder) is refused unread.
 */
export function readYamlText(
  file: string,
  refuse: (line: number | null, reason: string, message?: string) => Error,
): string {
  let raw: Buffer | null;
  let fd: number | undefined;
  try {
    fd = openRegularFile(file);
    raw = fs.fstatSync(fd).size > MAX_YAML_FILE_BYTES ? null : fs.readFileSync(fd);
  } catch (err) {
    if (err instanceof NotAFileError) throw refuse(null, `${NOT_A_FILE}: name the YAML or JSON file itself`);
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw refuse(null, `cannot be read: ${code}`, `${file} cannot be read: ${code}`);
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
  if (raw === null || raw.length > MAX_YAML_FILE_BYTES) throw refuse(1, TOO_LARGE);
  return raw.toString('utf8');
}

/** Parses the text of an apps file (JSON is YAML too, so one parser gives both their line numbers). */
export function parseAppsFile(text: string, file: string): AppFileEntry[] {
  const { data, doc, lines } = parseYamlFile(
    text,
    file,
    fileSchema,
    (line, reason) => new AppsFileError(file, line, reason),
  );
  const seenNames = new Map<string, number>();
  const seenKeys = new Map<string, string>();
  const apps = data.apps.map((app, i) => {
    const line = lineOf(doc, lines, ['apps', i]);
    if (seenNames.has(app.name))
      throw new AppsFileError(
        file,
        line,
        `app ${app.name} is listed twice (first at line ${seenNames.get(app.name)}): list its keys under one entry`,
      );
    seenNames.set(app.name, line);
    app.keys.forEach((k, j) => {
      const owner = seenKeys.get(k.sha256);
      if (owner !== undefined)
        throw new AppsFileError(
          file,
          lineOf(doc, lines, ['apps', i, 'keys', j]),
          `this key digest is already one of ${owner}'s keys: one key is one app`,
        );
      seenKeys.set(k.sha256, app.name);
    });
    return {
      name: app.name,
      scopes: [...new Set(app.scopes as Scope[])],
      keyDigests: app.keys.map((k) => k.sha256),
      ...(app.approves ? { approves: [...new Set(app.approves)] } : {}),
    };
  });
  return apps;
}

/**
 * The YAML library, loaded by the first file read: a gateway without GATEWAY_APPS_FILE and AUTH_ISSUERS never loads it,
 * ~1 MB of heap that every full collection would walk (docs/decisions/124). Required, as the configuration is read
 * synchronously; yaml's Node build is CommonJS under `import` too, so this is the module an import would load.
 */
let yamlModule: typeof import('yaml') | undefined;
const yaml = (): typeof import('yaml') =>
  (yamlModule ??= createRequire(import.meta.url)('yaml') as typeof import('yaml'));

/**
 * Largest YAML file read, in bytes of text. Parsed, YAML takes about 75 times its text in memory and the event loop
 * a second per MiB and a half (a reload is synchronous): 1 MiB holds thousands of apps or issuers, and a file far larger
 * (24 MB) ran the gateway out of heap and ended it.
 */
const MAX_YAML_FILE_BYTES = 1024 * 1024;
/** A YAML file's refusal past MAX_YAML_FILE_BYTES, read (readYamlText) or given as text (parseYamlFile). */
const TOO_LARGE = `the file is larger than 1 MiB (${MAX_YAML_FILE_BYTES} bytes), more than any such file needs`;

/**
 * A YAML (or JSON) file an operator writes, checked by `schema`: its value, or `refuse` of the first syntax error or
 * schema issue, naming the file, the line and the field (the apps file and the issuers file read the same way).
 */
export function parseYamlFile<T>(
  text: string,
  file: string,
  schema: z.ZodType<T>,
  refuse: (line: number, reason: string) => Error,
): { data: T; doc: Document; lines: LineCounter } {
  if (Buffer.byteLength(text) > MAX_YAML_FILE_BYTES) throw refuse(1, TOO_LARGE);
  const { LineCounter, parseDocument } = yaml();
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: true, uniqueKeys: true });
  const syntax = doc.errors[0];
  if (syntax) throw refuse(syntax.linePos?.[0].line ?? 1, syntax.message.split('\n')[0]!);
  // zod would say "expected object, received null", which does not tell an emptied file from a bad one.
  if (doc.contents === null) throw refuse(1, 'the file is empty (or holds only comments)');
  // toJS refuses aliases that expand the document far past its text (a ReferenceError, which names no file): said at
  // the line of the first alias.
  let value: unknown;
  try {
    value = doc.toJS();
  } catch (err) {
    let line = 1;
    yaml().visit(doc, {
      Alias(_key, node) {
        if (node.range) line = lines.linePos(node.range[0]).line;
        return yaml().visit.BREAK;
      },
    });
    throw refuse(line, `cannot be read as data: ${(err as Error).message} (write the values out instead of aliases)`);
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length ? issue.path.map(String).join('.') : 'the file';
    // zod's type refusals read "Invalid input: expected array, received string": said of the field, in words.
    const a = (type: string) => `${/^[aeiou]/.test(type) ? 'an' : 'a'} ${type}`;
    const message = issue.message
      .replace(/^Invalid input: expected (\w+), received undefined$/, 'is missing (expected $1)')
      .replace(
        /^Invalid input: expected (\w+), received (\w+)$/,
        (_all, expected: string, received: string) =>
          `is ${received === 'null' ? 'null' : a(received)} where ${a(expected)} is expected`,
      );
    throw refuse(lineOf(doc, lines, issue.path), `${where} ${message}`);
  }
  return { data: parsed.data, doc, lines };
}

/** The line of the node at `path`, or of its nearest parent that exists (the issuers file's lines too). */
export function lineOf(doc: Document, lines: LineCounter, path: readonly PropertyKey[]): number {
  for (let n = path.length; n >= 0; n -= 1) {
    const node: unknown = n === 0 ? doc.contents : doc.getIn(path.slice(0, n) as unknown[], true);
    if (yaml().isNode(node) && node.range) return lines.linePos(node.range[0]).line;
  }
  return 1;
}
