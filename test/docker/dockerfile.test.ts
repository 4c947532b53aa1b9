import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Docker cannot build here, so the Dockerfile is read against the repository: every file it copies and
 * every script it runs must exist, and the image must start what `npm start` starts.
 */
const root = path.resolve(import.meta.dirname, '../..');
const dockerfile = fs.readFileSync(path.join(root, 'Dockerfile'), 'utf8');
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
const ignored = fs
  .readFileSync(path.join(root, '.dockerignore'), 'utf8')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith('#'));

/** Instructions with continuation lines joined, comments dropped. */
const instructions = dockerfile
  .replace(/\\\n/g, ' ')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith('#'));
const stages = instructions.reduce<string[][]>((acc, line) => {
  if (/^FROM\s/i.test(line)) acc.push([]);
  acc.at(-1)?.push(line);
  return acc;
}, []);

describe('Dockerfile', () => {
  it('copies only files that exist in the build context and are not ignored', () => {
    const copies = instructions.filter((l) => /^COPY\s/i.test(l) && !/--from=/i.test(l));
    expect(copies.length).toBeGreaterThan(0);
    for (const copy of copies) {
      const parts = copy.split(/\s+/).slice(1).filter((p) => !p.startsWith('--'));
      for (const source of parts.slice(0, -1)) {
        expect(fs.existsSync(path.join(root, source)), `${source} (in "${copy}") exists`).toBe(true);
        expect(ignored.includes(source.replace(/\/$/, '')), `${source} is not in .dockerignore`).toBe(false);
      }
    }
  });

  it('runs only npm scripts that package.json defines', () => {
    const runs = [...dockerfile.matchAll(/npm run ([\w:-]+)/g)].map((m) => m[1]!);
    expect(runs).toContain('build');
    for (const script of runs) expect(pkg.scripts[script], `npm run ${script}`).toBeDefined();
  });

  it('starts the file that the build produces from src/main.ts, as npm start does', () => {
    const tsconfig = JSON.parse(fs.readFileSync(path.join(root, 'tsconfig.build.json'), 'utf8')) as { compilerOptions: { outDir: string; rootDir: string } };
    const built = path.join(tsconfig.compilerOptions.outDir, path.relative(tsconfig.compilerOptions.rootDir, 'src/main.ts')).replace(/\.ts$/, '.js');
    const cmd = instructions.find((l) => /^CMD\s/i.test(l))!;
    expect(cmd).toContain(built);
    expect(pkg.scripts.start).toContain(built);
    expect(fs.existsSync(path.join(root, 'src/main.ts'))).toBe(true);
  });

  it('builds with dev dependencies and runs with production ones only, as a non-root user', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const build = stages[0]!.join('\n');
    const runtime = stages.at(-1)!.join('\n');
    expect(build).toMatch(/npm ci(?![^\n]*--omit=dev)/);
    expect(build + runtime).toMatch(/npm prune --omit=dev|npm ci --omit=dev/);
    expect(runtime).toMatch(/^USER\s+(?!root\b)\S+/m);
    // what the runtime reads from the project root (src/paths.ts): schema/ and the built dist/
    expect(runtime).toMatch(/COPY --from=build\S* .*\/app\/dist/);
    expect(runtime).toMatch(/COPY --from=build\S* .*\/app\/schema/);
    expect(runtime).toMatch(/COPY --from=build\S* .*\/app\/node_modules/);
  });

  it('uses a Node LTS image, checks /healthz and keeps DATA_DIR on a volume', () => {
    expect(dockerfile).toMatch(/node:(lts|\d*[02468])(-[\w.-]+)?/);
    expect(instructions.find((l) => /^HEALTHCHECK\s/i.test(l))).toMatch(/\/healthz/);
    const dataDir = /DATA_DIR=(\S+)/.exec(dockerfile)?.[1];
    expect(dataDir).toBeDefined();
    expect(instructions.find((l) => /^VOLUME\s/i.test(l))).toContain(dataDir!);
  });

  it('has a compose file that builds this Dockerfile and keeps data on a volume', () => {
    const compose = fs.readFileSync(path.join(root, 'docker-compose.yml'), 'utf8');
    expect(compose).toMatch(/build:\s*\./);
    expect(compose).toMatch(/:\/data/);
  });
});
