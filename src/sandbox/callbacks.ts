export interface CallbackDelivery {
  /** Attempts in all; a 5xx answer or a network error is tried again, anything else ends the delivery. */
  attempts: number;
  /** First pause between attempts; it doubles each time. */
  backoffMs: number;
  /** True once the sandbox is closing: no further attempt is made. */
  closed(): boolean;
  /** Told of each attempt: the status, or null and the error when nothing was answered. */
  record(attempt: number, status: number | null, error?: string): void;
}

/** POSTs a JSON callback as the identity platform does (spec: Events 1 and 2); resolves with the last status. */
export async function deliverCallback(url: string, body: unknown, delivery: CallbackDelivery): Promise<number | null> {
  // undici's whole API only when a callback is sent, not with every gateway's start-up (docs/decisions/124).
  const { request } = await import('undici');
  let last: number | null = null;
  for (let attempt = 1; attempt <= delivery.attempts && !delivery.closed(); attempt++) {
    try {
      const res = await request(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        headersTimeout: 5_000,
        bodyTimeout: 5_000,
      });
      await res.body.dump();
      last = res.statusCode;
      delivery.record(attempt, res.statusCode);
      if (res.statusCode < 500) return res.statusCode;
    } catch (error) {
      delivery.record(attempt, null, String(error));
    }
    if (attempt < delivery.attempts)
      await new Promise((r) => setTimeout(r, delivery.backoffMs * 2 ** (attempt - 1)).unref());
  }
  return last;
}
