/**
 * What a webhook→subscription server delivers and what it loses when a notification arrives in a way the
 * mobile-ID spec allows or a sender does (docs/upstreams.md, Mobile-ID notification: JSON by default, form-encoded on
 * request; the sender does not retry), measured, not read from documentation: each probe opens a real
 * graphql-transport-ws subscription, sends real webhooks and counts the `next` messages that arrive within a
 * bound. Run by scenario 5 against the gateway and against the Hive Gateway peer, from the orchestrator
 * (a handful of requests, no load).
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import WebSocket from 'ws';

import { waitUntilIdle } from '../lib/processes.js';

/** A server that turns POSTs on `webhookPath` into subscription events. */
export interface ProbeTarget {
  name: string;
  origin: string;
  wsUrl: string;
  /** Sent as `Authorization` on the upgrade and in `connection_init` (the gateway's API key). */
  apiKey: string;
  /** Subscription document with one variable, `$authReqId`; its event's first field carries `authReqId`. */
  subscription: string;
  webhookPath: string;
  /** The sender's accepted token (`Authorization: Bearer …`). */
  notificationToken: string;
  /** The server's pid: after a subscribe, the probe waits until it is idle (graphql-ws acknowledges no subscribe). */
  pid: number;
}

export interface ProbeRow {
  probe: string;
  /** HTTP status of each webhook sent. */
  statuses: number[];
  /** `next` messages the subscriber got within the bound after the last webhook. */
  deliveries: number;
  /** The wanted number of deliveries (what the spec or the design asks), for the table's verdict. */
  wanted: number;
  note: string;
}

/** How long a probe waits for a delivery after its last webhook (or for a second one, where one is wanted). */
export const DELIVERY_BOUND_MS = 1_500;

const failureFields = (id: string) => ({
  auth_req_id: id,
  error: 'access_denied',
  error_description: 'client timeout',
});

class ProbeClient {
  private readonly nexts = new Map<string, number>();
  private seq = 0;

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (raw) => {
      const msg = JSON.parse(String(raw)) as { type: string; id?: string };
      if (msg.type === 'ping') ws.send('{"type":"pong"}');
      if (msg.type === 'next' && msg.id) this.nexts.set(msg.id, (this.nexts.get(msg.id) ?? 0) + 1);
    });
  }

  static async open(t: ProbeTarget): Promise<ProbeClient> {
    const ws = new WebSocket(t.wsUrl, 'graphql-transport-ws', {
      headers: { authorization: `Bearer ${t.apiKey}` },
      perMessageDeflate: false,
    });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${t.name}: no connection_ack within 10 s`)), 10_000);
      ws.on('open', () =>
        ws.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${t.apiKey}` } })),
      );
      ws.on('message', (raw) => {
        if ((JSON.parse(String(raw)) as { type: string }).type !== 'connection_ack') return;
        clearTimeout(timer);
        resolve();
      });
      ws.on('error', reject);
    });
    return new ProbeClient(ws);
  }

  /** Subscribes on `authReqId`; returns the subscription's message id. */
  subscribe(t: ProbeTarget, authReqId: string): string {
    const id = `p${++this.seq}`;
    this.nexts.set(id, 0);
    this.ws.send(
      JSON.stringify({ id, type: 'subscribe', payload: { query: t.subscription, variables: { authReqId } } }),
    );
    return id;
  }

  deliveries(id: string): number {
    return this.nexts.get(id) ?? 0;
  }

  /**
   * Waits `DELIVERY_BOUND_MS` for the deliveries of subscription `id`, or only until the first when `untilFirst`
   * (one webhook cannot be delivered twice; a repeated one can, so that probe waits the whole bound).
   */
  async wait(id: string, untilFirst: boolean): Promise<number> {
    const deadline = performance.now() + DELIVERY_BOUND_MS;
    while (performance.now() < deadline && !(untilFirst && this.deliveries(id) > 0)) await sleep(20);
    return this.deliveries(id);
  }

  close(): void {
    this.ws.close(1000);
  }
}

