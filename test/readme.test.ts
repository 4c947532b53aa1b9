import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { PARSED_ENV_VARS } from '../src/config/index.js';

const root = path.resolve(import.meta.dirname, '..');
const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
/** README.md and the guides of docs/ (not the decisions: they keep the names of their day). */
const documents = [
  'README.md',
  ...fs
    .readdirSync(path.join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => path.join('docs', f)),
];

describe('README and the guides', () => {
  it('set only variables the config declares in their examples (NAME=value), so a renamed variable cannot linger there', () => {
    const declared = new Set(PARSED_ENV_VARS);
    const undeclared: string[] = [];
    let set = 0;
    for (const doc of documents) {
      const text = fs.readFileSync(path.join(root, doc), 'utf8');
      // `VAR=value` is the documents' way of writing the form itself, not a variable.
      const names = new Set(
        [...text.matchAll(/\b([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)=(\S*)/g)]
          .filter((m) => !m[2]!.startsWith('value'))
          .map((m) => m[1]!),
      );
      set += names.size;
      undeclared.push(...[...names].filter((name) => !declared.has(name)).map((name) => `${doc}: ${name}`));
    }
    expect(set).toBeGreaterThan(10);
    expect(undeclared).toEqual([]);
  });

  it('the README starts with the two-command quick start and stays short (300 lines at most)', () => {
    expect(readme).toContain('npm install && npm start');
    expect(readme).toContain('npm test');
    expect(readme.split('\n').length).toBeLessThanOrEqual(301);
  });

  it('the README points to every guide of docs/', () => {
    const guides = documents.filter((d) => d !== 'README.md');
    expect(guides.length).toBeGreaterThan(10);
    expect(guides.filter((g) => !readme.includes(`](${g})`))).toEqual([]);
  });
});
