// Preloaded into a gateway child process (NODE_OPTIONS=--import=…) by test/gateway/startup-modules.test.ts, when
// MODULE_LOG names a file: every module the ES module loader loads (imports, and CommonJS files imported from them) is
// appended to it as its URL, and at exit every CommonJS module in require.cache as its path, one a line.
import fs from 'node:fs';
import { createRequire, register } from 'node:module';

const file = process.env.MODULE_LOG;
if (file) {
  register(new URL('./module-log-hooks.mjs', import.meta.url), { data: { file } });
  const cache = createRequire(import.meta.url).cache;
  process.once('exit', () => fs.appendFileSync(file, `${Object.keys(cache).join('\n')}\n`));
}
