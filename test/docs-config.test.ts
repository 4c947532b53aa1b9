import fs from 'node:fs';
import { describe, expect, it } from 'vitest';

import { configReference, configRow, CONFIGURATION_DOC, shownDefault } from '../scripts/config-reference.js';
import { ENV_VARS } from '../src/config/index.js';

const doc = fs.readFileSync(CONFIGURATION_DOC, 'utf8');

/** The table's rows by variable name: default, reloaded, meaning, as the document writes them. */
function rows(text: string): Map<string, { shown: string; reloaded: string; meaning: string }> {
  const table = new Map<string, { shown: string; reloaded: string; meaning: string }>();
  for (const line of text.split('\n')) {
    const m = /^\| `([A-Z][A-Z0-9_]*)` \| (.*?) \| (yes|no) \| (.*) \|$/.exec(line);
    if (m) table.set(m[1]!, { shown: m[2]!, reloaded: m[3]!, meaning: m[4]! });
  }
  return table;
}

describe('docs/configuration.md, generated from src/config/index.ts (`npm run docs:config`)', () => {
  it('is exactly what the generator writes from the one declaration of the variables', () => {
    expect(doc).toBe(configReference());
  });

  it('has one row per variable, with its name, default, reloadability and description as the code declares them', () => {
    const table = rows(doc);
    expect([...table.keys()]).toEqual(ENV_VARS.map((v) => v.name));
    for (const v of ENV_VARS) {
      expect(table.get(v.name), v.name).toEqual({
        shown: shownDefault(v.default),
        reloaded: v.reloadable ? 'yes' : 'no',
        meaning: v.description,
      });
    }
  });

  it('marks as reloadable exactly the files a reload reads again (docs/decisions/057)', () => {
    expect(ENV_VARS.filter((v) => v.reloadable).map((v) => v.name)).toEqual([
      'MOBILEID_JWKS_FILE',
      'GATEWAY_APPS_FILE',
      'AUTH_JWKS_FILE',
      'AUTH_ISSUERS',
      'TRUSTED_DOCUMENTS_MANIFEST',
    ]);
  });

  it('the check can fail: a changed default, description or reloadability is a difference', () => {
    const port = ENV_VARS.find((v) => v.name === 'PORT')!;
    for (const changed of [
      { ...port, default: '4001' },
      { ...port, description: `${port.description} (edited by hand)` },
      { ...port, reloadable: !port.reloadable },
    ]) {
      const edited = doc.replace(configRow(port), configRow(changed));
      expect(edited).not.toBe(doc);
      expect(edited).not.toBe(configReference());
      expect(rows(edited).get('PORT')).not.toEqual(rows(doc).get('PORT'));
    }
  });
});
