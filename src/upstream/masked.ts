// Masking a secret's value wherever a text quotes it: shared by the cloud client (a request's passwords) and every
// upstream client (the gateway's own credential, quoted in a refusal).

/** A text that is a UUID and nothing else, in either letter case. */
const WHOLE_UUID = /^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$/;

/**
 * `value` with each of `secrets` replaced by `***` in every text it holds (itself, when it is one), as sent and in
 * the forms an upstream may quote it in (`formsOf`). Longest form first, so that none is masked only in part.
 *
 * A text that is a whole UUID is an id (spec, Resources: the ids are UUIDs, taken from the answers and reused): it is
 * masked only when it is itself a secret (in any letter case), never in part. A short secret ("-", "4") is inside
 * every UUID, and masked there it would change the id that a kept answer is read again for. Left whole, it shows
 * nothing of the secret: the upstream made the id, not from the secret, so the secret is in it only by chance.
 */
export function masked<T>(value: T, secrets: readonly string[]): T {
  if (secrets.length === 0) return value;
  const forms = [...new Set(secrets.flatMap(formsOf))].sort((a, b) => b.length - a.length);
  const uuidSecrets = new Set(forms.filter((f) => WHOLE_UUID.test(f)).map((f) => f.toLowerCase()));
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') {
      if (WHOLE_UUID.test(v)) return uuidSecrets.has(v.toLowerCase()) ? '***' : v;
      return forms.reduce((t, f) => t.replaceAll(f, '***'), v);
    }
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  return walk(value) as T;
}

/**
 * A secret as sent and as an upstream may echo it re-encoded: JSON-escaped (as JSON.stringify writes it, with
 * non-ASCII as `\uXXXX` in either case of hex, each with `/` as `\/` too), percent-encoded (encodeURIComponent, and
 * form encoding with `+` for a space), and the base64 and base64url of its UTF-8 bytes.
 */
function formsOf(secret: string): string[] {
  // A lone surrogate goes on the wire as U+FFFD (UTF-8 has no other way), and encodeURIComponent throws on one.
  const text = secret.replace(/\p{Cs}/gu, '\ufffd');
  const json = JSON.stringify(secret).slice(1, -1);
  const ascii = json.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  const upper = ascii.replace(/\\u([0-9a-f]{4})/g, (_, hex: string) => `\\u${hex.toUpperCase()}`);
  const uri = encodeURIComponent(text);
  const forms = [secret, json, ascii, upper];
  forms.push(...forms.map((f) => f.replaceAll('/', '\\/')), uri, uri.replaceAll('%20', '+'));
  forms.push(new URLSearchParams([['', text]]).toString().slice(1));
  for (const run of base64Runs(Buffer.from(text, 'utf8')))
    if (run.length >= 4) forms.push(run, run.replaceAll('+', '-').replaceAll('/', '_'));
  return forms;
}

/**
 * The base64 of `bytes` inside a longer encoded text: its bytes start at offset 0, 1 or 2 of a 3-byte group, and
 * each alignment encodes them differently. Of each, only the characters made of `bytes`' bits alone, so the run is
 * found whatever surrounds it (a shorter run is left: that short, it would be found by chance, not echoed).
 */
function base64Runs(bytes: Buffer): string[] {
  return [0, 1, 2].map((shift) =>
    Buffer.concat([Buffer.alloc(shift), bytes])
      .toString('base64')
      .slice(Math.ceil((shift * 8) / 6), Math.floor(((shift + bytes.length) * 8) / 6)),
  );
}
