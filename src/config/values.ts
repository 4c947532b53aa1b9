// How a variable's text reads as a boolean, for src/config/index.ts and for what runs before it (src/config/v8-heap.ts,
// which may load no library): one rule, so that a value the configuration refuses is never read another way there.

/** true for true, 1, yes or on; false for false, 0, no or off (any case, spaces around); undefined when unset or
 * blank; null for anything else. */
export function boolWord(text: string | undefined): boolean | undefined | null {
  if (text === undefined || text.trim() === '') return undefined;
  const word = text.trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(word)) return true;
  if (['false', '0', 'no', 'off'].includes(word)) return false;
  return null;
}
