// Prints the README's configuration table from the one declaration in src/config/index.ts.
// `npx tsx scripts/config-table.ts`; test/readme.test.ts fails when the README's copy differs.
import { ENV_VARS } from '../src/config/index.js';

export function configTable(): string {
  const rows = ENV_VARS.map(
    (v) => `| \`${v.name}\` | ${v.default.startsWith('(') ? v.default : `\`${v.default}\``} | ${v.description} |`,
  );
  return ['| Variable | Default | Meaning |', '|---|---|---|', ...rows].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) process.stdout.write(configTable() + '\n');
