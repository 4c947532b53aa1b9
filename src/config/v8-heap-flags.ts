// The V8 flags V8_HEAP_GROWING_PERCENT and V8_ALLOCATION_SITE_PRETENURING ask for (docs/decisions/138), and their
// defaults, which src/config/index.ts declares: read here without a library, since src/config/v8-heap.ts applies them
// before any is loaded.
import { boolWord } from './values.js';

/** V8_HEAP_GROWING_PERCENT's default and largest value (0: V8's own factor). */
export const HEAP_GROWING_PERCENT = { fallback: 300, max: 1000 } as const;
/** V8_ALLOCATION_SITE_PRETENURING's default. */
export const ALLOCATION_SITE_PRETENURING = false;

/** The V8 flags the two variables ask for: none where a variable is not a value the configuration accepts. */
export function v8HeapFlags(env: Readonly<Record<string, string | undefined>>): string[] {
  const flags: string[] = [];
  const growth = (env.V8_HEAP_GROWING_PERCENT ?? '').trim();
  const percent = growth === '' ? HEAP_GROWING_PERCENT.fallback : Number(growth);
  if (Number.isInteger(percent) && percent >= 1 && percent <= HEAP_GROWING_PERCENT.max)
    flags.push(`--heap-growing-percent=${percent}`);
  const pretenuring = boolWord(env.V8_ALLOCATION_SITE_PRETENURING);
  if (pretenuring === false || (pretenuring === undefined && !ALLOCATION_SITE_PRETENURING))
    flags.push('--no-allocation-site-pretenuring');
  return flags;
}
