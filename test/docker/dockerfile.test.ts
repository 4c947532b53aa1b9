// Docker cannot run here, so the Dockerfile, .dockerignore and docker-compose.yml are read against the
// repository: what an operator's `docker build` would copy, run and start must all exist and fit together.
import fs from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { ENV_VARS } from '../../src/config/index.js';
import { SHUTDOWN } from '../../src/gateway/options.js';
import {
  argList,
  dockerignore,
  filesUnder,
  originOf,
  parseDockerfile,
  words,
  type Instruction,
  type Origin,
  type ParsedDockerfile,
  type Stage,
} from '../helpers/dockerfile.js';

const posix = path.posix;
const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => fs.readFileSync(path.join(ROOT, file), 'utf8');

interface PackageJson {
  scripts: Record<string, string>;
  dependencies?: Record<string, string>;
  engines?: { node?: string };
}
interface TsConfig {
  extends?: string;
  include?: string[];
  compilerOptions?: { outDir?: string; rootDir?: string };
}

const pkg = JSON.parse(read('package.json')) as PackageJson;
const isIgnored = dockerignore(read('.dockerignore'));
const exists = (contextPath: string) => fs.existsSync(path.join(ROOT, contextPath));
const isContextDir = (contextPath: string) =>
  exists(contextPath) && fs.statSync(path.join(ROOT, contextPath)).isDirectory();

