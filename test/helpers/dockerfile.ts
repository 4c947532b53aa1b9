// Enough of the Dockerfile and .dockerignore formats to check a build without Docker: instructions per
// stage, ARG/ENV substitution, WORKDIR, and where each path of an image came from (the build context,
// another stage, or a RUN).
import fs from 'node:fs';
import path from 'node:path';

const posix = path.posix;

export interface Instruction {
  /** Upper-case keyword: FROM, RUN, COPY, ... */
  keyword: string;
  /** The rest of the instruction, continuation lines joined. */
  args: string;
  /** Index of the instruction in its stage. */
  index: number;
}

export interface CopyEntry {
  /** Absolute path in the image. */
  dest: string;
  /** `undefined`: the build context (source is relative to it); otherwise the stage name or index copied from. */
  from: string | undefined;
  source: string;
  /** The instruction's index in its stage. */
  index: number;
}

export interface Stage {
  name: string;
  image: string;
  instructions: Instruction[];
  /** WORKDIR in effect after each instruction (index → workdir). */
  workdirAt: string[];
  /** ENV in effect at the end of the stage (ARG defaults are not included). */
  env: Record<string, string>;
  copies: CopyEntry[];
}

export interface ParsedDockerfile {
  globalArgs: Record<string, string>;
  stages: Stage[];
  /** Whether the build context holds a path (it exists and .dockerignore lets it through). */
  inContext: (contextPath: string) => boolean;
}

/** `$VAR` and `${VAR}` (and `${VAR:-default}`) with the values given; unknown variables become empty. */
export function substitute(text: string, vars: Record<string, string>): string {
  return text.replace(
    /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
    (_m, braced: string | undefined, fallback: string | undefined, bare: string | undefined) => {
      const name = (braced ?? bare)!;
      return vars[name] ?? fallback ?? '';
    },
  );
}

/** Splits on whitespace, keeping quoted strings together and dropping their quotes. */
export function words(text: string): string[] {
  const out: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) out.push(m[1] ?? m[2] ?? m[3]!);
  return out;
}

/** `KEY=value KEY2="v 2"` or the legacy `KEY value`. */
export function parseKeyValues(args: string): Record<string, string> {
  const trimmed = args.trim();
  if (!/^[A-Za-z_][A-Za-z0-9_]*=/.test(trimmed)) {
    const [key, ...rest] = trimmed.split(/\s+/);
    return key ? { [key]: rest.join(' ') } : {};
  }
  const out: Record<string, string> = {};
  const re = /([A-Za-z_][A-Za-z0-9_]*)=(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S*))/g;
  for (let m = re.exec(trimmed); m !== null; m = re.exec(trimmed)) out[m[1]!] = m[2] ?? m[3] ?? m[4] ?? '';
  return out;
}

/** The words of an exec-form (`["a", "b"]`) or shell-form argument list. */
export function argList(args: string): string[] {
  const trimmed = args.trim();
  if (trimmed.startsWith('[')) {
    const parsed: unknown = JSON.parse(trimmed);
    if (!Array.isArray(parsed) || !parsed.every((a) => typeof a === 'string'))
      throw new Error(`not a JSON string array: ${trimmed}`);
    return parsed;
  }
  return words(trimmed);
}

/** Instructions in order: comment lines dropped (also inside continuations, as Docker does), `\` continuations joined. */
export function instructionsOf(text: string): { keyword: string; args: string }[] {
  const out: { keyword: string; args: string }[] = [];
  let pending = '';
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line.startsWith('#')) continue;
    if (line === '' && pending === '') continue;
    const continued = /\\$/.test(line);
    pending += (pending ? ' ' : '') + (continued ? line.slice(0, -1).trim() : line);
    if (continued) continue;
    const m = /^(\S+)\s*([\s\S]*)$/.exec(pending.trim());
    if (m) out.push({ keyword: m[1]!.toUpperCase(), args: m[2]! });
    pending = '';
  }
  if (pending.trim() !== '') throw new Error(`Dockerfile ends inside a continued line: ${pending}`);
  return out;
}

/** Whether a context-relative path is a directory of the build context (stage sources cannot be known; see isDir). */
type IsDir = (from: string | undefined, source: string) => boolean;

/** The context paths a COPY source names: itself, or the files its `*`, `?` or `[...]` wildcards match. */
type Expand = (source: string) => string[];

