// The key or JWT the page sends, typed once into the field beside the logo: kept in sessionStorage, so it lasts
// while the browser tab is open (reloads included) and is gone when it closes, never in localStorage.
const ITEM = 'gateway-graphiql:credential';

export interface CredentialStore {
  get(): string;
  set(value: string): void;
}

/** The credential in `storage` (the page's sessionStorage); a storage that refuses writes keeps it in memory. */
export function sessionCredential(storage: globalThis.Storage | undefined): CredentialStore {
  let memory = '';
  return {
    get: () => {
      try {
        return storage?.getItem(ITEM) ?? memory;
      } catch {
        return memory;
      }
    },
    set: (value) => {
      memory = value.trim();
      try {
        if (memory) storage?.setItem(ITEM, memory);
        else storage?.removeItem(ITEM);
      } catch {
        // Private modes may refuse storage: the value stays in memory for this page.
      }
    },
  };
}

/**
 * The headers a request is sent with: the header editor's, plus `Authorization: Bearer <credential>` when the field
 * holds one and the editor sets no Authorization of its own (an explicit header wins). A value typed with its
 * scheme (`Bearer …`) is sent as it is.
 */
export function withCredential(
  headers: Record<string, unknown> | undefined,
  credential: string,
): Record<string, unknown> | undefined {
  const value = credential.trim();
  if (!value) return headers;
  if (Object.keys(headers ?? {}).some((name) => name.toLowerCase() === 'authorization')) return headers;
  return { ...headers, Authorization: /^bearer\s/i.test(value) ? value : `Bearer ${value}` };
}
