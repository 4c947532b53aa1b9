import fs from 'node:fs';
import { describe, expect, it } from 'vitest';

import { PARSED_ENV_VARS } from '../src/config/index.js';

const readme = fs.readFileSync(new URL('../README.md', import.meta.url), 'utf8');

describe('README', () => {
  it('sets only variables the config declares in its examples (NAME=value), so a renamed variable cannot linger there', () => {
    const declared = new Set(PARSED_ENV_VARS);
    // `VAR=value` is the README's way of writing the form itself, not a variable.
    const set = new Set(
      [...readme.matchAll(/\b([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)=(\S*)/g)]
        .filter((m) => !m[2]!.startsWith('value'))
        .map((m) => m[1]!),
    );
    expect(set.size).toBeGreaterThan(10);
    expect([...set].filter((name) => !declared.has(name))).toEqual([]);
  });

  it('starts with the two-command quick start', () => {
    expect(readme).toContain('npm install && npm start');
    expect(readme).toContain('npm test');
  });
});
