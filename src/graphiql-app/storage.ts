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

/** The keys under which GraphiQL's history plugin keeps the operations run and starred (@graphiql/toolkit). */
const HISTORY_KEYS = ['graphiql:queries', 'graphiql:favorites'];

/**
 * The value stored under `key`, without the header editor's text when it is a history list. GraphiQL's history keeps
 * each operation's headers whatever `shouldPersistHeaders` says, and they hold the Authorization a person pasted:
 * localStorage outlives the tab (the credential field's key lasts only as long, src/graphiql-app/credential.ts).
 */
function withoutHeaders(key: string, value: string): string {
  if (!HISTORY_KEYS.includes(key)) return value;
  const name = key.slice(key.indexOf(':') + 1);
  try {
    const parsed: unknown = JSON.parse(value);
    const items = (parsed as Record<string, unknown> | null)?.[name];
    if (!Array.isArray(items)) return value;
    return JSON.stringify({
      [name]: items.map((item: unknown) => {
        if (typeof item !== 'object' || item === null) return item;
        const { headers: _headers, ...kept } = item as Record<string, unknown>;
        return kept;
      }),
    });
  } catch {
    return value;
  }
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
  // What an earlier page wrote into the history with its headers loses them now.
  for (const key of HISTORY_KEYS) {
    const value = backing.getItem(namespace + key);
    if (value !== null) backing.setItem(namespace + key, withoutHeaders(key, value));
  }
  return {
    getItem: (key) => backing.getItem(namespace + key),
    setItem: (key, value) => backing.setItem(namespace + key, withoutHeaders(key, value)),
    removeItem: (key) => backing.removeItem(namespace + key),
    clear: () => {
      for (const key of keys()) if (key.startsWith(namespace)) backing.removeItem(key);
    },
    get length() {
      return keys().filter((key) => key.startsWith(namespace)).length;
    },
  };
}
