// negotiator ships no types (Apollo Server depends on it for the same negotiation); only what src/server uses.
declare module 'negotiator' {
  export default class Negotiator {
    constructor(request: { headers: { accept?: string | undefined } });
    mediaType(available?: readonly string[]): string | undefined;
  }
}