export function parseDockerfile(
  text: string,
  context: { isDir: IsDir; expand?: Expand; inContext?: (contextPath: string) => boolean },
): ParsedDockerfile {
  const { isDir, expand = (s: string) => [s], inContext = () => true } = context;
  const globalArgs: Record<string, string> = {};
  const stages: Stage[] = [];
  for (const { keyword, args } of instructionsOf(text)) {
    const stage = stages.at(-1);
    if (keyword === 'FROM') {
      const parts = words(args).filter((w) => !w.startsWith('--'));
      const image = substitute(parts[0] ?? '', globalArgs);
      const name = parts.length >= 3 && parts[1]!.toUpperCase() === 'AS' ? parts[2]! : String(stages.length);
      stages.push({ name, image, instructions: [{ keyword, args, index: 0 }], workdirAt: ['/'], env: {}, copies: [] });
      continue;
    }
    if (stage === undefined) {
      if (keyword === 'ARG') {
        const [key, value] = args.trim().split('=', 2);
        if (key) globalArgs[key] = value ?? '';
      }
      continue;
    }
    const index = stage.instructions.length;
    stage.instructions.push({ keyword, args, index });
    let workdir = stage.workdirAt[index - 1]!;
    const vars = { ...globalArgs, ...stage.env };
    if (keyword === 'WORKDIR') workdir = posix.resolve(workdir, substitute(args.trim(), vars));
    if (keyword === 'ENV') {
      for (const [key, value] of Object.entries(parseKeyValues(args))) stage.env[key] = substitute(value, vars);
    }
    if (keyword === 'COPY' || keyword === 'ADD') {
      const list = argList(args.replace(/^(\s*--\S+)+/, ''));
      const flags = words(args).filter((w) => w.startsWith('--'));
      const from = flags.find((f) => f.startsWith('--from='))?.slice('--from='.length);
      const sources = list
        .slice(0, -1)
        .flatMap((s) => (from === undefined ? expand(substitute(s, vars)) : [substitute(s, vars)]));
      const rawDest = substitute(list.at(-1) ?? '', vars);
      const dest = posix.resolve(workdir, rawDest);
      const intoDir = rawDest.endsWith('/') || rawDest === '.' || list.length > 2 || /[*?[]/.test(list[0] ?? '');
      for (const source of sources) {
        // A directory's contents land in dest; a file lands in dest, or under its own name in a dest directory.
        const target = intoDir && !isDir(from, source) ? posix.join(dest, posix.basename(source)) : dest;
        stage.copies.push({ dest: target, from, source, index });
      }
    }
    stage.workdirAt.push(workdir);
  }
  return { globalArgs, stages, inContext };
}

export function stageByName(parsed: ParsedDockerfile, name: string): Stage | undefined {
  return parsed.stages.find((s) => s.name === name) ?? parsed.stages[Number(name)];
}

export type Origin =
  | { kind: 'context'; path: string }
  /** Not copied into any stage: made by a RUN in `stage` (or present in its base image). */
  | { kind: 'made'; stage: Stage; path: string };

/**
 * Where `imagePath` of `stage` comes from, as the instructions before `before` (default: all) leave it:
 * the last COPY that covers it, followed back through other stages, or else a RUN of the stage itself.
 */
export function originOf(parsed: ParsedDockerfile, stage: Stage, imagePath: string, before = Infinity): Origin {
  const copies = stage.copies.filter((c) => c.index < before).reverse();
  for (const copy of copies) {
    if (imagePath !== copy.dest && !imagePath.startsWith(copy.dest + '/')) continue;
    const rest = imagePath.slice(copy.dest.length);
    if (copy.from === undefined) {
      const contextPath = posix.normalize(posix.join(copy.source, rest)).replace(/^\.(?:\/|$)/, '') || '.';
      // `COPY . .` covers every path, but brings only what the context holds.
      if (!parsed.inContext(contextPath)) continue;
      return { kind: 'context', path: contextPath };
    }
    const fromStage = stageByName(parsed, copy.from);
    if (fromStage === undefined) throw new Error(`COPY --from=${copy.from}: no such stage`);
    return originOf(parsed, fromStage, posix.resolve(fromStage.workdirAt.at(-1)!, copy.source + rest));
  }
  return { kind: 'made', stage, path: imagePath };
}

/** Converts one .dockerignore pattern (Go filepath.Match plus `**`) to a regular expression over slash paths. */
function patternRegExp(pattern: string): RegExp {
  let re = '';
  for (let i = 0; i < pattern.length; i += 1) {
    const c = pattern[i]!;
    if (c === '*' && pattern[i + 1] === '*') {
      const slashAfter = pattern[i + 2] === '/';
      re += slashAfter ? '(?:.*/)?' : '.*';
      i += slashAfter ? 2 : 1;
    } else if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const end = pattern.indexOf(']', i);
      re += end > i ? pattern.slice(i, end + 1).replace('[!', '[^') : '\\[';
      if (end > i) i = end;
    } else re += c.replace(/[.+^${}()|\\]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

/**
 * A .dockerignore as Docker applies it: a path is excluded when the last pattern matching it or one of
 * its parent directories is not a `!` exception.
 */
export function dockerignore(text: string): (contextPath: string) => boolean {
  const rules = text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const exception = l.startsWith('!');
      const cleaned = posix
        .normalize(exception ? l.slice(1).trim() : l)
        .replace(/^\/+/, '')
        .replace(/\/+$/, '');
      return { exception, re: patternRegExp(cleaned) };
    });
  return (contextPath) => {
    const parts = posix
      .normalize(contextPath)
      .replace(/^\.(?:\/|$)/, '')
      .split('/');
    const candidates = parts.map((_p, i) => parts.slice(0, i + 1).join('/'));
    let ignored = false;
    for (const rule of rules) if (candidates.some((c) => rule.re.test(c))) ignored = !rule.exception;
    return ignored;
  };
}

/** Files under `dir` (relative to `root`), recursively. */
export function filesUnder(root: string, dir: string): string[] {
  const full = path.join(root, dir);
  if (!fs.statSync(full).isDirectory()) return [dir];
  return fs.readdirSync(full).flatMap((name) => filesUnder(root, posix.join(dir, name)));
}
