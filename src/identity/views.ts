import { rfmAnswer, statusOf } from './wire.js';

/**
 * What resolvers read of identity wire bodies: the few answers the schema exposes as typed fields, so
 * that graphql/ never touches a wire shape.
 */
export type { VerificationResultItem } from './wire.js';

/** The status a verification callback reports, when its body says one. */
export function callbackStatus(payload: unknown): string | null {
  return statusOf(payload);
}

/** The yes/no answer of an rfm check when the response says it plainly, else null. */
export function rfmInCatalog(result: unknown): boolean | null {
  return rfmAnswer(result);
}
