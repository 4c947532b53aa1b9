// The JSON files an operator edits and the gateway reads again on a reload (a JWKS, the trusted-documents manifest):
// a mistake is reported with its line, which JSON.parse of Node 20 does not give. A small scanner walks the text once
// to find the first syntax error's line and the line of each member and element; JSON.parse gives the value.
import fs from 'node:fs';

import { FileError } from '../errors.js';
import { NOT_A_FILE, NotAFileError, openRegularFile } from './regular-file.js';

/** A JSON file that cannot be read or parsed; the message names the file and, when known, the line. */
export class JsonFileError extends FileError {}

export interface JsonFile {
  readonly file: string;
  readonly value: unknown;
  /** The line of the value at a path (`keys.2`, `<document id>`); 1 for the whole file or a path not found. */
  lineOf(path: readonly (string | number)[]): number;
}

/** A bound of `readJsonFile` in words: "1 MiB". */
const mebibytes = (bytes: number) => `${bytes / (1024 * 1024)} MiB`;

/**
 * Reads a JSON file of at most `maxBytes` bytes. A larger file is refused unread (line 1): what is parsed is held in
 * memory many times over, and the reload that reads it holds the event loop, so a file far past any real one (the wrong
 * path, a dump) would stop the gateway for seconds or end it. The size is asked of the open file, then checked again of
 * what was read (a file that grew). A path that is no regular file (a pipe, a device, a folder) is refused unread.
 */
export function readJsonFile(file: string, maxBytes: number): JsonFile {
  const tooLarge = () =>
    new JsonFileError(
      file,
      1,
      `the file is larger than ${mebibytes(maxBytes)} (${maxBytes} bytes), more than any such file needs`,
    );
  let raw: Buffer;
  let fd: number | undefined;
  try {
    fd = openRegularFile(file);
    if (fs.fstatSync(fd).size > maxBytes) throw tooLarge();
    raw = fs.readFileSync(fd);
  } catch (err) {
    if (err instanceof JsonFileError) throw err;
    if (err instanceof NotAFileError) throw new JsonFileError(file, null, `${NOT_A_FILE}: name the JSON file itself`);
    throw new JsonFileError(
      file,
      null,
      `is not a readable JSON file: cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    );
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
  if (raw.length > maxBytes) throw tooLarge();
  return parseJsonFile(raw.toString('utf8'), file);
}

export function parseJsonFile(text: string, file: string): JsonFile {
  const scan = new Scanner(text);
  const failure = scan.document();
  if (failure !== null)
    throw new JsonFileError(
      file,
      scan.lineAt(failure.at),
      failure.parses ? failure.reason : `is not valid JSON: ${failure.reason}`,
    );
  // The scanner skips a byte-order mark (Windows editors write one); JSON.parse does not.
  const value: unknown = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  return { file, value, lineOf: (path) => scan.lines.get(path.map(String).join('\u0000')) ?? 1 };
}

// Sticky: each matches at the scanner's offset only, without copying the rest of the text.
const LITERAL = /true|false|null|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;

/** Far deeper than a JWKS or a manifest goes (3 levels). */
const MAX_DEPTH = 64;

/** `parses`: JSON that JSON.parse takes, refused for what it would make of it. */
type Failure = { at: number; reason: string; parses?: true } | null;

class Scanner {
  private i = 0;
  readonly lines = new Map<string, number>();
  private readonly starts: number[] = [0];

  constructor(private readonly text: string) {
    for (let i = 0; i < text.length; i += 1) if (text.charCodeAt(i) === 10) this.starts.push(i + 1);
  }

  lineAt(offset: number): number {
    let lo = 0;
    let hi = this.starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.starts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return lo + 1;
  }

  document(): Failure {
    if (this.text.charCodeAt(0) === 0xfeff) this.i = 1;
    const failure = this.value([]);
    if (failure) return failure;
    this.space();
    return this.i < this.text.length ? { at: this.i, reason: 'unexpected text after the value' } : null;
  }

  private space(): void {
    while (this.i < this.text.length && ' \t\r\n'.includes(this.text[this.i]!)) this.i += 1;
  }

  private value(path: string[]): Failure {
    this.space();
    this.lines.set(path.join('\u0000'), this.lineAt(this.i));
    const c = this.text[this.i];
    // The scanner recurses once per level: a deeper text would end in a RangeError that names no file.
    if ((c === '{' || c === '[') && path.length >= MAX_DEPTH)
      return { at: this.i, reason: `nests values more than ${MAX_DEPTH} deep`, parses: true };
    if (c === '{') return this.object(path);
    if (c === '[') return this.array(path);
    if (c === '"') return this.string();
    LITERAL.lastIndex = this.i;
    if (LITERAL.test(this.text)) {
      this.i = LITERAL.lastIndex;
      return null;
    }
    return {
      at: this.i,
      reason:
        c === undefined ? 'the text ends where a value is expected' : `a value was expected, not ${JSON.stringify(c)}`,
    };
  }

  private string(): Failure {
    STRING.lastIndex = this.i;
    if (!STRING.test(this.text))
      return { at: this.i, reason: 'a string is not closed, or holds a bad escape or a control character' };
    this.i = STRING.lastIndex;
    return null;
  }

  private object(path: string[]): Failure {
    this.i += 1;
    this.space();
    if (this.text[this.i] === '}') {
      this.i += 1;
      return null;
    }
    // JSON.parse keeps the last of two members of one name: the first, which a reader sees, would silently not count.
    const seen = new Map<string, number>();
    for (;;) {
      this.space();
      const start = this.i;
      if (this.text[this.i] !== '"')
        return { at: this.i, reason: 'a member name in double quotes was expected (no trailing comma)' };
      const failure = this.string();
      if (failure) return failure;
      const name = JSON.parse(this.text.slice(start, this.i)) as string;
      const first = seen.get(name);
      if (first !== undefined) {
        const shown = JSON.stringify(name.length > 128 ? `${name.slice(0, 128)}…` : name);
        return {
          at: start,
          reason: `repeats the member ${shown} (first at line ${first}): write it once`,
          parses: true,
        };
      }
      seen.set(name, this.lineAt(start));
      this.space();
      if (this.text[this.i] !== ':') return { at: this.i, reason: `":" was expected after ${JSON.stringify(name)}` };
      this.i += 1;
      const inner = this.value([...path, name]);
      if (inner) return inner;
      this.lines.set([...path, name].join('\u0000'), this.lineAt(start));
      this.space();
      if (this.text[this.i] === ',') {
        this.i += 1;
        continue;
      }
      if (this.text[this.i] === '}') {
        this.i += 1;
        return null;
      }
      return { at: this.i, reason: '"," or "}" was expected' };
    }
  }

  private array(path: string[]): Failure {
    this.i += 1;
    this.space();
    if (this.text[this.i] === ']') {
      this.i += 1;
      return null;
    }
    for (let n = 0; ; n += 1) {
      const inner = this.value([...path, String(n)]);
      if (inner) return inner;
      this.space();
      if (this.text[this.i] === ',') {
        this.i += 1;
        this.space();
        if (this.text[this.i] === ']')
          return { at: this.i, reason: 'a value was expected after "," (no trailing comma)' };
        continue;
      }
      if (this.text[this.i] === ']') {
        this.i += 1;
        return null;
      }
      return { at: this.i, reason: '"," or "]" was expected' };
    }
  }
}
