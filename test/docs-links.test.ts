import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '..');

/** README.md, CHANGELOG.md, every Markdown file under docs/ and bench/'s own, as paths relative to the repository. */
function documents(base: string): string[] {
  const found = [
    'README.md',
    'CHANGELOG.md',
    path.join('bench', 'README.md'),
    path.join('bench', 'breakdown.md'),
  ].filter((f) => fs.existsSync(path.join(base, f)));
  const walk = (dir: string): void => {
    for (const entry of fs.readdirSync(path.join(base, dir), { withFileTypes: true })) {
      const rel = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(rel);
      else if (entry.name.endsWith('.md')) found.push(rel);
    }
  };
  if (fs.existsSync(path.join(base, 'docs'))) walk('docs');
  return found;
}

/** The text outside fenced code blocks, line by line (a `#` in a code block is no heading, a `[x](y)` no link). */
function proseLines(text: string): string[] {
  const lines: string[] = [];
  let fence: string | null = null;
  for (const line of text.split('\n')) {
    const m = /^\s*(`{3,}|~{3,})/.exec(line);
    if (m) {
      if (fence === null) fence = m[1]![0]!;
      else if (m[1]![0] === fence) fence = null;
      lines.push('');
      continue;
    }
    lines.push(fence === null ? line.replace(/`[^`]*`/g, (span) => ' '.repeat(span.length)) : '');
  }
  return lines;
}

/** GitHub's anchor for a heading (github-slugger): lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  const text = heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/[*`]/g, '');
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor a Markdown file offers: its headings' slugs (repeats numbered as GitHub does) and explicit ids. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fence: string | null = null;
  for (const line of text.split('\n')) {
    const f = /^\s*(`{3,}|~{3,})/.exec(line);
    if (f) {
      if (fence === null) fence = f[1]![0]!;
      else if (f[1]![0] === fence) fence = null;
      continue;
    }
    if (fence !== null) continue;
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (h) {
      const base = slug(h[1]!);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      out.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const m of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) out.add(m[1]!);
  }
  return out;
}

/** Every relative link of the documents under `base` that does not resolve: a missing file or an unknown anchor. */
function brokenLinks(base: string): string[] {
  const broken: string[] = [];
  const anchorCache = new Map<string, Set<string>>();
  const anchorsOf = (file: string) => {
    if (!anchorCache.has(file)) anchorCache.set(file, anchors(fs.readFileSync(file, 'utf8')));
    return anchorCache.get(file)!;
  };
  for (const doc of documents(base)) {
    const abs = path.join(base, doc);
    proseLines(fs.readFileSync(abs, 'utf8')).forEach((line, i) => {
      for (const m of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
        const target = m[1]!;
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:: not ours to check offline
        const [file, anchor] = target.split('#', 2) as [string, string | undefined];
        const where = `${doc}:${i + 1}: ${target}`;
        const resolved = file === '' ? abs : path.resolve(path.dirname(abs), decodeURIComponent(file));
        if (!fs.existsSync(resolved)) {
          broken.push(`${where} (no such file)`);
          continue;
        }
        if (anchor === undefined || anchor === '') continue;
        if (!resolved.endsWith('.md') || fs.statSync(resolved).isDirectory()) {
          broken.push(`${where} (an anchor into a file that is not Markdown)`);
          continue;
        }
        if (!anchorsOf(resolved).has(decodeURIComponent(anchor))) broken.push(`${where} (no heading with this anchor)`);
      }
    });
  }
  return broken;
}

describe('links in README.md, CHANGELOG.md, docs/ and bench/', () => {
  it('every relative link and anchor resolves: the file exists and the anchor is a heading of it', () => {
    const docs = documents(root);
    expect(docs).toContain('README.md');
    expect(docs).toContain(path.join('docs', 'configuration.md'));
    expect(brokenLinks(root)).toEqual([]);
  });

  it('the check can fail: a missing file, an unknown anchor and a heading of another file are found', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'docs-links-'));
    try {
      fs.mkdirSync(path.join(dir, 'docs'));
      fs.writeFileSync(
        path.join(dir, 'README.md'),
        [
          '# Title',
          '## Who approves: `MCP_MUTATIONS`',
          'Fine: [here](#who-approves-mcp_mutations), [guide](docs/guide.md#step-two), [site](https://example.com/x).',
          'Broken: [gone](docs/missing.md) and [typo](#who-approves)',
          '```',
          '[inside a code block](nowhere.md) is no link',
          '```',
        ].join('\n'),
      );
      fs.writeFileSync(
        path.join(dir, 'docs', 'guide.md'),
        '# Guide\n## Step two\n[back](../README.md#title), [wrong](../README.md#step-two)\n',
      );
      expect(brokenLinks(dir)).toEqual([
        'README.md:4: docs/missing.md (no such file)',
        'README.md:4: #who-approves (no heading with this anchor)',
        'docs/guide.md:3: ../README.md#step-two (no heading with this anchor)',
      ]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
