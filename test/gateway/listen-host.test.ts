// HOST names the interface the gateway listens on. A value with a port, a scheme or brackets (`localhost:4000`,
// `http://0.0.0.0`, `[::]`) names none: listen looked it up as a host name, and the gateway stopped with
// `getaddrinfo ENOTFOUND localhost:4000` and exit code 1, after it had opened its store, without naming HOST. Such a
// value is a bad configuration: it stops start-up with exit code 2, HOST named, before anything is opened.
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';

import { tempDataDir } from '../helpers/gateway.js';
import { runMainUntilReady as runMain } from '../helpers/process.js';

describe('HOST', () => {
  it.each(['localhost:4000', 'http://127.0.0.1', '[::1]'])(
    '%j stops start-up naming HOST, before the store is opened',
    async (host) => {
      const dataDir = tempDataDir();
      const { code, output } = await runMain({ HOST: host, DATA_DIR: dataDir });
      expect(output).toContain('gateway: invalid configuration: HOST: must be an address or a host name alone');
      expect(code).toBe(2);
      expect(output).not.toContain('ENOTFOUND');
      expect(fs.readdirSync(dataDir)).toEqual([]);
    },
  );

  it('an address or a host name alone starts', async () => {
    const { code, output } = await runMain({ HOST: 'localhost', DATA_DIR: tempDataDir() });
    expect(output).toContain('gateway ready');
    expect(code).toBe(0);
  });
});
