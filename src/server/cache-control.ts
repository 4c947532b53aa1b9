import type { ApolloServerPlugin, HeaderMap } from '@apollo/server';

/** A Cache-Control value Apollo's cache-control plugin can read (and would only tighten). */
const CACHEABLE_HEADER = /^max-age=(\d+), (public|private)$/;

/**
 * The cache-control header Apollo's default cache-control plugin leaves on a response of this schema, given the
 * one already set (by an error's `http` extension): `no-store`, unless another part set a value it cannot parse.
 */
export function noStoreValue(existing: string | undefined): string {
  return existing && existing !== 'no-store' && !CACHEABLE_HEADER.test(existing) ? existing : 'no-store';
}

/**
 * What Apollo's default cache-control plugin does for this schema, without its per-field work: the schema has
 * no cache hints and no resolver sets one, so every response is uncacheable, and the plugin's answer is always
 * `cache-control: no-store` (kept as it is only when another part set a header it cannot parse). The plugin
 * itself ran a `willResolveField` hook for every field of every operation (a cache policy object each) and
 * defined a property on the context per request: ~8 µs of a createNetwork, more for a tree of objects.
 * Installed with ApolloServerPluginCacheControlDisabled (src/app.ts).
 */
export function noStorePlugin<C extends object>(): ApolloServerPlugin<C> {
  const listener = {
    async willSendResponse({ response }: { response: { http: { headers: HeaderMap } } }) {
      response.http.headers.set('cache-control', noStoreValue(response.http.headers.get('cache-control')));
    },
  };
  return { requestDidStart: async () => listener };
}
