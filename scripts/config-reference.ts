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
    'Every environment variable the gateway reads, for the operator who deploys it and the newcomer who tries it. They',
    'are parsed and checked at start-up: a bad value stops the gateway with a message that names the variable. With no',
    'upstream configured, every upstream is served by the embedded sandbox; once one is real, each other upstream needs',
    'its address and token, or its name in `SANDBOX_UPSTREAMS`. A real address prints in the start-up line',
    '(`rfm=https://verify.example (default: VERIFICATION_API_URL, …)` when the rfm check takes the verification',
    "interface's address, where the spec lists it).",
    '',
    '**Reloaded**: *yes* means a reload (`SIGHUP` or `POST /admin/reload`) reads the file it names again, with every',
    'start-up check, all or nothing ([operations](operations.md#reloading-the-configuration),',
    '[decision 057](decisions/057-configuration-that-reloads.md)). Every other variable, like every value of the',
    'environment, changes only with a restart. Secrets (keys, tokens, credentials, `DATABASE_URL`) are never echoed in',
    'an error message.',
    '',
    '**Files** a variable names (those that reload, and the `sslrootcert`, `sslcert` and `sslkey` of `DATABASE_URL`)',
    'must be files: a folder, a named pipe or a device is refused unread, naming the variable and the path (start-up',
    'stops; a reload answers 422 and changes nothing), where reading a pipe would wait for a writer.',
    '',
    '**JWKS files** (`AUTH_JWKS_FILE`, the `jwksFile` of an `AUTH_ISSUERS` entry, `MOBILEID_JWKS_FILE`) are read by one',
    'rule, at start and on each reload. The file is refused (start-up stops; a reload answers 422 and keeps the keys in',
    'force), naming the variable, the file and the line, when it is no JWKS, holds a private or symmetric key, holds',
    'two keys a token of one kid would both match, holds a key of a kind the gateway verifies with that cannot be used',
    '(its numbers missing or not base64url, an RSA key under 2048 bits), or holds no key the gateway can verify',
    'signatures with (RSA of 2048 bits or more, EC on P-256, P-384 or P-521, Ed25519): `"keys": []`, or only keys of',
    'another type, curve, `alg` or `use` (`"enc"`), each listed with its kid, its line and why. A key of another kind',
    'beside usable ones is passed over, as in a fetched JWKS: the gateway starts (or the reload swaps the file in) with',
    'the usable keys, and logs one warning for that read naming the variable, the file and each key passed over, in the',
    'same words.',
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
