// The in-process bus keeps a key's only listener as itself and a Set once a second one comes (decision 108): every
// listener of a key and of its kind gets each event once, in the order they subscribed, however many there are, and
// an unsubscribe takes out its own listener only, once, whichever way the key's listeners are kept.
import { describe, expect, it } from 'vitest';

import { InProcessBus } from '../../src/events/bus.js';
import type { EventRecord } from '../../src/events/log.js';

let seq = 0;
const event = (key: string): EventRecord => ({
  seq: ++seq,
  kind: 'mobile-id',
  key,
  dedupeKey: String(seq),
  fingerprint: '',
  payload: {},
  meta: {},
  scope: null,
  receivedAt: new Date(0),
});

describe('the in-process bus’s listeners', () => {
  it('calls a lone listener, then each of two and of three in order, and the kind’s listeners after the key’s', () => {
    const bus = new InProcessBus();
    const got: string[] = [];
    const a = bus.subscribe('mobile-id', 'k', (e) => got.push(`a${e.seq}`));
    const kind = bus.subscribe('mobile-id', null, (e) => got.push(`kind${e.seq}`));
    void bus.publish(event('k'));
    const b = bus.subscribe('mobile-id', 'k', (e) => got.push(`b${e.seq}`));
    const c = bus.subscribe('mobile-id', 'k', (e) => got.push(`c${e.seq}`));
    void bus.publish(event('k'));
    void bus.publish(event('other'));
    expect(got).toEqual(['a1', 'kind1', 'a2', 'b2', 'c2', 'kind2', 'kind3']);
    expect(bus.subscribers('mobile-id', 'k')).toBe(3);
    expect(bus.subscribers('mobile-id', null)).toBe(1);
    expect(bus.subscribers('mobile-id')).toBe(4);
    for (const unsubscribe of [b, a, c, kind]) unsubscribe();
    expect(bus.subscribers('mobile-id')).toBe(0);
  });

  it('takes out only its own listener, once: twice, or after the key has a new lone listener, is nothing', () => {
    const bus = new InProcessBus();
    const got: string[] = [];
    const a = bus.subscribe('mobile-id', 'k', () => got.push('a'));
    a();
    expect(bus.subscribers('mobile-id', 'k')).toBe(0);
    const b = bus.subscribe('mobile-id', 'k', () => got.push('b'));
    a();
    expect(bus.subscribers('mobile-id', 'k')).toBe(1);
    const c = bus.subscribe('mobile-id', 'k', () => got.push('c'));
    b();
    b();
    expect(bus.subscribers('mobile-id', 'k')).toBe(1);
    void bus.publish(event('k'));
    expect(got).toEqual(['c']);
    c();
    expect(bus.subscribers('mobile-id', 'k')).toBe(0);
    void bus.publish(event('k'));
    expect(got).toEqual(['c']);
  });

  it('a listener that unsubscribes while it is called (a stream taking its last event) does not stop the others', () => {
    const bus = new InProcessBus();
    const got: string[] = [];
    const lone: { off?: () => void } = {};
    lone.off = bus.subscribe('mobile-id', 'lone', (e) => (got.push(`lone${e.seq}`), lone.off!()));
    const first: { off?: () => void } = {};
    first.off = bus.subscribe('mobile-id', 'k', (e) => (got.push(`first${e.seq}`), first.off!()));
    bus.subscribe('mobile-id', 'k', (e) => got.push(`second${e.seq}`));
    const a = event('lone');
    const b = event('k');
    void bus.publish(a);
    void bus.publish(a);
    void bus.publish(b);
    void bus.publish(b);
    expect(got).toEqual([`lone${a.seq}`, `first${b.seq}`, `second${b.seq}`, `second${b.seq}`]);
    expect(bus.subscribers('mobile-id', 'lone')).toBe(0);
    expect(bus.subscribers('mobile-id', 'k')).toBe(1);
  });
});
