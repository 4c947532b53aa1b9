import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { cruise, type IViolation } from 'dependency-cruiser';
import { describe, expect, it } from 'vitest';

const require = createRequire(import.meta.url);
const root = path.resolve(import.meta.dirname, '..');
const rules = require(path.join(root, '.dependency-cruiser.cjs')) as {
  forbidden: { name: string; comment: string }[];
  options: Record<string, unknown>;
};

/** Runs the project's dependency-cruiser rules over `src/` of `baseDir`; one line per violation, with the rule's reason. */
async function violations(baseDir: string): Promise<string[]> {
  const result = await cruise(['src'], {
    ...rules.options,
    baseDir,
    validate: true,
    ruleSet: { forbidden: rules.forbidden } as never,
    outputType: 'json',
  });
  const output =
    typeof result.output === 'string'
      ? (JSON.parse(result.output) as { summary: { violations: IViolation[] } })
      : result.output;
  return output.summary.violations.map((v) => {
    const why = rules.forbidden.find((r) => r.name === v.rule.name)?.comment ?? '';
    return `${v.rule.name}: ${v.from} -> ${v.to} (${why})`;
  });
}

describe('architecture (dependency-cruiser, rules in .dependency-cruiser.cjs)', () => {
  it('every import runs down: transport -> graphql -> domain -> upstream/events -> store, with no folder cycle', async () => {
    expect(await violations(root)).toEqual([]);
  });

  it('refuses a domain importing transport, the sandbox importing the gateway, the store importing a domain, MCP or a route reaching past the pipeline, execution calling up into a transport, the tracing SDK, the MCP SDK or the whole of undici loaded up front, and a folder cycle', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'arch-'));
    try {
      const write = (file: string, text: string) => {
        fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
        fs.writeFileSync(path.join(dir, file), text);
      };
      write('src/server/auth.ts', "import { service } from '../cloud/service.js';\nexport const auth = service;\n");
      write(
        'src/cloud/service.ts',
        "import { auth } from '../server/auth.js';\nexport const service = 1;\nexport const again = auth;\n",
      );
      write('src/sandbox/cloud.ts', "import { service } from '../cloud/service.js';\nexport const sim = service;\n");
      write('src/store/ledger.ts', "import { service } from '../cloud/service.js';\nexport const ledger = service;\n");
      write('src/execution/run.ts', 'export const run = 1;\n');
      write('src/server/mcp/tools.ts', "import { run } from '../../execution/run.js';\nexport const tool = run;\n");
      write('src/server/ws.ts', "import { run } from '../execution/run.js';\nexport const ws = run;\n");
      write('src/execution/shared.ts', "import { ws } from '../server/ws.js';\nexport const shared = ws;\n");
      write('src/telemetry/tracing-sdk.ts', 'export const sdk = 1;\n');
      write('src/telemetry/tracing.ts', "import { sdk } from './tracing-sdk.js';\nexport const tracing = sdk;\n");
      write(
        'src/upstream/http.ts',
        "import { W3CTraceContextPropagator } from '@opentelemetry/core';\nexport const p = W3CTraceContextPropagator;\n",
      );
      write(
        'src/server/mcp/server.ts',
        "import { Server } from '@modelcontextprotocol/server';\nexport const server = Server;\n",
      );
      write('src/server/mcp/sdk.ts', "export const load = () => import('@modelcontextprotocol/server');\n");
      write('src/auth/jwks-fetch.ts', "import { request } from 'undici';\nexport const fetchJwks = request;\n");
      write('src/sandbox/callbacks.ts', "export const send = () => import('undici');\n");
      const found = (await violations(dir)).map((v) => v.split(' (')[0]);
      expect(found).toEqual(
        expect.arrayContaining([
          'domain-not-to-transport: src/cloud/service.ts -> src/server/auth.ts',
          'sandbox-imports-nothing-of-the-gateway: src/sandbox/cloud.ts -> src/cloud/service.ts',
          'store-imports-no-domain: src/store/ledger.ts -> src/cloud/service.ts',
          'no-folder-cycles: src/cloud -> src/server',
          'mcp-through-the-pipeline: src/server/mcp/tools.ts -> src/execution/run.ts',
          'transports-through-the-pipeline: src/server/ws.ts -> src/execution/run.ts',
          'execution-not-to-transport: src/execution/shared.ts -> src/server/ws.ts',
          'tracing-sdk-by-dynamic-import: src/telemetry/tracing.ts -> src/telemetry/tracing-sdk.ts',
          expect.stringMatching(/^the-otel-sdk-on-demand: src\/upstream\/http\.ts -> .*@opentelemetry\/core/),
          expect.stringMatching(
            /^libraries-on-demand: src\/server\/mcp\/server\.ts -> .*@modelcontextprotocol\/server/,
          ),
          expect.stringMatching(/^libraries-on-demand: src\/auth\/jwks-fetch\.ts -> (.*node_modules\/)?undici/),
        ]),
      );
      // The dynamic imports where they are used are not refused.
      expect(
        found.filter((v) => /^libraries-on-demand: src\/(server\/mcp\/sdk|sandbox\/callbacks)\.ts/.test(v!)),
      ).toEqual([]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('knip finds no unused file, export, class member or dependency, and no unlisted dependency (config in knip.jsonc)', async () => {
    const knip = path.join(root, 'node_modules', 'knip', 'bin', 'knip.js');
    // knip exits non-zero on any finding; the report is then the failure message.
    const run = await promisify(execFile)(process.execPath, [knip, '--no-progress', '--no-config-hints'], {
      cwd: root,
      env: { ...process.env, NO_COLOR: '1' },
    }).then(
      ({ stdout, stderr }) => ({ code: 0, report: stdout + stderr }),
      (err: { code?: number; stdout?: string; stderr?: string }) => ({
        code: err.code ?? -1,
        report: `${err.stdout ?? ''}${err.stderr ?? ''}`,
      }),
    );
    expect(run.report.trim()).toBe('');
    expect(run.code).toBe(0);
  }, 180_000);

  it('no comment in src/, test/, bench/ or scripts/ names an issue number: comments say why and cite docs/decisions', () => {
    const files = ['src', 'test', 'bench', 'scripts'].flatMap((dir) =>
      (fs.readdirSync(path.join(root, dir), { recursive: true }) as string[])
        .filter((f) => /\.(ts|tsx|mjs)$/.test(f))
        .map((f) => path.join(dir, f)),
    );
    expect(files.length).toBeGreaterThan(100);
    const naming = files.flatMap((file) =>
      fs
        .readFileSync(path.join(root, file), 'utf8')
        .split('\n')
        .flatMap((line, i) =>
          /\b[Ii]ssue #?\d+|\b[Ii]ssues #?\d+(,| and)/.test(line) ? [`${file}:${i + 1}: ${line.trim()}`] : [],
        ),
    );
    expect(naming).toEqual([]);
  });

  it('the architecture guide (docs/architecture.md) names only files and folders that exist', () => {
    const section = fs.readFileSync(path.join(root, 'docs', 'architecture.md'), 'utf8');
    const named = [...new Set(section.match(/\bsrc\/[\w./-]*\w/g) ?? [])];
    expect(named.length).toBeGreaterThan(20);
    expect(named.filter((p) => !fs.existsSync(path.join(root, p)))).toEqual([]);
  });
});
