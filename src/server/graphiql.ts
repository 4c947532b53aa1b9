// Self-hosted GraphiQL (docs/contract.md, Routes: a browser GET /graphql gets GraphiQL,
// and it must work with no internet). The bundle comes from scripts/build-graphiql.mjs.
import { createHash } from 'node:crypto';
import { createReadStream, type Stats } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, join } from 'node:path';

import { GRAPHIQL_ASSETS_DIR } from '../config/paths.js';
import { WebhookErrorCode } from '../errors.js';
import { sendOAuthError } from './respond.js';

/** One saved operation, opened as its own GraphiQL tab. */
export interface GraphiqlExample {
  title: string;
  query: string;
  /** JSON text for the variables editor. */
  variables?: string;
}

/** What the page learns from the server, as `window.__GATEWAY__`. */
export interface GraphiqlPageConfig {
  /** Every upstream is served by the embedded sandbox. */
  sandbox: boolean;
  /** Requests need `Authorization: Bearer <key>`; the page opens the header editor with a template. */
  apiKeyRequired: boolean;
  /** The query of the tab GraphiQL opens when there are no examples. */
  defaultQuery: string;
  examples: GraphiqlExample[];
}

export interface GraphiqlHandlerOptions {
  /** Directory holding the built bundle; `defaultGraphiqlAssetsDir()` finds `dist/graphiql`. */
  assetsDir: string;
  config: GraphiqlPageConfig;
  /** URL path under which assets are served, with trailing slash. Default `GRAPHIQL_ASSETS_PATH`. */
  assetsPath?: string;
}

export interface GraphiqlHandler {
  /** Answers a GET or HEAD with the GraphiQL page, or 503 when the bundle has not been built. */
  servePage(req: IncomingMessage, res: ServerResponse): Promise<void>;
  /**
   * Answers a request whose path is under `assetsPath` (404 for unknown files, 405 for methods other than GET/HEAD)
   * and returns the answer's promise, which rejects with what failed unexpectedly (the caller's route logs it with the
   * request id and answers 500); returns false, sending nothing, for any other path. `target`: the request target's
   * path and query, as the router read them (src/server/http.ts requestTarget).
   */
  serveAsset(
    req: IncomingMessage,
    res: ServerResponse,
    target: { readonly path: string; readonly search: string },
  ): Promise<void> | false;
  readonly assetsPath: string;
}

export const GRAPHIQL_ASSETS_PATH = '/graphql/assets/';

/** The manifest scripts/build-graphiql.mjs writes last; its absence means "not built". */
const MANIFEST = 'manifest.json';

const CONTENT_TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.ttf': 'font/ttf',
  '.woff2': 'font/woff2',
};

/** Plain file names only: no separators, no dot files, so no way out of assetsDir. */
const ASSET_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)+$/;

const IMMUTABLE = 'public, max-age=31536000, immutable';

/** `dist/graphiql` beside the package.json of this checkout, from `src/server` (tsx) or `dist/src/server` (built). */
export function defaultGraphiqlAssetsDir(): string {
  return GRAPHIQL_ASSETS_DIR;
}

interface MediaRange {
  type: string;
  subtype: string;
  q: number;
}

function parseAccept(accept: string): MediaRange[] {
  const ranges: MediaRange[] = [];
  for (const part of accept.split(',')) {
    const [mediaType = '', ...params] = part.split(';');
    const [type, subtype] = mediaType.trim().toLowerCase().split('/');
    if (!type || !subtype) continue;
    let q = 1;
    for (const param of params) {
      const [name, value] = param.split('=').map((s) => s.trim());
      if (name?.toLowerCase() === 'q' && value !== undefined) {
        const parsed = Number(value);
        q = Number.isFinite(parsed) ? Math.min(Math.max(parsed, 0), 1) : 0;
      }
    }
    ranges.push({ type, subtype, q });
  }
  return ranges;
}

/** The quality the Accept ranges give a media type: the most specific matching range wins (RFC 9110 §12.5.1). */
function qualityOf(ranges: MediaRange[], mediaType: string): number {
  const [type, subtype] = mediaType.split('/');
  let best: { specificity: number; q: number } = { specificity: -1, q: 0 };
  for (const range of ranges) {
    const specificity =
      range.type === type && range.subtype === subtype
        ? 2
        : range.type === type && range.subtype === '*'
          ? 1
          : range.type === '*' && range.subtype === '*'
            ? 0
            : -1;
    if (specificity > best.specificity) best = { specificity, q: range.q };
  }
  return best.q;
}

