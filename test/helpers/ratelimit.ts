import { request } from 'undici';

import type { TestGateway } from './gateway.js';

export const APP_A = 'app-a-key-0123456789';
export const APP_B = 'app-b-key-9876543210';

export const CREATE_PROJECT =
  'mutation($name: String!) { createProject(input: { name: $name, description: "rate limit test" }) { project { id } } }';
export const READ_PROJECTS = '{ projects { id } }';

export interface RawResponse {
  status: number;
  retryAfter: string | undefined;
  body: { data?: Record<string, any> | null; errors?: Array<{ message: string; extensions?: Record<string, any> }> };
}

/** POST /graphql with the status and Retry-After header visible (the shared helper hides headers). */
export async function post(
  gw: TestGateway,
  key: string,
  query: string,
  variables: Record<string, unknown> = {},
): Promise<RawResponse> {
  const res = await request(`${gw.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ query, variables }),
  });
  const header = res.headers['retry-after'];
  return {
    status: res.statusCode,
    retryAfter: Array.isArray(header) ? header[0] : header,
    body: (await res.body.json()) as RawResponse['body'],
  };
}

/** Project creations the cloud sandbox received (each attempt, replays included). */
export function projectCreationsUpstream(gw: TestGateway): number {
  return gw.gateway.sandbox.cloud!.requests.filter(
    (r) => r.method === 'POST' && r.path === '/apis/projects/public/v4/projects',
  ).length;
}
