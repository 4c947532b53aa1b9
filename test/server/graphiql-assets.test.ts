import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  acceptsGzip,
  createGraphiqlHandler,
  GRAPHIQL_ASSETS_PATH,
  prefersHtml,
  type GraphiqlHandler,
  type GraphiqlPageConfig,
} from '../../src/server/graphiql.js';

const ROOT = resolve(import.meta.dirname, '../..');

const CONFIG: GraphiqlPageConfig = {
  sandbox: true,
  apiKeyRequired: true,
  defaultQuery: '{ catalog { platforms } }',
  examples: [
    {
      title: 'Create a project',
      query: 'mutation CreateProject($input: CreateProjectInput!) { createProject(input: $input) { replayed } }',
      variables: '{"input": {}}',
    },
    // A hostile title: it must neither end the config's <script> element nor open a comment.
    {
      title: '</script><script>alert(1)</script><!-- & \u2028',
      query: 'subscription Events { provisioningProgress(id: "x") { id } }',
    },
  ],
};

interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** A raw HTTP request: no automatic decompression, and the path is sent exactly as given. */
function send(
  port: number,
  path: string,
  options: { method?: string; headers?: Record<string, string> } = {},
): Promise<RawResponse> {
  return new Promise((resolvePromise, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, method: options.method ?? 'GET', headers: options.headers ?? {} },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolvePromise({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

const BROWSER_ACCEPT =
  'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8';

function startServer(handler: GraphiqlHandler): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    // This router resolves dot segments before it routes (WHATWG URL), and hands the asset handler the path it read.
    const { pathname, search } = new URL(req.url ?? '/', 'http://localhost');
    if (handler.serveAsset(req, res, { path: pathname, search })) return;
    if (pathname === '/graphql' && (req.method === 'GET' || req.method === 'HEAD') && prefersHtml(req.headers.accept)) {
      void handler.servePage(req, res);
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('router: not found');
  });
  return new Promise((resolvePromise) => {
    server.listen(0, '127.0.0.1', () => resolvePromise({ server, port: (server.address() as AddressInfo).port }));
  });
}

function stopServer(server: Server): Promise<void> {
  return new Promise((resolvePromise) => server.close(() => resolvePromise()));
}

async function buildBundle(outdir: string): Promise<void> {
  await promisify(execFile)(process.execPath, [join(ROOT, 'scripts/build-graphiql.mjs'), '--outdir', outdir], {
    cwd: ROOT,
  });
}

/** The inline config script of the page, as the browser sees it. */
function configScriptOf(html: string): string {
  const match = /<script>(window\.__GATEWAY__ = [^<]*)<\/script>/.exec(html);
  if (match?.[1] === undefined) throw new Error(`no config script in page:\n${html}`);
  return match[1];
}

describe('self-hosted GraphiQL', () => {
  let baseDir: string;
  let assetsDir: string;
  let version: string;
  let server: Server;
  let port: number;

  beforeAll(async () => {
    // A private build, so this test neither depends on nor races with `npm run build`.
    baseDir = await mkdtemp(join(tmpdir(), 'graphiql-assets-'));
    assetsDir = join(baseDir, 'assets');
    await buildBundle(assetsDir);
    // A file with a servable extension just outside the assets directory: traversal must not reach it.
    await writeFile(join(baseDir, 'secret.js'), 'SECRET');
    version = (JSON.parse(await readFile(join(assetsDir, 'manifest.json'), 'utf8')) as { version: string }).version;
    ({ server, port } = await startServer(createGraphiqlHandler({ assetsDir, config: CONFIG })));
  }, 120_000);

  afterAll(async () => {
    if (server) await stopServer(server);
    if (baseDir) await rm(baseDir, { recursive: true, force: true });
  });

  it('serves a browser the GraphiQL page that loads only same-origin bundled assets', async () => {
    const res = await send(port, '/graphql', { headers: { accept: BROWSER_ACCEPT } });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    const html = res.body.toString('utf8');
    expect(html).toContain(`<script type="module" src="${GRAPHIQL_ASSETS_PATH}graphiql.js?v=${version}"></script>`);
    expect(html).toContain(`<link rel="stylesheet" href="${GRAPHIQL_ASSETS_PATH}graphiql.css?v=${version}">`);
    const references = [...html.matchAll(/(?:src|href)="([^"]*)"/g)].map((m) => m[1]);
    expect(references.length).toBeGreaterThanOrEqual(2);
    for (const reference of references) expect(reference).toMatch(/^(\/|data:)/);
    const csp = String(res.headers['content-security-policy']);
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("connect-src 'self'");
  });

  it('embeds the config so that hostile text cannot break out of its script element', async () => {
    const html = (await send(port, '/graphql', { headers: { accept: BROWSER_ACCEPT } })).body.toString('utf8');
    expect(html).not.toContain('<script>alert(1)');
    expect(html).not.toContain('<!-- &');
    const script = configScriptOf(html);
    // The browser evaluates this; the same JSON comes back intact.
    const parsed: unknown = JSON.parse(script.replace(/^window\.__GATEWAY__ = /, '').replace(/;$/, ''));
    expect(parsed).toEqual(CONFIG);
    // The CSP allows exactly this inline script, or the browser would refuse to run it.
    const hash = createHash('sha256').update(script).digest('base64');
    const res = await send(port, '/graphql', { headers: { accept: BROWSER_ACCEPT } });
    expect(String(res.headers['content-security-policy'])).toContain(`'sha256-${hash}'`);
  });

  it('serves the page, the Monaco workers, the font and source maps with their content types', async () => {
    const expected: Array<[string, string]> = [
      ['graphiql.js', 'text/javascript; charset=utf-8'],
      ['graphiql.css', 'text/css; charset=utf-8'],
      ['editor.worker.js', 'text/javascript; charset=utf-8'],
      ['json.worker.js', 'text/javascript; charset=utf-8'],
      ['graphql.worker.js', 'text/javascript; charset=utf-8'],
      ['codicon.ttf', 'font/ttf'],
      ['graphiql.js.map', 'application/json; charset=utf-8'],
    ];
    for (const [name, contentType] of expected) {
      const res = await send(port, `${GRAPHIQL_ASSETS_PATH}${name}?v=${version}`);
      expect(res.status, name).toBe(200);
      expect(res.headers['content-type'], name).toBe(contentType);
      expect(res.body.equals(await readFile(join(assetsDir, name))), name).toBe(true);
    }
  });

  it('the stylesheet refers to the font next to it, so the font is served too', async () => {
    const css = await readFile(join(assetsDir, 'graphiql.css'), 'utf8');
    expect(css).toMatch(/url\("?\.\/codicon\.ttf"?\)/);
  });

  it('lets browsers cache versioned assets as immutable and revalidate anything else', async () => {
    const versioned = await send(port, `${GRAPHIQL_ASSETS_PATH}graphiql.js?v=${version}`);
    expect(versioned.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    const stale = await send(port, `${GRAPHIQL_ASSETS_PATH}graphiql.js?v=0000000000000000`);
    expect(stale.headers['cache-control']).toBe('no-cache');
    const font = await send(port, `${GRAPHIQL_ASSETS_PATH}codicon.ttf`);
    expect(font.headers['cache-control']).toBe('no-cache');
    const etag = String(font.headers.etag);
    const revalidated = await send(port, `${GRAPHIQL_ASSETS_PATH}codicon.ttf`, { headers: { 'if-none-match': etag } });
    expect(revalidated.status).toBe(304);
    expect(revalidated.body.length).toBe(0);
    const page = await send(port, '/graphql', { headers: { accept: BROWSER_ACCEPT } });
    expect(page.headers['cache-control']).toBe('no-cache');
  });

  it('sends gzip to browsers that accept it and plain bytes to those that do not', async () => {
    const plain = await readFile(join(assetsDir, 'graphiql.js'));
    const gzipped = await send(port, `${GRAPHIQL_ASSETS_PATH}graphiql.js`, {
      headers: { 'accept-encoding': 'gzip, deflate, br' },
    });
    expect(gzipped.headers['content-encoding']).toBe('gzip');
    expect(gzipped.headers.vary).toContain('Accept-Encoding');
    expect(gzipped.body.length).toBeLessThan(plain.length / 2);
    expect(gunzipSync(gzipped.body).equals(plain)).toBe(true);
    const identity = await send(port, `${GRAPHIQL_ASSETS_PATH}graphiql.js`, {
      headers: { 'accept-encoding': 'gzip;q=0, *' },
    });
    expect(identity.headers['content-encoding']).toBeUndefined();
    expect(identity.body.equals(plain)).toBe(true);
  });

  it('answers 404 to unknown files and to every attempt to leave the assets directory', async () => {
    const attempts = [
      'nope.js',
      'manifest.json',
      'graphiql.js.gz',
      '.hidden.js',
      '%2e%2e%2fsecret.js',
      '..%2fsecret.js',
      '..%2f..%2fassets%2fgraphiql.js',
      '..%5csecret.js',
      encodeURIComponent(join(baseDir, 'secret.js')),
      'sub%2fgraphiql.js',
      'graphiql.js%00.css',
      '%E0%A4%A',
      '',
    ];
    for (const attempt of attempts) {
      const res = await send(port, `${GRAPHIQL_ASSETS_PATH}${attempt}`);
      expect(res.status, attempt).toBe(404);
      // The same answer for each: nothing tells which names exist outside the directory.
      expect(JSON.parse(res.body.toString('utf8')), attempt).toEqual({
        error: 'not_found',
        error_description: 'no such asset',
      });
    }
    // Dot segments are resolved before routing, so they never reach the asset handler.
    const dotted = await send(port, `${GRAPHIQL_ASSETS_PATH}../secret.js`);
    expect(dotted.status).toBe(404);
    expect(dotted.body.toString('utf8')).toBe('router: not found');
  });

  it('refuses to write to an asset', async () => {
    const res = await send(port, `${GRAPHIQL_ASSETS_PATH}graphiql.js`, { method: 'POST' });
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('GET, HEAD');
  });

  it('rebuilding gives the same files and the same version', async () => {
    const before = (await readdir(assetsDir)).sort();
    await buildBundle(assetsDir);
    expect((await readdir(assetsDir)).sort()).toEqual(before);
    const manifest = JSON.parse(await readFile(join(assetsDir, 'manifest.json'), 'utf8')) as { version: string };
    expect(manifest.version).toBe(version);
  }, 60_000);
});

describe('GraphiQL without a built bundle', () => {
  it("answers 503 telling the operator to run npm run build, without the server's directory", async () => {
    const emptyDir = await mkdtemp(join(tmpdir(), 'graphiql-unbuilt-'));
    const { server, port } = await startServer(createGraphiqlHandler({ assetsDir: emptyDir, config: CONFIG }));
    try {
      const res = await send(port, '/graphql', { headers: { accept: BROWSER_ACCEPT } });
      expect(res.status).toBe(503);
      expect(res.body.toString('utf8')).toContain('npm run build');
      // A browser is not told where the server is installed.
      expect(res.body.toString('utf8')).not.toContain(emptyDir);
      expect(res.body.toString('utf8')).not.toContain(tmpdir());
      expect((await send(port, `${GRAPHIQL_ASSETS_PATH}graphiql.js`)).status).toBe(404);
    } finally {
      await stopServer(server);
      await rm(emptyDir, { recursive: true, force: true });
    }
  });
});

describe('prefersHtml', () => {
  it.each([
    ['Chrome', BROWSER_ACCEPT],
    ['Firefox', 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8'],
    ['Safari', 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8'],
    ['html only', 'text/html'],
    ['html over json by weight', 'application/json;q=0.5, text/html'],
    ['any text', 'text/*'],
  ])('sends GraphiQL to %s', (_name, accept) => {
    expect(prefersHtml(accept)).toBe(true);
  });

  it.each([
    ['no Accept header', undefined],
    ['an empty Accept header', ''],
    ['curl (*/*)', '*/*'],
    ['application/json', 'application/json'],
    ['GraphQL over HTTP clients', 'application/graphql-response+json, application/json;q=0.9'],
    ['json ranked above html', 'text/html;q=0.5, application/json'],
    ['a tie between html and json', 'text/html, application/json'],
    ['html refused', 'text/html;q=0, */*'],
    ['garbage', 'not a media type'],
  ])('sends a GraphQL response to %s', (_name, accept) => {
    expect(prefersHtml(accept)).toBe(false);
  });
});

describe('acceptsGzip', () => {
  it.each([
    ['gzip, deflate, br', true],
    ['br;q=1.0, gzip;q=0.8, *;q=0.1', true],
    ['*', true],
    ['gzip;q=0', false],
    ['gzip;q=0, *', false],
    ['identity', false],
    [undefined, false],
  ])('%s -> %s', (header, expected) => {
    expect(acceptsGzip(header)).toBe(expected);
  });
});
