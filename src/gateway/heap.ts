import v8 from 'node:v8';

import type { Config } from '../config/index.js';

/**
 * The process's V8 settings, applied once as the gateway starts and before it serves (docs/decisions/116): with
 * `v8AllocationSitePretenuring` false, V8 takes no pretenuring decision from then on, so every object a request makes
 * starts young. A decision V8 took earlier is kept, so this runs before the gateway is built.
 */
export function applyHeapSettings(config: Pick<Config, 'v8AllocationSitePretenuring'>): void {
  if (!config.v8AllocationSitePretenuring) v8.setFlagsFromString('--no-allocation-site-pretenuring');
}
