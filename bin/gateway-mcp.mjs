#!/usr/bin/env node
// gateway-mcp: the gateway's MCP endpoint for agents that speak MCP over stdio (desktop clients). It forwards every
// message, as it came, to a gateway's Streamable HTTP endpoint (/mcp or /mcp/<toolset>) with the app's key, and every
// answer back; it holds no tools and no logic of its own (docs/decisions/060).
//
//   GATEWAY_KEY=… node <checkout>/bin/gateway-mcp.mjs --url https://gateway.example.com/mcp [--key-env GATEWAY_KEY]
//
// By its path: the package is not published, so `npx gateway-mcp` outside the checkout would fetch and run whatever
// registry package has that name, and hand it the key (docs/agents.md).
import { parseArgs } from 'node:util';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioServerTransport } from '@modelcontextprotocol/server/stdio';

const USAGE =
  'usage: gateway-mcp --url <gateway>/mcp[/<toolset>] [--key-env <variable holding the API key or JWT, default GATEWAY_KEY>]';

function fail(message) {
  process.stderr.write(`gateway-mcp: ${message}\n${USAGE}\n`);
  process.exit(2);
}

let options;
try {
  options = parseArgs({
    options: {
      url: { type: 'string' },
      'key-env': { type: 'string', default: 'GATEWAY_KEY' },
      help: { type: 'boolean' },
    },
    strict: true,
  }).values;
} catch (err) {
  fail(err.message);
}
if (options.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
let url;
try {
  url = new URL(options.url ?? '');
} catch {
  fail("--url must be the absolute URL of a gateway's MCP endpoint");
}
// The key is read from the environment, never from the command line (which other users of the machine can read).
const key = process.env[options['key-env']];
if (!key) fail(`set ${options['key-env']} to the app's API key or JWT`);

const gateway = new StreamableHTTPClientTransport(url, {
  requestInit: { headers: { authorization: `Bearer ${key}` } },
});
const local = new StdioServerTransport();

// The requests forwarded and not answered yet, and the lines being written. A client that writes its requests and then
// closes stdin (a script, `printf … | gateway-mcp`) still gets every answer: the command exits once the last is out.
const unanswered = new Set();
let writing = 0;
let inputEnded = false;
let exiting = false;
function exitOnceAnswered() {
  if (!inputEnded || unanswered.size > 0 || writing > 0 || exiting) return;
  exiting = true;
  void gateway.close().finally(() => process.exit(0));
}
// Lines go to stdout directly: the stdio transport refuses to write once stdin has ended, and the answers are owed.
function write(message) {
  writing += 1;
  process.stdout.write(`${JSON.stringify(message)}\n`, (err) => {
    // Whoever read the answers is gone: nothing more can reach it.
    if (err) process.exit(0);
    writing -= 1;
    exitOnceAnswered();
  });
}
const isRequest = (message) =>
  message !== null && typeof message === 'object' && 'id' in message && 'method' in message;
const isAnswer = (message) =>
  message !== null && typeof message === 'object' && 'id' in message && !('method' in message);

local.onmessage = (message) => {
  const request = isRequest(message);
  if (request) unanswered.add(message.id);
  // A request the gateway could not answer (refused, unreachable), or whose stream ended with no answer, still gets
  // one, so the client does not wait.
  const failed = (why) => {
    if (!request || !unanswered.delete(message.id)) return;
    write({ jsonrpc: '2.0', id: message.id, error: { code: -32000, message: `gateway-mcp: ${why}` } });
  };
  gateway
    .send(message, { onRequestStreamEnd: () => failed('the gateway ended its stream without an answer') })
    // The transport has already handed this error to gateway.onerror, which writes it to stderr: not again here.
    .catch((err) => failed(err?.message ?? err));
};
gateway.onmessage = (message) => {
  // 2025 revisions name the negotiated version on every later request (MCP-Protocol-Version).
  const version = message?.result?.protocolVersion;
  if (typeof version === 'string') gateway.setProtocolVersion(version);
  if (isAnswer(message)) unanswered.delete(message.id);
  write(message);
};
gateway.onerror = (err) => process.stderr.write(`gateway-mcp: ${err?.message ?? err}\n`);
local.onclose = () => {
  inputEnded = true;
  exitOnceAnswered();
};

await gateway.start();
await local.start();
