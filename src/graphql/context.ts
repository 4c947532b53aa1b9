// Placeholder: the real context is filled in by the server foundation.
export interface GraphQLContext {
  requestId: string;
}
