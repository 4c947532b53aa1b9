// GraphiQL's "API key or JWT" field: remembered while the browser tab is open (sessionStorage), sent as
// Authorization: Bearer on every request unless the Headers editor sets its own Authorization.
import { describe, expect, it } from 'vitest';

import { sessionCredential, withCredential } from '../../src/graphiql-app/credential.js';

/** A sessionStorage stand-in with the Web Storage methods the field uses. */
function memoryStorage(): globalThis.Storage {
  const items = new Map<string, string>();
  return {
    getItem: (k: string) => items.get(k) ?? null,
    setItem: (k: string, v: string) => void items.set(k, v),
    removeItem: (k: string) => void items.delete(k),
    clear: () => items.clear(),
    key: (i: number) => [...items.keys()][i] ?? null,
    get length() {
      return items.size;
    },
  };
}

describe('the credential field', () => {
  it('is sent as a bearer token, and a value typed with its scheme is sent as it is', () => {
    expect(withCredential({ 'x-trace': '1' }, 'my-key')).toEqual({ 'x-trace': '1', Authorization: 'Bearer my-key' });
    expect(withCredential(undefined, ' bearer eyJhbGciOi.x.y ')).toEqual({ Authorization: 'bearer eyJhbGciOi.x.y' });
  });

  it('gives way to an Authorization header set in the Headers editor, whatever its case', () => {
    const headers = { authorization: 'Bearer from-editor' };
    expect(withCredential(headers, 'from-field')).toBe(headers);
  });

  it('sends nothing when empty', () => {
    expect(withCredential(undefined, '  ')).toBeUndefined();
    expect(withCredential({ a: '1' }, '')).toEqual({ a: '1' });
  });

  it('is kept in the tab’s session storage, and cleared from it when emptied', () => {
    const storage = memoryStorage();
    const first = sessionCredential(storage);
    first.set(' key-1 ');
    expect(sessionCredential(storage).get()).toBe('key-1');
    first.set('');
    expect(storage.length).toBe(0);
  });

  it('still works for the page when the storage refuses writes', () => {
    const refusing = {
      ...memoryStorage(),
      setItem: () => {
        throw new Error('QuotaExceededError');
      },
      getItem: () => {
        throw new Error('SecurityError');
      },
    };
    const credential = sessionCredential(refusing as unknown as globalThis.Storage);
    credential.set('key-2');
    expect(credential.get()).toBe('key-2');
  });
});
