// undici's Pool and header parser, imported from their own modules (docs/decisions/124): the package's index loads
// its whole API (fetch, WebSocket, caches, mocks: ~2.7 MB of heap) for the two the upstreams use. The types are the
// index's; test/upstream/answers-read.test.ts holds the two equal to the index's own.
declare module 'undici/lib/dispatcher/pool.js' {
  import type { Pool } from 'undici';

  const PoolOfUndici: typeof Pool;
  export default PoolOfUndici;
}

declare module 'undici/lib/core/util.js' {
  import type { util } from 'undici';

  const parts: { parseHeaders: typeof util.parseHeaders };
  export default parts;
}
