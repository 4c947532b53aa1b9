// The event log refuses a second row with the same kind, key and dedupe key (one unique index, docs/decisions/079).
// That refuses every second row with the same dedupe key, as the unique dedupe key it replaced did, only if a dedupe
// key can come from one kind and key alone. Each form is built here from the functions the domains call, over owners
// of every shape and keys that hold the forms' separators, and no dedupe key may come from two kinds or keys.
import { describe, expect, it } from 'vitest';

import { scopeOfApp, scopeOfKeyDigest, sha256 } from '../../src/auth/caller.js';
import {
  callbackDedupeKey,
  identificationDedupePrefix,
  mobileIdDedupeKey,
  provisioningDedupeKey,
  verificationDedupePrefix,
} from '../../src/events/index.js';
import { EVENT_KINDS } from '../../src/events/kinds.js';
import { SecretBox } from '../../src/secret.js';

/** Owner scopes of every shape, two of them a prefix of each other's name. */
const OWNERS = ['open', scopeOfApp('a'), scopeOfApp('a.b'), scopeOfApp('ab'), scopeOfKeyDigest(sha256('k'))];
/** Keys (auth_req_ids, external ids, identification and provisioning ids) with the forms' separators in them. */
const KEYS = ['x', 'a', 'b', 'ab', 'b:x', 'a:b', 'x:y', ':', '::', '@', 'x@y', '/', '1/2', '3', 'app:a', 'open:x', ''];
const box = new SecretBox(Buffer.alloc(32, 7));
/** Body digests as the callbacks compute them (hex). */
const DIGESTS = ['{}', '{"a":1}'].map((body) => box.digest(`callback-body\u0000${body}`));

interface Made {
  kind: string;
  key: string;
  dedupeKey: string;
}

function* mobileId(): Generator<Made> {
  for (const key of KEYS) {
    yield { kind: EVENT_KINDS.mobileId, key, dedupeKey: mobileIdDedupeKey(null, key) };
    for (const owner of OWNERS) yield { kind: EVENT_KINDS.mobileId, key, dedupeKey: mobileIdDedupeKey(owner, key) };
  }
}

function* verification(): Generator<Made> {
  for (const key of KEYS)
    for (const owner of OWNERS)
      for (const digest of DIGESTS)
        yield {
          kind: EVENT_KINDS.verification,
          key,
          dedupeKey: callbackDedupeKey(verificationDedupePrefix(owner, key), digest),
        };
}

function* identification(): Generator<Made> {
  for (const key of KEYS)
    for (const digest of DIGESTS)
      yield {
        kind: EVENT_KINDS.identification,
        key,
        dedupeKey: callbackDedupeKey(identificationDedupePrefix(key), digest),
      };
}

function* provisioning(): Generator<Made> {
  for (const key of KEYS)
    for (const revision of [0, 1, 2, 12, 123])
      yield { kind: EVENT_KINDS.provisioning, key, dedupeKey: provisioningDedupeKey(key, revision) };
}

/** The dedupe keys that come from more than one kind and key, each with the pairs it comes from. */
function ambiguous(made: Iterable<Made>): Array<[string, string[]]> {
  const from = new Map<string, Set<string>>();
  for (const m of made) {
    const pairs = from.get(m.dedupeKey) ?? new Set<string>();
    pairs.add(JSON.stringify([m.kind, m.key]));
    from.set(m.dedupeKey, pairs);
  }
  return [...from].filter(([, pairs]) => pairs.size > 1).map(([k, pairs]) => [k, [...pairs]]);
}

describe('a dedupe key comes from one kind and one key', () => {
  it('keeps the forms stored before (a repeat of a stored event is still recognised)', () => {
    const owner = scopeOfApp('shop');
    const digest = DIGESTS[0]!;
    expect(mobileIdDedupeKey(null, 'r1')).toBe('mobile-id:r1');
    expect(mobileIdDedupeKey(owner, 'r1')).toBe('mobile-id@app:shop:r1');
    expect(callbackDedupeKey(verificationDedupePrefix(owner, 'e1'), digest)).toBe(`verification@app:shop:e1:${digest}`);
    expect(callbackDedupeKey(identificationDedupePrefix('i1'), digest)).toBe(`identification:i1:${digest}`);
    expect(provisioningDedupeKey('p1', 3)).toBe('provisioning/p1/3');
  });

  it('mobile-ID: mobile-id@<owner>:<auth_req_id>, or mobile-id:<auth_req_id> for a shared token', () => {
    expect(ambiguous(mobileId())).toEqual([]);
  });

  it('verification: verification@<owner>:<externalId>:<digest>', () => {
    expect(ambiguous(verification())).toEqual([]);
  });

  it('identification: identification:<id>:<digest>', () => {
    expect(ambiguous(identification())).toEqual([]);
  });

  it('provisioning: provisioning/<id>/<revision>', () => {
    expect(ambiguous(provisioning())).toEqual([]);
  });

  it('no two kinds share a dedupe key', () => {
    expect(ambiguous([...mobileId(), ...verification(), ...identification(), ...provisioning()])).toEqual([]);
  });

  it('the check finds a form that splits two ways (an owner that could hold a colon)', () => {
    // What the checks above would report if an owner scope could hold a `:` after its prefix: the same dedupe key
    // from two external ids, which the one unique index would no longer refuse.
    const loose: Made[] = [
      { kind: 'verification', key: 'b:x', dedupeKey: callbackDedupeKey(verificationDedupePrefix('app:a', 'b:x'), 'f') },
      { kind: 'verification', key: 'x', dedupeKey: callbackDedupeKey(verificationDedupePrefix('app:a:b', 'x'), 'f') },
    ];
    expect(ambiguous(loose)).toHaveLength(1);
  });
});
