import type { Storage } from '@graphiql/toolkit';

const PREFIX = 'gateway-graphiql';

/** FNV-1a, enough to tell one set of example operations from another. */
export function fingerprint(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i += 1) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0).toString(36);
}

/**
 * localStorage under a namespace derived from the server's examples. GraphiQL only uses
 * `defaultTabs` when storage holds no tabs, so without this a returning user would never see
 * examples added by a newer gateway; with it, their edits survive reloads until the
 * examples change. Namespaces of earlier example sets are removed.
 */
export function namespacedLocalStorage(backing: globalThis.Storage, seed: string): Storage {
  const namespace = `${PREFIX}:${fingerprint(seed)}:`;
  const keys = (): string[] => {
    const all: string[] = [];
    for (let i = 0; i < backing.length; i += 1) {
      const key = backing.key(i);
      if (key !== null) all.push(key);
    }
    return all;
  };
  for (const key of keys()) {
    if (key.startsWith(`${PREFIX}:`) && !key.startsWith(namespace)) backing.removeItem(key);
  }
  return {
    getItem: (key) => backing.getItem(namespace + key),
    setItem: (key, value) => backing.setItem(namespace + key, value),
    removeItem: (key) => backing.removeItem(namespace + key),
    clear: () => {
      for (const key of keys()) if (key.startsWith(namespace)) backing.removeItem(key);
    },
    get length() {
      return keys().filter((key) => key.startsWith(namespace)).length;
    },
  };
}
