// Writes docs/configuration.md from the one declaration of the variables in src/config/index.ts.
// `npm run docs:config`; test/docs-config.test.ts fails when the document and the code differ.
import fs from 'node:fs';

import { ENV_VARS } from '../src/config/index.js';

export const CONFIGURATION_DOC = new URL('../docs/configuration.md', import.meta.url);

/** A default as the table shows it: a value in code font, or the words that say what unset means. */
export const shownDefault = (text: string): string => (text.startsWith('(') ? text : `\`${text}\``);

/** One row of the table: name, default, whether a reload reads it again, meaning. */
export const configRow = (v: (typeof ENV_VARS)[number]): string =>
  `| \`${v.name}\` | ${shownDefault(v.default)} | ${v.reloadable ? 'yes' : 'no'} | ${v.description} |`;

export function configReference(): string {
  return [
    '# Configuration reference',
    '',
    '<!-- Generated from src/config/index.ts by `npm run docs:config`; test/docs-config.test.ts fails when it differs. -->',
    '',
    'Every environment variable the gateway reads. They are parsed and checked at start-up: a bad value stops the',
    'gateway with a message that names the variable. With no upstream configured, every upstream is served by the',
    'embedded sandbox; once one is real, each other upstream needs its address and token, or its name in',
    '`SANDBOX_UPSTREAMS`. A real address prints in the start-up line (`rfm=https://verify.example (default:',
    "VERIFICATION_API_URL, …)` when the rfm check takes the verification interface's address, where the spec lists it).",
    '',
    '**Reloaded**: *yes* means a reload (`SIGHUP` or `POST /admin/reload`) reads the file it names again, with every',
    'start-up check, all or nothing ([operations](operations.md#reloading-the-configuration),',
    '[decision 057](decisions/057-configuration-that-reloads.md)). Every other variable, like every value of the',
    'environment, changes only with a restart. Secrets (keys, tokens, credentials, `DATABASE_URL`) are never echoed in',
    'an error message.',
    '',
    '| Variable | Default | Reloaded | Meaning |',
    '|---|---|---|---|',
    ...ENV_VARS.map(configRow),
    '',
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  fs.writeFileSync(CONFIGURATION_DOC, configReference());
  process.stdout.write(`wrote docs/configuration.md (${ENV_VARS.length} variables)\n`);
}
