// Rewrites the configuration table between the config-table markers of README.md.
import fs from 'node:fs';

import { configTable } from './config-table.js';

const file = new URL('../README.md', import.meta.url);
const text = fs.readFileSync(file, 'utf8');
const next = text.replace(
  /(<!-- config-table:start -->\n)[\s\S]*?(<!-- config-table:end -->)/,
  `$1${configTable()}\n$2`,
);
fs.writeFileSync(file, next);
