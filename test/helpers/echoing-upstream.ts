// An upstream over loopback that answers every request with what `answer` makes of the request's Authorization
// header: the tests of an upstream quoting the gateway's own credential back (test/upstream/*-quoting-the-gateway-token).
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface EchoingUpstream {
  readonly url: string;
  close(): Promise<void>;
}

/** Starts the upstream; each request is read to its end, then answered `status` with `body`'s JSON. */
export async function startEchoingUpstream(
  answer: (auth: string) => { status: number; body: unknown },
): Promise<EchoingUpstream> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const { status, body } = answer(String(req.headers.authorization));
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
