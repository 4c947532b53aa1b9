import http from 'node:http';

/** An answer as it came over the wire: status, the raw header list (names as sent, in order) without Date, body. */
export interface RawAnswer {
  status: number;
  headers: string[];
  body: string;
}

/**
 * One request to `${url}/graphql` (with `search`, a query string from its `?`) over a fresh connection
 * (`connection: close`, no agent), for tests that compare two gateways' answers byte for byte: every header but
 * Date, in order.
 */
export function rawGraphQL(
  url: string,
  body: string,
  headers: Record<string, string>,
  method = 'POST',
  search = '',
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${url}/graphql${search}`,
      { method, headers: { connection: 'close', ...headers }, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const raw = res.rawHeaders;
          const kept: string[] = [];
          for (let i = 0; i < raw.length; i += 2)
            if (raw[i]!.toLowerCase() !== 'date') kept.push(`${raw[i]}: ${raw[i + 1]}`);
          resolve({ status: res.statusCode!, headers: kept, body: Buffer.concat(chunks).toString('utf8') });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * A body read to its end: resolves 'ended' when the server ended it, or `cut: <message>` when something cut it;
 * `seen` is told the text received so far after each chunk.
 */
export function readToEnd(
  body: AsyncIterable<Uint8Array>,
  seen: (text: string) => void = () => undefined,
): Promise<string> {
  return (async () => {
    let text = '';
    try {
      for await (const chunk of body) {
        text += Buffer.from(chunk).toString('utf8');
        seen(text);
      }
      return 'ended';
    } catch (err) {
      return `cut: ${(err as Error).message}`;
    }
  })();
}
