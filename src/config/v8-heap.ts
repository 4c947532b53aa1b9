// The second module src/main.ts imports (after node-env.ts), so that it runs before any library is loaded: V8's
// collector as the gateway's start sets it (docs/decisions/138). Under a steady load V8 let the old generation grow by
// only ~10–20 % past what a full collection left (~35 MB of modules and state), so a mark-compact came every few
// seconds, and each one, sharing the core with the requests, set a creation's p99 at a fixed rate; and allocation
// sites that V8 "pretenures" put objects made per request straight into the old generation, where, dead, they keep
// what they point to alive through the scavenges until the next mark-compact. So, by default:
// - V8_HEAP_GROWING_PERCENT (300): the old generation may grow to four times what a full collection left before the
//   next one (`--heap-growing-percent`; 0: V8's own factor);
// - V8_ALLOCATION_SITE_PRETENURING (false): no allocation site is pretenured (`--no-allocation-site-pretenuring`).
// V8 reads both at each decision it takes, so set here they hold from the start. A value src/config/index.ts refuses
// is not applied here; loading the configuration then stops the start with its message.
import v8 from 'node:v8';

import { v8HeapFlags } from './v8-heap-flags.js';

for (const flag of v8HeapFlags(process.env)) v8.setFlagsFromString(flag);