/** The context files a wildcard COPY source matches (wildcards in its last segment only, as this repo needs). */
function expand(source: string): string[] {
  if (!/[*?[]/.test(source)) return [source];
  const dir = posix.dirname(source);
  const re = new RegExp(
    `^${posix
      .basename(source)
      .replace(/[.+^${}()|\\]/g, '\\$&')
      .replace(/\*/g, '[^/]*')
      .replace(/\?/g, '[^/]')}$`,
  );
  return exists(dir)
    ? fs
        .readdirSync(path.join(ROOT, dir))
        .filter((name) => re.test(name))
        .map((name) => posix.join(dir, name))
    : [];
}

const dockerfile: ParsedDockerfile = parseDockerfile(read('Dockerfile'), {
  // A source from another stage cannot be looked at: one with a file extension is taken for a file.
  isDir: (from, source) =>
    from === undefined ? isContextDir(source) : !/\.[A-Za-z0-9]+$/.test(posix.basename(source)),
  expand,
  inContext: (contextPath) => exists(contextPath) && !isIgnored(contextPath),
});
const stages = dockerfile.stages;
const runtime = stages.at(-1)!;

/** A position in the Dockerfile that orders commands, also two in one RUN (`a && b`). */
interface RunMatch {
  stage: Stage;
  instruction: Instruction;
  offset: number;
}
function runs(stage: Stage, pattern: RegExp): RunMatch[] {
  const global = new RegExp(pattern.source, pattern.flags.includes('g') ? pattern.flags : `${pattern.flags}g`);
  return stage.instructions
    .filter((i) => i.keyword === 'RUN')
    .flatMap((instruction) =>
      [...instruction.args.matchAll(global)].map((m) => ({ stage, instruction, offset: m.index })),
    );
}
const before = (a: RunMatch, b: RunMatch) =>
  a.instruction.index < b.instruction.index || (a.instruction.index === b.instruction.index && a.offset < b.offset);
const workdirAt = (stage: Stage, index: number) => stage.workdirAt[index]!;

const NPM_BUILD = /\bnpm run(?:\s+--?[\w-]+)*\s+build\b/;
const buildRuns = stages.flatMap((s) => runs(s, NPM_BUILD));
const buildStage = buildRuns[0]?.stage;
const PROD_ONLY = /--omit[= ]dev|--production\b|--only[= ]prod/;

/** The tsconfig a `tsc -p` names, with the ones it extends: [file, parsed] from the most derived. */
function tsconfigChain(file: string): [string, TsConfig][] {
  const config = JSON.parse(read(file)) as TsConfig;
  const parent = config.extends === undefined ? [] : tsconfigChain(posix.join(posix.dirname(file), config.extends));
  return [[file, config], ...parent];
}

/** `outDir/` + src/main.ts compiled, per tsconfig.build.json (the config `npm run build` passes to tsc). */
function builtEntryPoint(): string {
  const projectArg = /\btsc\b[^&|;]*?(?:-p|--project)\s+(\S+)/.exec(pkg.scripts['build'] ?? '')?.[1];
  expect(projectArg, 'npm run build compiles with `tsc -p <tsconfig>`').toBeDefined();
  const options = Object.assign(
    {},
    ...tsconfigChain(projectArg!)
      .reverse()
      .map(([, c]) => c.compilerOptions ?? {}),
  ) as NonNullable<TsConfig['compilerOptions']>;
  expect(options.outDir, `${projectArg} sets outDir`).toBeDefined();
  return posix.join(options.outDir!, posix.relative(options.rootDir ?? 'src', 'src/main.ts')).replace(/\.ts$/, '.js');
}

/**
 * The repository files an npm script (with its pre/post scripts) reads: paths it names, the tsconfig
 * chain and `include` of a `tsc -p`, and paths named as string literals in the scripts it runs with node.
 */
function inputsOfScript(name: string): string[] {
  const inputs = new Set<string>();
  for (const script of [`pre${name}`, name, `post${name}`]) {
    const text = pkg.scripts[script];
    if (text === undefined) continue;
    for (const word of words(text)) {
      const candidate = posix.normalize(word);
      if (candidate === '.' || !exists(candidate)) continue;
      inputs.add(candidate);
      if (/tsconfig[\w.-]*\.json$/.test(candidate)) {
        const chain = tsconfigChain(candidate);
        for (const [file] of chain) inputs.add(file);
        // `include` is not merged: the most derived config that sets it wins.
        const [includingFile, including] = chain.find(([, c]) => c.include !== undefined) ?? [
          candidate,
          { include: [] },
        ];
        for (const include of including.include ?? []) inputs.add(posix.join(posix.dirname(includingFile), include));
      }
      if (/\.(mjs|cjs|js)$/.test(candidate)) {
        for (const m of read(candidate).matchAll(/'([\w./-]+)'|"([\w./-]+)"/g)) {
          const literal = posix.normalize(m[1] ?? m[2]!);
          if (literal.includes('/') && exists(literal)) inputs.add(literal);
        }
      }
    }
  }
  return [...inputs];
}

/** What the image holds at `imagePath` must be `contextPath` from the build context, not ignored. */
function expectFromContext(origin: Origin, contextPath: string, where: string): void {
  const summary =
    origin.kind === 'context' ? origin : { kind: origin.kind, stage: origin.stage.name, path: origin.path };
  expect(summary, where).toEqual({ kind: 'context', path: contextPath });
  expect(exists(contextPath), `${contextPath} exists (${where})`).toBe(true);
  expect(isIgnored(contextPath), `${contextPath} is not excluded by .dockerignore (${where})`).toBe(false);
}

const ENV_NAMES = new Set(ENV_VARS.map((v) => v.name));
const envDefault = (name: string) => ENV_VARS.find((v) => v.name === name)?.default;

describe('Dockerfile, read against the repository', () => {
  it('is multi-stage: a stage that runs npm run build, and a different, last stage that runs the server', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(buildStage, 'a stage runs `npm run build`').toBeDefined();
    expect(buildStage).not.toBe(runtime);
    expect(runs(runtime, NPM_BUILD)).toEqual([]);
  });

  it('copies from the build context only paths that exist and that .dockerignore lets through', () => {
    const copies = stages.flatMap((s) =>
      s.instructions.filter((i) => (i.keyword === 'COPY' || i.keyword === 'ADD') && !/--from=/.test(i.args)),
    );
    expect(copies.length).toBeGreaterThan(0);
    for (const copy of copies) {
      const sources = argList(copy.args.replace(/^(\s*--\S+)+/, '')).slice(0, -1);
      for (const source of sources) {
        const matched = expand(source);
        expect(matched, `"${copy.keyword} ${copy.args}": ${source} matches something`).not.toEqual([]);
        for (const file of matched) {
          expect(exists(file), `"${copy.keyword} ${copy.args}": ${file} exists`).toBe(true);
          expect(isIgnored(file), `"${copy.keyword} ${copy.args}": ${file} is excluded by .dockerignore`).toBe(false);
          if (isContextDir(file)) {
            expect(
              filesUnder(ROOT, file).filter((f) => !isIgnored(f)),
              `"${copy.keyword} ${copy.args}": ${file}/ is not emptied by .dockerignore`,
            ).not.toEqual([]);
          }
        }
      }
    }
  });

  it('installs dependencies with package.json and package-lock.json copied in first', () => {
    const installs = stages.flatMap((s) => runs(s, /\bnpm (?:ci|install|i)\b/));
    expect(installs.length).toBeGreaterThan(0);
    for (const { stage, instruction } of installs) {
      const workdir = workdirAt(stage, instruction.index);
      for (const file of ['package.json', 'package-lock.json']) {
        expectFromContext(
          originOf(dockerfile, stage, posix.join(workdir, file), instruction.index),
          file,
          `before "RUN ${instruction.args}" in stage ${stage.name}`,
        );
      }
    }
  });

  it('runs only npm scripts that package.json defines, with every file they read copied in first', () => {
    const npmRuns = stages.flatMap((s) => runs(s, /\bnpm run(?:\s+--?[\w-]+)*\s+([\w:.-]+)/));
    expect(npmRuns.length).toBeGreaterThan(0);
    for (const { stage, instruction, offset } of npmRuns) {
      const script = /\bnpm run(?:\s+--?[\w-]+)*\s+([\w:.-]+)/.exec(instruction.args.slice(offset))![1]!;
      expect(pkg.scripts[script], `package.json defines "${script}" (RUN ${instruction.args})`).toBeDefined();
      const inputs = inputsOfScript(script);
      expect(inputs.length, `npm run ${script} reads files of the repository`).toBeGreaterThan(0);
      const workdir = workdirAt(stage, instruction.index);
      for (const input of inputs) {
        expectFromContext(
          originOf(dockerfile, stage, posix.join(workdir, input), instruction.index),
          input,
          `npm run ${script} reads ${input}`,
        );
      }
    }
  });

  it('starts, as npm start does, the file that npm run build compiles from src/main.ts, with the same node options', () => {
    const built = builtEntryPoint();
    const start = pkg.scripts['start']!.trim().split(/\s+/);
    expect(start[0]).toBe('node');
    expect(start.at(-1)).toBe(built);
    // V8's memory reducer off (docs/decisions/146), a young generation that does not shrink (docs/decisions/147); the
    // image starts the gateway with the options npm start gives node.
    const options = start.slice(1, -1);
    expect(options).toContain('--no-memory-reducer');
    expect(options).toContain('--min-semi-space-size=16');
    const cmd = runtime.instructions.filter((i) => i.keyword === 'CMD').at(-1);
    expect(cmd, 'the runtime stage has a CMD').toBeDefined();
    expect(
      runtime.instructions.some((i) => i.keyword === 'ENTRYPOINT'),
      'no ENTRYPOINT wraps the CMD',
    ).toBe(false);
    const [program, ...args] = argList(cmd!.args);
    expect(program).toBe('node');
    expect(args.slice(0, -1), 'the CMD gives node the options npm start gives it').toEqual(options);
    const file = args.at(-1);
    // Exec form: node is PID 1 and gets SIGTERM itself, which src/main.ts turns into a graceful drain.
    expect(cmd!.args.trim().startsWith('['), 'CMD is in exec form').toBe(true);
    const workdir = workdirAt(runtime, cmd!.index);
    const entry = posix.resolve(workdir, file!);
    expect(entry).toBe(posix.join(workdir, built));

    // The entry point is compiled in the build stage, from src/main.ts copied in before the build.
    const origin = originOf(dockerfile, runtime, entry);
    expect(origin.kind, `${entry} is built by a stage, not copied from the context`).toBe('made');
    const made = origin as Extract<Origin, { kind: 'made' }>;
    const build = buildRuns.find((r) => r.stage === made.stage);
    expect(build, `stage ${made.stage.name}, which holds ${made.path}, runs npm run build`).toBeDefined();
    const buildDir = workdirAt(made.stage, build!.instruction.index);
    expect(made.path).toBe(posix.join(buildDir, built));
    expectFromContext(
      originOf(dockerfile, made.stage, posix.join(buildDir, 'src/main.ts'), build!.instruction.index),
      'src/main.ts',
      'the build compiles src/main.ts',
    );
    expect(exists('src/main.ts')).toBe(true);
  });

  it('builds with dev dependencies installed, then runs with production dependencies only', () => {
    // The build needs TypeScript and esbuild, so its install must not leave out dev dependencies.
    const build = buildRuns[0]!;
    const install = runs(build.stage, /\bnpm (?:ci|install|i)\b[^&|;]*/).filter((r) => before(r, build));
    expect(install.length, 'the build stage installs dependencies before npm run build').toBeGreaterThan(0);
    for (const r of install) {
      const command = /\bnpm (?:ci|install|i)\b[^&|;]*/.exec(r.instruction.args.slice(r.offset))![0];
      expect(command, 'the build installs dev dependencies').not.toMatch(PROD_ONLY);
      expect(r.instruction.args.slice(0, r.offset), 'no NODE_ENV=production on the install command').not.toMatch(
        /NODE_ENV=production/,
      );
      const envBefore = build.stage.instructions
        .filter((i) => i.keyword === 'ENV' && i.index < r.instruction.index)
        .map((i) => i.args)
        .join(' ');
      expect(
        envBefore,
        'NODE_ENV=production (which drops dev dependencies) is not set before the build install',
      ).not.toMatch(/NODE_ENV[= ]"?production/);
    }

    // The runtime's node_modules: installed there without dev dependencies, or copied from a stage that pruned them after building.
    const workdir = runtime.workdirAt.at(-1)!;
    const origin = originOf(dockerfile, runtime, posix.join(workdir, 'node_modules'));
    expect(origin.kind, 'node_modules is not copied from the build context').toBe('made');
    const from = (origin as Extract<Origin, { kind: 'made' }>).stage;
    const installs = runs(from, /\bnpm (?:ci|install|i)\b[^&|;]*/);
    const prunes = runs(from, /\bnpm prune\b[^&|;]*/).filter((r) =>
      PROD_ONLY.test(/\bnpm prune\b[^&|;]*/.exec(r.instruction.args.slice(r.offset))![0]),
    );
    const lastInstall = installs.at(-1);
    expect(lastInstall, `stage ${from.name} installs the node_modules the runtime gets`).toBeDefined();
    const installedProdOnly = PROD_ONLY.test(
      /\bnpm (?:ci|install|i)\b[^&|;]*/.exec(lastInstall!.instruction.args.slice(lastInstall!.offset))![0],
    );
    const prunedAfterBuild = prunes.some(
      (p) => before(lastInstall!, p) && buildRuns.filter((b) => b.stage === from).every((b) => before(b, p)),
    );
    expect(
      installedProdOnly || prunedAfterBuild,
      `node_modules of stage ${from.name} hold production dependencies only`,
    ).toBe(true);
    // better-sqlite3 is compiled for the Node and libc of the stage that installed it.
    expect(from.image, `node_modules come from the same image the server runs on`).toBe(runtime.image);
  });

  it('puts what the server reads from its project root at run time beside package.json', () => {
    // src/config/paths.ts finds the project root by its package.json, then reads these folders under it.
    const paths = read('src/config/paths.ts');
    const underRoot = [...paths.matchAll(/path\.join\(PROJECT_ROOT,\s*([^)]+)\)/g)].map((m) =>
      posix.join(...[...m[1]!.matchAll(/'([^']+)'/g)].map((q) => q[1]!)),
    );
    expect(underRoot).toEqual(expect.arrayContaining(['schema', 'dist/graphiql']));
    const workdir = runtime.workdirAt.at(-1)!;
    expectFromContext(
      originOf(dockerfile, runtime, posix.join(workdir, 'package.json')),
      'package.json',
      'the runtime finds its root (and "type": "module") by package.json',
    );
    for (const entry of underRoot) {
      const origin = originOf(dockerfile, runtime, posix.join(workdir, entry));
      if (origin.kind === 'context') {
        expectFromContext(origin, entry, `the runtime reads ${entry}`);
      } else {
        const build = buildRuns.find((r) => r.stage === origin.stage);
        expect(build, `${entry} is made by npm run build in stage ${origin.stage.name}`).toBeDefined();
        expect(origin.path).toBe(posix.join(workdirAt(origin.stage, build!.instruction.index), entry));
        expect(origin.stage).not.toBe(runtime);
      }
    }
  });

  it('runs code that imports only production dependencies, the ones left after pruning', () => {
    // The files tsc compiles for dist/ (tsconfig.build.json's include minus its exclude).
    const [buildConfigFile] = tsconfigChain(
      /\btsc\b[^&|;]*?(?:-p|--project)\s+(\S+)/.exec(pkg.scripts['build'] ?? '')![1]!,
    )[0]!;
    const chain = tsconfigChain(buildConfigFile);
    const include = chain.find(([, c]) => c.include !== undefined)?.[1].include ?? [];
    const exclude = (JSON.parse(read(buildConfigFile)) as { exclude?: string[] }).exclude ?? [];
    const compiled = include
      .flatMap((dir) => filesUnder(ROOT, dir))
      .filter(
        (f) => /\.tsx?$/.test(f) && !f.endsWith('.d.ts') && !exclude.some((e) => f === e || f.startsWith(`${e}/`)),
      );
    expect(compiled).toContain('src/main.ts');

    const production = new Set(Object.keys(pkg.dependencies ?? {}));
    const imported = new Map<string, string>();
    for (const file of compiled) {
      const text = read(file);
      // `import type` is erased; any other import (also `import { type X }`) loads the module at run time.
      const specifiers = [
        ...text.matchAll(/^\s*(?:import|export)\s+(?!type\b)[^;]*?\bfrom\s+['"]([^'"]+)['"]/gm),
        ...text.matchAll(/^\s*import\s+['"]([^'"]+)['"]/gm),
        ...text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g),
      ].map((m) => m[1]!);
      for (const specifier of specifiers) {
        if (specifier.startsWith('.') || specifier.startsWith('node:') || builtinModules.includes(specifier)) continue;
        const name = specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]!;
        imported.set(name, file);
      }
    }
    expect(imported.has('graphql'), 'the scan finds the imports').toBe(true);
    for (const [name, file] of imported)
      expect(production.has(name), `${file} imports ${name}, which is not in "dependencies"`).toBe(true);
  });

  it('runs as a non-root user that exists in the image and owns DATA_DIR, which is a volume', () => {
    const user = runtime.instructions.filter((i) => i.keyword === 'USER').at(-1);
    expect(user, 'the runtime stage sets USER').toBeDefined();
    const cmd = runtime.instructions.filter((i) => i.keyword === 'CMD').at(-1)!;
    expect(user!.index).toBeLessThan(cmd.index);
    const name = user!.args.trim().split(':')[0]!;
    expect(['root', '0']).not.toContain(name);
    const createdHere = runs(runtime, new RegExp(`\\b(?:useradd|adduser)\\b[^&|;]*\\b${name}\\b`)).length > 0;
    expect(
      createdHere || (name === 'node' && /^node:/.test(runtime.image)),
      `user ${name} exists in ${runtime.image}`,
    ).toBe(true);

    const dataDir = runtime.env['DATA_DIR'];
    expect(dataDir, 'the runtime stage sets DATA_DIR').toBeDefined();
    expect(posix.isAbsolute(dataDir!)).toBe(true);
    const volumes = runtime.instructions.filter((i) => i.keyword === 'VOLUME').flatMap((i) => argList(i.args));
    expect(volumes).toContain(dataDir);
    // A new volume starts as a copy of the image's folder, so the folder must already belong to the user.
    const owned = runs(
      runtime,
      new RegExp(`\\bchown\\s+(?:-R\\s+)?${name}(?::\\S+)?\\s+(?:\\S+\\s+)*${dataDir!.replace(/\//g, '\\/')}(?:\\s|$)`),
    );
    expect(owned.length, `a RUN gives ${dataDir} to ${name}`).toBeGreaterThan(0);
  });

  it('checks /healthz on the port the server listens on, with a program the image has', () => {
    expect(read('src/server/health.ts')).toMatch(/path: '\/healthz'/);
    const healthchecks = runtime.instructions.filter((i) => i.keyword === 'HEALTHCHECK');
    expect(healthchecks.length).toBe(1);
    const command = /\bCMD\s+([\s\S]*)$/.exec(healthchecks[0]!.args)?.[1];
    expect(command, 'HEALTHCHECK runs a command').toBeDefined();
    expect(command).toMatch(/\/healthz\b/);

    const port = runtime.env['PORT'] ?? envDefault('PORT')!;
    expect(
      command!.includes('process.env.PORT') || command!.includes(`:${port}/healthz`),
      `the health check follows PORT (${port})`,
    ).toBe(true);
    const exposed = runtime.instructions
      .filter((i) => i.keyword === 'EXPOSE')
      .flatMap((i) => words(i.args).map((w) => w.split('/')[0]));
    expect(exposed).toContain(port);
    const host = runtime.env['HOST'] ?? envDefault('HOST')!;
    expect(['127.0.0.1', 'localhost', '::1'], 'the server listens beyond the container').not.toContain(host);

    // node:*-slim has no curl or wget.
    const program = argList(command!)[0] === 'CMD-SHELL' ? argList(command!)[1]!.split(/\s+/)[0] : argList(command!)[0];
    const installed = runs(runtime, new RegExp(`\\bapt-get install\\b[^&|;]*\\b${program}\\b`)).length > 0;
    expect(program === 'node' || installed, `${program} is in the runtime image`).toBe(true);
  });

  it('sets only environment variables the gateway reads', () => {
    for (const stage of stages.filter((s) => s !== buildStage)) {
      for (const name of Object.keys(stage.env)) {
        expect(ENV_NAMES.has(name), `ENV ${name} in stage ${stage.name} is a variable of src/config/index.ts`).toBe(
          true,
        );
      }
    }
  });

  it('builds from and runs on the same current Node LTS slim image', () => {
    const images = stages.map((s) => s.image);
    for (const image of images) expect(image, 'the base image is the official node image').toMatch(/^node:[\w.-]+$/);
    const tag = runtime.image.slice('node:'.length);
    expect(tag, 'a slim variant').toMatch(/(^|-)slim(-|$)/);
    // Pinned by major, not `lts`: CI runs the whole suite on the major this line names (.ci/test-on-node-lts).
    const major = /^(\d+)(?:\.\d+){0,2}(?:-|$)/.exec(tag)?.[1];
    expect(major, `node:${tag} names a Node major`).toBeDefined();
    expect(Number(major) % 2, `node ${major} is an LTS line (even major)`).toBe(0);
    const minMajor = Number(/(\d+)/.exec(pkg.engines?.node ?? '0')![1]);
    expect(Number(major), `node ${major} satisfies engines ${pkg.engines?.node}`).toBeGreaterThanOrEqual(minMajor);
    expect(read('Dockerfile'), 'the ARG line .ci/test-on-node-lts reads').toMatch(
      new RegExp(`^ARG NODE_IMAGE=node:${major}[.-]`, 'm'),
    );
    expect(buildStage!.image).toBe(runtime.image);
  });
});