/** Until process `pid` used under 10% of a core for two 100 ms samples in a row (at most 5 s): the subscribe is set up. */
function settled(pid: number): Promise<void> {
  return waitUntilIdle(pid, 5_000);
}

async function post(t: ProbeTarget, body: string, contentType: string, token = t.notificationToken): Promise<number> {
  const res = await request(`${t.origin}${t.webhookPath}`, {
    method: 'POST',
    headers: { 'content-type': contentType, authorization: `Bearer ${token}`, 'x-mobileid-request-id': 'probe' },
    body,
  });
  await res.body.dump();
  return res.statusCode;
}

/**
 * Runs the probes against `t`, in this order (the first needs a server on which nobody has subscribed yet:
 * run it on a fresh process, before any load).
 */
export async function probeWebhooks(t: ProbeTarget): Promise<ProbeRow[]> {
  const rows: ProbeRow[] = [];
  const json = 'application/json';
  const client = await ProbeClient.open(t);
  try {
    // A webhook before its subscriber, on a server with no subscription open at all.
    {
      const id = `probe-${randomUUID()}`;
      const status = await post(t, JSON.stringify(failureFields(id)), json);
      const sub = client.subscribe(t, id);
      rows.push({
        probe: 'webhook before its subscriber, no subscription open',
        statuses: [status],
        deliveries: await client.wait(sub, true),
        wanted: 1,
        note: 'subscribed after the answer',
      });
    }
    // The same, while another subscription waits on the topic (the usual case under load).
    const other = client.subscribe(t, `probe-other-${randomUUID()}`);
    await settled(t.pid);
    {
      const id = `probe-${randomUUID()}`;
      const status = await post(t, JSON.stringify(failureFields(id)), json);
      const sub = client.subscribe(t, id);
      rows.push({
        probe: 'webhook before its subscriber, others waiting',
        statuses: [status],
        deliveries: await client.wait(sub, true),
        wanted: 1,
        note: 'subscribed after the answer',
      });
    }
    // Subscribed first, then one webhook as the test names it.
    const after = async (probe: string, wanted: number, note: string, send: (id: string) => Promise<number[]>) => {
      const id = `probe-${randomUUID()}`;
      const sub = client.subscribe(t, id);
      await settled(t.pid);
      const statuses = await send(id);
      rows.push({ probe, statuses, deliveries: await client.wait(sub, statuses.length === 1), wanted, note });
    };
    await after('control: JSON, subscriber first', 1, '`application/json`', async (id) => [
      await post(t, JSON.stringify(failureFields(id)), json),
    ]);
    await after('`charset` in the content type', 1, '`application/json; charset=utf-8`', async (id) => [
      await post(t, JSON.stringify(failureFields(id)), 'application/json; charset=UTF-8'),
    ]);
    await after(
      'duplicate delivery (same body twice)',
      1,
      'the sender repeats a notification it got no answer to',
      async (id) => {
        const body = JSON.stringify(failureFields(id));
        return [await post(t, body, json), await post(t, body, json)];
      },
    );
    await after(
      'form-encoded body',
      1,
      '`application/x-www-form-urlencoded` (the spec allows it on request)',
      async (id) => [
        await post(t, new URLSearchParams(failureFields(id)).toString(), 'application/x-www-form-urlencoded'),
      ],
    );
    await after('wrong bearer token', 0, 'not the configured client_notification_token', async (id) => [
      await post(t, JSON.stringify(failureFields(id)), json, 'not-the-token'),
    ]);
    void other;
  } finally {
    client.close();
  }
  return rows;
}

/** A cell of the probes table: what the subscriber got, judged against what it should get. */
export function probeCell(r: ProbeRow | undefined): string {
  if (!r) return 'not run';
  const got =
    r.deliveries === 0 ? 'not delivered' : r.deliveries === 1 ? 'delivered once' : `delivered ${r.deliveries}×`;
  const ok = r.deliveries === r.wanted;
  return `${r.statuses.join(', ')} → ${ok ? got : `**${got}**`}`;
}
