import { describe, expect, it } from 'vitest';

import {
  externalIdOf,
  identificationRequest,
  parseRegistration,
  parseResults,
  registrationRequest,
  resultsRequest,
  rfmAnswer,
  statusOf,
} from '../../src/identity/wire.js';

describe('verification wire names', () => {
  it('sends the registration with workflowId, verificationExternalId, applicant and callbackUrl, omitting what is absent', () => {
    expect(
      registrationRequest({ workflowId: 'wf', applicant: { a: 1 }, externalId: 'x', callbackUrl: 'https://gw/cb' }),
    ).toEqual({
      workflowId: 'wf',
      verificationExternalId: 'x',
      applicant: { a: 1 },
      callbackUrl: 'https://gw/cb',
    });
    expect(registrationRequest({ workflowId: 'wf', applicant: {}, externalId: null, callbackUrl: null })).toEqual({
      workflowId: 'wf',
      applicant: {},
    });
  });

  it('sends the results ids as an array under verificationExternalId', () => {
    expect(resultsRequest(['a', 'b'])).toEqual({ verificationExternalId: ['a', 'b'] });
  });

  it.each([
    [{ verificationExternalId: 'v1' }, 'v1'],
    [{ externalId: 'v2' }, 'v2'],
    [{ id: 'v3' }, 'v3'],
    [{ id: 42 }, '42'],
    // Beyond 2^53 JSON.parse rounds: 12345678901234567890 would read as 12345678901234567000, another id.
    [{ id: 12345678901234567890 }, null],
    [{ id: 1.5 }, null],
    [{ data: { verificationExternalId: 'v4' } }, 'v4'],
    [{ verification: { externalId: 'v5' } }, 'v5'],
    [{ verificationExternalId: 'v6', id: 'not-this' }, 'v6'],
    [{ status: 'OK' }, null],
    [['v7'], null],
  ])('reads the external id of %j as %s', (body, id) => {
    expect(externalIdOf(body)).toBe(id);
  });

  it('reads a registration answer: id, status (top level or in jobResults) and jobResults as they are', () => {
    expect(parseRegistration({ externalId: 'e', jobResults: { status: 'ACCEPTED', jobs: [] } })).toEqual({
      externalId: 'e',
      status: 'ACCEPTED',
      jobResults: { status: 'ACCEPTED', jobs: [] },
    });
    expect(parseRegistration({ id: 'e', status: 'QUEUED', jobResults: [{ job: 'x' }] })).toEqual({
      externalId: 'e',
      status: 'QUEUED',
      jobResults: [{ job: 'x' }],
    });
    expect(parseRegistration(null)).toEqual({ externalId: null, status: null, jobResults: null });
  });

  it('maps results back to their ids from a list, a bare array or an object keyed by id', () => {
    const fromList = parseResults({
      results: [
        { verificationExternalId: 'a', status: 'COMPLETED' },
        { externalId: 'b', state: 'IN_PROGRESS' },
        { nothing: true },
      ],
    })!;
    expect([...fromList.keys()]).toEqual(['a', 'b']);
    expect(fromList.get('b')).toEqual({
      externalId: 'b',
      status: 'IN_PROGRESS',
      data: { externalId: 'b', state: 'IN_PROGRESS' },
    });
    expect([...parseResults([{ id: 'c' }])!.keys()]).toEqual(['c']);
    expect([...parseResults({ items: [{ id: 'd' }] })!.keys()]).toEqual(['d']);
    const keyed = parseResults({ results: { e: { status: 'COMPLETED' } } })!;
    expect(keyed.get('e')).toEqual({ externalId: 'e', status: 'COMPLETED', data: { status: 'COMPLETED' } });
    // No list where the gateway looks: not "none of them", but an answer it cannot read (null).
    expect(parseResults('unexpected')).toBeNull();
    for (const unreadable of [{}, null, 7, { records: [] }, { results: null }, { results: 'x' }])
      expect(parseResults(unreadable)).toBeNull();
    // A list found, empty or without the ids, is an answer: none of them.
    for (const empty of [[], { results: [] }, { items: {} }, { results: [{ nothing: true }] }])
      expect(parseResults(empty)).toEqual(new Map());
    // A guessed name holding no list is skipped for the next.
    expect([...parseResults({ results: null, items: [{ id: 'f' }] })!.keys()]).toEqual(['f']);
  });

  it('reads a status from status, state or verificationStatus', () => {
    expect(statusOf({ state: 'DONE' })).toBe('DONE');
    expect(statusOf({ verificationStatus: 'DONE' })).toBe('DONE');
    expect(statusOf({})).toBeNull();
  });

  it('reads the rfm answer when it is a plain boolean', () => {
    expect(rfmAnswer({ isInCatalog: true })).toBe(true);
    expect(rfmAnswer({ inCatalog: false })).toBe(false);
    expect(rfmAnswer(true)).toBe(true);
    expect(rfmAnswer({ matches: [] })).toBeNull();
  });

  it('sends only the identification fields that are given', () => {
    expect(
      identificationRequest({
        workflowId: 'wf',
        applicantExternalId: null,
        linkLifetimeInMinutes: 5,
        redirectUrl: undefined,
      }),
    ).toEqual({
      workflowId: 'wf',
      linkLifetimeInMinutes: 5,
    });
  });
});
