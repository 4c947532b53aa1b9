// A reserved SSE stream (graphql-sse's single-connection mode) is released at its minute's end if nothing connected it.
// graphql-sse opens the stream for its GET before the gateway marks it connected: a release that came in between would
// drop the stream's operations and leave the GET open with nothing on it, the client waiting for events that never
// come. The GET is held there by the testing hook, and the minute's end is run while it waits: the release is put off
// until the GET is answered, and then not made, since the GET connected the stream.
import { expect, it } from 'vitest';

import { scopeOfApp } from '../../src/auth/caller.js';
import { gatewaysPerTest } from '../helpers/gateway.js';
import {
  closedAsSlow,
  completionsOn,
  postCompletion,
  registerVerifications,
  reservedSse,
} from '../helpers/resumable.js';
import { waitFor, waitForSubscribers } from '../helpers/wait.js';

const start = gatewaysPerTest();

const KEY = 'key-a';
const SUBSCRIPTION = 'subscription { verificationCompleted { payload } }';
const ENV = { GATEWAY_API_KEYS: `alpha:${KEY}`, SANDBOX_CALLBACK_DELAY_MS: '600000', RATE_LIMIT_READS: 'off' };

it('a release that comes while its GET is being connected is put off, and the connected stream carries its operation', async () => {
  const releases: Array<() => Promise<void>> = [];
  let accepted!: () => void;
  const atAcceptance = new Promise<void>((resolve) => (accepted = resolve));
  let proceed!: () => void;
  const resumed = new Promise<void>((resolve) => (proceed = resolve));
  const t = await start(ENV, {
    testing: {
      scheduleSseRelease: (release) => releases.push(release),
      sseConnectionAccepted: async () => {
        accepted();
        await resumed;
      },
    },
  });
  const [[id, url]] = [...(await registerVerifications(t, t.gateway.sandbox.verification!, KEY, 1))] as [
    [string, string],
  ];
  const live = () => t.gateway.services.liveSubscriptions.of(scopeOfApp('alpha'));

  const sse = reservedSse(t, KEY, SUBSCRIPTION);
  const token = await sse.reserve();
  await sse.add(token);
  await waitForSubscribers(t, 'verification');
  expect(live()).toBe(1);

  // The GET, held once graphql-sse has accepted it; its reservation's minute ends there.
  const response = sse.get(token);
  await atAcceptance;
  expect(releases).toHaveLength(1);
  await releases[0]!();
  proceed();

  const res = await response;
  expect(res.statusCode).toBe(200);
  const received = completionsOn(res);
  try {
    await postCompletion(url, id, 'after-connect');
    await waitFor(() => received.length === 1, 20_000, 'the event on the stream connected while its release was due');
    expect(received).toEqual(['after-connect']);
    expect(live()).toBe(1);
    expect(await closedAsSlow(t)).toBeUndefined();
  } finally {
    res.destroy();
  }
  // Its subscription ends with the connection, as any connected stream's does, and gives back its place.
  await waitFor(() => live() === 0, 20_000, 'the subscription to end with its stream');
}, 60_000);