describe('.dockerignore', () => {
  it('keeps host dependencies and builds, local data, test artifacts and git history out of the build context', () => {
    const dataDir = posix.normalize(envDefault('DATA_DIR')!);
    for (const entry of [
      'node_modules',
      'node_modules/better-sqlite3/build/Release/x.node',
      'dist/src/main.js',
      '.git',
      dataDir,
      `${dataDir}/gateway.sqlite`,
      'test-artifacts',
    ]) {
      expect(isIgnored(entry), `${entry} is excluded`).toBe(true);
    }
    for (const entry of ['package.json', 'src/main.ts', 'schema'])
      expect(isIgnored(entry), `${entry} is kept`).toBe(false);
  });
});

describe('docker-compose.yml', () => {
  const compose = read('docker-compose.yml');
  const lines = compose.split(/\r?\n/);

  /** The lines indented under `key:` (first occurrence at any depth), comments included. */
  function block(key: string): string[] {
    const start = lines.findIndex((l) => new RegExp(`^\\s*${key}:\\s*$`).test(l));
    if (start < 0) return [];
    const indent = /^\s*/.exec(lines[start]!)![0].length;
    const out: string[] = [];
    for (const line of lines.slice(start + 1)) {
      if (line.trim() !== '' && /^\s*/.exec(line)![0].length <= indent) break;
      out.push(line);
    }
    return out;
  }

  it('builds this Dockerfile, publishes its port and keeps DATA_DIR on a named volume', () => {
    const buildLine = lines.find((l) => /^\s*build:/.test(l));
    expect(buildLine, 'the service is built here').toBeDefined();
    const context =
      /build:\s*(\S+)/.exec(buildLine!)?.[1] ??
      block('build')
        .map((l) => /^\s*context:\s*(\S+)/.exec(l)?.[1])
        .find(Boolean);
    expect(context).toBe('.');

    const port = runtime.env['PORT'] ?? envDefault('PORT')!;
    const published = block('ports')
      .map((l) => /^\s*-\s*"?(?:[\d.]+:)?\d+:(\d+)"?\s*$/.exec(l)?.[1])
      .filter(Boolean);
    expect(published).toContain(port);

    const dataDir = runtime.env['DATA_DIR']!;
    const mounts = block('volumes')
      .map((l) => /^\s*-\s*"?([\w.-]+):([^:"\s]+)/.exec(l))
      .filter((m): m is RegExpExecArray => m !== null);
    const dataMount = mounts.find((m) => m[2] === dataDir);
    expect(dataMount, `a volume is mounted on ${dataDir}`).toBeDefined();
    // A named volume is declared at the top level; a bind mount (./x) would not be.
    const topLevelVolumes = compose.split(/^volumes:\s*$/m)[1] ?? '';
    expect(topLevelVolumes).toMatch(new RegExp(`^\\s+${dataMount![1]!.replace(/[.]/g, '\\.')}:`, 'm'));
  });

  it("gives the gateway's whole shutdown time before Docker kills it (Docker's default is 10 s)", () => {
    // `docker compose stop` / `down` sends SIGTERM, then SIGKILL after stop_grace_period: the gateway drains requests
    // for SHUTDOWN.drainMs and exits by SHUTDOWN.exitMs, so a shorter wait cuts requests and upstream calls mid-drain.
    const grace = lines.map((l) => /^\s*stop_grace_period:\s*"?([\dhms.]+)"?\s*$/.exec(l)?.[1]).find(Boolean);
    expect(grace, 'the service sets stop_grace_period').toBeDefined();
    const parts = [...grace!.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s)/g)];
    expect(parts.map((m) => m[0]).join(''), `stop_grace_period ${grace} is a duration`).toBe(grace);
    const unit = { h: 3_600_000, m: 60_000, s: 1_000, ms: 1 } as const;
    const graceMs = parts.reduce((sum, m) => sum + Number(m[1]) * unit[m[2] as keyof typeof unit], 0);
    expect(graceMs, `stop_grace_period ${grace}`).toBeGreaterThan(SHUTDOWN.exitMs);
    // The `docker run` the operations guide shows waits as long (`docker run`'s own default is 10 s too).
    const runs = [...read('docs/operations.md').matchAll(/`docker build[^`]*&& (docker run [^`]*)`/g)].map(
      (m) => m[1]!,
    );
    expect(runs.length, 'docs/operations.md shows a docker run').toBeGreaterThan(0);
    for (const run of runs) {
      const timeout = /--stop-timeout[ =](\d+)\b/.exec(run)?.[1];
      expect(timeout, `"${run}" sets --stop-timeout`).toBeDefined();
      expect(Number(timeout) * 1000, run).toBeGreaterThan(SHUTDOWN.exitMs);
    }
  });

  it('names only variables the gateway reads, in its settings and in its commented examples', () => {
    const names = block('environment')
      .map((l) => /^\s*#?\s*-?\s*([A-Z][A-Z0-9_]*)\s*[:=]/.exec(l)?.[1])
      .filter((n): n is string => n !== undefined);
    expect(names.length).toBeGreaterThan(0);
    for (const name of names) expect(ENV_NAMES.has(name), `${name} is a variable of src/config/index.ts`).toBe(true);
  });
});
