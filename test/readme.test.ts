import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ENV_VARS, PARSED_ENV_VARS } from '../src/config.js';
import { configTable } from '../scripts/config-table.js';

const readme = fs.readFileSync(new URL('../README.md', import.meta.url), 'utf8');

describe('README', () => {
  it('documents every environment variable the config parses, and no other', () => {
    expect(ENV_VARS.map((v) => v.name).sort()).toEqual([...PARSED_ENV_VARS].sort());
  });

  it('carries the configuration table generated from src/config.ts (run `npx tsx scripts/update-readme-config.ts`)', () => {
    const block = /<!-- config-table:start -->\n([\s\S]*?)<!-- config-table:end -->/.exec(readme);
    expect(block).not.toBeNull();
    expect(block![1]!.trim()).toBe(configTable());
  });

  it('starts with the two-command quick start', () => {
    expect(readme).toContain('npm install && npm start');
    expect(readme).toContain('npm test');
  });
});
