/**
 * One peer in its own process (pinned like the other servers under test):
 *   node --import tsx bench/peers/main.ts --peer hive|apollo --upstream <url> --token <t>   (scenario 1)
 *   node --import tsx bench/peers/main.ts --peer hive-webhooks                          (scenarios 5 and 7)
 * Prints `READY {"url": ...}` (the GraphQL endpoint) when it serves.
 */
import { parseArgs } from 'node:util';

import { startApolloPeer } from './apollo.js';
import { startHiveWebhookPeer } from './hive-webhooks.js';
import { startHivePeer } from './hive.js';

const { values: args } = parseArgs({
  options: { peer: { type: 'string' }, upstream: { type: 'string' }, token: { type: 'string' } },
});
const start =
  args.peer === 'hive'
    ? startHivePeer
    : args.peer === 'apollo'
      ? startApolloPeer
      : args.peer === 'hive-webhooks'
        ? () => startHiveWebhookPeer()
        : null;
if (!start) throw new Error(`--peer must be hive, apollo or hive-webhooks, not ${String(args.peer)}`);
const peer = await start({ upstream: args.upstream!, token: args.token! });
process.stdout.write(`READY ${JSON.stringify({ url: peer.url })}\n`);
process.on('SIGTERM', () => {
  void peer.close().finally(() => process.exit(0));
});
