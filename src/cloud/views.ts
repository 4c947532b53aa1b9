import type { LedgerRecord } from '../store/ledger.js';
import { addressFromResponse } from './wire.js';

/** The IPv4 address the upstream gave an IP address resource, read from its stored creation response. */
export function ipAddressOf(record: LedgerRecord): string | null {
  return addressFromResponse(record.response)?.address ?? null;
}