/**
 * Whether a GET to /graphql should get GraphiQL rather than a GraphQL response: only when
 * the client ranks text/html strictly above both GraphQL response types. A tie (`*\/*`,
 * no Accept) goes to GraphQL over HTTP, so curl and API clients are never sent a page.
 */
export function prefersHtml(acceptHeader: string | string[] | undefined): boolean {
  const accept = Array.isArray(acceptHeader) ? acceptHeader.join(',') : acceptHeader;
  if (accept === undefined || accept.trim() === '') return false;
  const ranges = parseAccept(accept);
  const html = qualityOf(ranges, 'text/html');
  const graphql = Math.max(
    qualityOf(ranges, 'application/json'),
    qualityOf(ranges, 'application/graphql-response+json'),
  );
  return html > 0 && html > graphql;
}

/** JSON that is safe inside a <script> element: no `</script>`, `<!--` or HTML-significant characters. */
export function scriptSafeJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

function escapeAttribute(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function renderPage(config: GraphiqlPageConfig, assetsPath: string, version: string): { html: string; csp: string } {
  const configScript = `window.__GATEWAY__ = ${scriptSafeJson(config)};`;
  const configHash = createHash('sha256').update(configScript).digest('base64');
  const asset = (name: string) => escapeAttribute(`${assetsPath}${name}?v=${encodeURIComponent(version)}`);
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>GraphiQL · Gateway</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${asset('graphiql.css')}">
<style>html, body, #graphiql { height: 100%; margin: 0; } .gateway-sandbox-badge { color: var(--color-warning, #d08770); } .gateway-credential { display: inline-flex; gap: 0.5em; align-items: center; margin-left: 1em; font-size: 0.8em; font-weight: normal; } .gateway-credential input { width: 16em; font: inherit; padding: 0.2em 0.4em; }</style>
</head>
<body>
<div id="graphiql">Loading GraphiQL…</div>
<script>${configScript}</script>
<script type="module" src="${asset('graphiql.js')}"></script>
</body>
</html>
`;
  // Everything the page loads comes from this origin; the CSP makes that a browser-enforced fact.
  // Monaco sets inline styles, so styles need 'unsafe-inline'; the config script is allowed by hash.
  const csp = [
    "default-src 'self'",
    `script-src 'self' 'sha256-${configHash}'`,
    "style-src 'self' 'unsafe-inline'",
    "font-src 'self' data:",
    "img-src 'self' data:",
    "worker-src 'self'",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'self'",
  ].join('; ');
  return { html, csp };
}

async function readVersion(assetsDir: string): Promise<string | undefined> {
  try {
    const manifest: unknown = JSON.parse(await readFile(join(assetsDir, MANIFEST), 'utf8'));
    const version = (manifest as { version?: unknown }).version;
    return typeof version === 'string' ? version : undefined;
  } catch {
    return undefined;
  }
}

async function fileInfo(file: string): Promise<Stats | undefined> {
  const info = await stat(file).catch(() => undefined);
  return info?.isFile() ? info : undefined;
}

/** Whether Accept-Encoding allows gzip: listed or covered by `*`, and not refused with `q=0`. */
export function acceptsGzip(acceptEncoding: string | string[] | undefined): boolean {
  const header = Array.isArray(acceptEncoding) ? acceptEncoding.join(',') : (acceptEncoding ?? '');
  let wildcard = false;
  for (const part of header.split(',')) {
    const [coding = '', ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    const q = params.find((param) => param.startsWith('q='));
    const allowed = q === undefined || Number(q.slice(2)) > 0;
    if (coding === 'gzip') return allowed;
    if (coding === '*') wildcard = allowed;
  }
  return wildcard;
}

function sendText(res: ServerResponse, status: number, text: string, head: boolean): void {
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'cache-control': 'no-store',
    'content-length': Buffer.byteLength(text),
  });
  res.end(head ? undefined : text);
}

export function createGraphiqlHandler(options: GraphiqlHandlerOptions): GraphiqlHandler {
  const { assetsDir, config } = options;
  const assetsPath = options.assetsPath ?? GRAPHIQL_ASSETS_PATH;
  if (!assetsPath.startsWith('/') || !assetsPath.endsWith('/')) {
    throw new Error(`GraphiQL: assetsPath must start and end with "/", got ${JSON.stringify(assetsPath)}`);
  }

  async function servePage(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const head = req.method === 'HEAD';
    const version = await readVersion(assetsDir);
    if (version === undefined) {
      sendText(
        res,
        503,
        // Not the directory's path: a browser is told what to do, not where the server is installed.
        `GraphiQL is not built: its ${MANIFEST} is missing. Run \`npm run build\` and restart.\n`,
        head,
      );
      return;
    }
    const { html, csp } = renderPage(config, assetsPath, version);
    res.writeHead(200, {
      'content-type': 'text/html; charset=utf-8',
      'content-length': Buffer.byteLength(html),
      'cache-control': 'no-cache',
      'content-security-policy': csp,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      // Opened from an agent's link (?approvePlan=): the page that opened it keeps no handle to send it elsewhere.
      'cross-origin-opener-policy': 'same-origin',
      // The same URL answers GraphQL for other Accept values.
      vary: 'Accept',
    });
    res.end(head ? undefined : html);
  }

  async function sendAsset(
    req: IncomingMessage,
    res: ServerResponse,
    name: string,
    requestedVersion: string | null,
  ): Promise<void> {
    const head = req.method === 'HEAD';
    const contentType = CONTENT_TYPES[extname(name)];
    const plain = join(assetsDir, name);
    const info = contentType === undefined ? undefined : await fileInfo(plain);
    if (contentType === undefined || info === undefined) {
      sendOAuthError(res, 404, WebhookErrorCode.NOT_FOUND, 'no such asset');
      return;
    }
    // The build writes a .gz beside each script and stylesheet (scripts/build-graphiql.mjs).
    const gzipInfo = acceptsGzip(req.headers['accept-encoding']) ? await fileInfo(`${plain}.gz`) : undefined;
    const [file, sent] = gzipInfo === undefined ? [plain, info] : [`${plain}.gz`, gzipInfo];
    const etag = `"${sent.size.toString(36)}-${Math.trunc(sent.mtimeMs).toString(36)}${gzipInfo === undefined ? '' : '-gz'}"`;
    // Names are stable across builds, so only a URL carrying the current build's version is immutable.
    const current = requestedVersion !== null && requestedVersion === (await readVersion(assetsDir));
    const headers: Record<string, string | number> = {
      'content-type': contentType,
      'cache-control': current ? IMMUTABLE : 'no-cache',
      etag,
      vary: 'Accept-Encoding',
      'x-content-type-options': 'nosniff',
    };
    if (gzipInfo !== undefined) headers['content-encoding'] = 'gzip';
    if (req.headers['if-none-match'] === etag) {
      res.writeHead(304, headers);
      res.end();
      return;
    }
    res.writeHead(200, { ...headers, 'content-length': sent.size });
    if (head) {
      res.end();
      return;
    }
    // A read that fails once the head is sent (the file cut or removed by a rebuild) rejects the answer: the route logs
    // it with the request id and ends the connection, so the client sees a cut answer, never a complete-looking one.
    const stream = createReadStream(file);
    await new Promise<void>((resolve, reject) => {
      stream.once('error', reject);
      res.once('finish', resolve);
      // The client gone: nothing more to read for it.
      res.once('close', () => {
        stream.destroy();
        resolve();
      });
      stream.pipe(res);
    });
  }

  // Refusals answer as every plain route does (docs/contract.md, Routes); Node leaves the body out for HEAD.
  function serveAsset(
    req: IncomingMessage,
    res: ServerResponse,
    target: { readonly path: string; readonly search: string },
  ): Promise<void> | false {
    if (!target.path.startsWith(assetsPath)) return false;
    const head = req.method === 'HEAD';
    if (req.method !== 'GET' && !head) {
      sendOAuthError(res, 405, WebhookErrorCode.METHOD_NOT_ALLOWED, `${req.method} is not allowed on an asset`, {
        allow: 'GET, HEAD',
      });
      return Promise.resolve();
    }
    let name: string;
    try {
      name = decodeURIComponent(target.path.slice(assetsPath.length));
    } catch {
      name = '';
    }
    if (!ASSET_NAME.test(name) || name === MANIFEST) {
      sendOAuthError(res, 404, WebhookErrorCode.NOT_FOUND, 'no such asset');
      return Promise.resolve();
    }
    return sendAsset(req, res, name, new URLSearchParams(target.search).get('v'));
  }

  return { servePage, serveAsset, assetsPath };
}
