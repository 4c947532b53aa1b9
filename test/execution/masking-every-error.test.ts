import { Writable } from 'node:stream';
import fc from 'fast-check';
import { GraphQLError, locatedError } from 'graphql';
import { describe, expect, it } from 'vitest';

import { ErrorCode, GatewayError } from '../../src/errors.js';
import { deliverable, formatError, HttpPresenter } from '../../src/execution/present.js';
import type { GraphQLContext } from '../../src/graphql/context.js';
import { createLogger } from '../../src/logger.js';

function capture() {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      lines.push(chunk.toString());
      cb();
    },
  });
  return { logger: createLogger({ level: 'debug', destination }), logs: () => lines.join('') };
}

const secret = fc
  .stringMatching(/^[A-Za-z0-9]{12,40}$/)
  .map((s) => `connect ECONNREFUSED 127.0.0.1:5432 password=${s}`);

describe('an unexpected error never reaches the client', () => {
  it('a plain error from a resolver or a store, with the INTERNAL_SERVER_ERROR code Apollo fills in, is masked and logged', () => {
    fc.assert(
      fc.property(secret, (message) => {
        const { logger, logs } = capture();
        const error = locatedError(new Error(message), undefined, ['createProject']);
        // Apollo's path: errorNormalize.js fills in INTERNAL_SERVER_ERROR before formatError runs.
        const formatted = { ...error.toJSON(), extensions: { code: ErrorCode.INTERNAL_SERVER_ERROR } };
        const out = formatError(formatted, error, logger);
        expect(JSON.stringify(out)).not.toContain(message);
        expect(out).toEqual({
          message: 'Internal server error',
          path: ['createProject'],
          extensions: { code: 'INTERNAL_SERVER_ERROR' },
        });
        expect(logs()).toContain(message.split('=')[1]);
      }),
      { numRuns: 25 },
    );
  });

  it('a plain error carrying a contract code in its extensions-like fields is masked too (only GraphQLErrors raised on purpose pass)', () => {
    fc.assert(
      fc.property(secret, (message) => {
        const { logger } = capture();
        const error = locatedError(new Error(message), undefined, ['project']);
        const formatted = { ...error.toJSON(), extensions: { code: ErrorCode.NOT_FOUND } };
        expect(JSON.stringify(formatError(formatted, error, logger))).not.toContain(message);
      }),
      { numRuns: 25 },
    );
  });

  it('the direct path (HttpPresenter) masks a plain error in an executed result', () => {
    fc.assert(
      fc.property(secret, (message) => {
        const { logger, logs } = capture();
        const presenter = new HttpPresenter(
          { formatError: (f, e) => formatError(f, e, logger), includeStacktraceInErrorResponses: false },
          false,
        );
        const answer = presenter.executed(
          { data: { createProject: null }, errors: [locatedError(new Error(message), undefined, ['createProject'])] },
          { warnings: [] } as unknown as GraphQLContext,
        );
        expect(JSON.stringify(answer.result)).not.toContain(message);
        expect(answer.result.errors?.[0]?.extensions?.code).toBe('INTERNAL_SERVER_ERROR');
        expect(logs()).toContain(message.split('=')[1]);
      }),
      { numRuns: 25 },
    );
  });

  it('a streaming transport (graphql-ws, SSE, MCP) masks a plain error in a result and logs it', () => {
    fc.assert(
      fc.property(secret, (message) => {
        const { logger, logs } = capture();
        const out = deliverable(
          { data: null, errors: [locatedError(new Error(message), undefined, ['heartbeat'])] },
          undefined,
          logger,
        );
        expect(JSON.stringify(out)).not.toContain(message.split('=')[1]);
        expect(out.errors?.[0]?.extensions?.code).toBe('INTERNAL_SERVER_ERROR');
        expect(logs()).toContain(message.split('=')[1]);
      }),
      { numRuns: 25 },
    );
  });

  it('an error the gateway raised on purpose still passes as it is', () => {
    const { logger } = capture();
    const error = locatedError(new GatewayError(ErrorCode.NOT_FOUND, 'no project p-1'), undefined, ['project']);
    expect(formatError(error.toJSON(), error, logger).message).toBe('no project p-1');
    const own = new GraphQLError('bad', { extensions: { code: ErrorCode.BAD_USER_INPUT } });
    expect(formatError(own.toJSON(), own, logger).message).toBe('bad');
  });

  it("graphql-js's own error in an execution is masked and logged with the request id; its refusal of a request passes", () => {
    const { logger, logs } = capture();
    const serialize = new GraphQLError('Enum "FirewallAction" cannot represent value: "DENY"');
    const located = locatedError(serialize, undefined, ['projects', 0, 'networks', 0, 'defaultFirewallAction']);
    const formatted = { ...located.toJSON(), extensions: { code: ErrorCode.INTERNAL_SERVER_ERROR } };
    expect(formatError(formatted, located, logger, false, 'req-1')).toEqual({
      message: 'Internal server error',
      path: ['projects', 0, 'networks', 0, 'defaultFirewallAction'],
      extensions: { code: 'INTERNAL_SERVER_ERROR' },
    });
    const line = JSON.parse(logs()) as { requestId: string; err: { message: string } };
    expect(line).toMatchObject({ requestId: 'req-1', err: { message: serialize.message } });
    const syntax = new GraphQLError('Syntax Error: Expected Name, found <EOF>.');
    expect(formatError(syntax.toJSON(), syntax, logger).message).toBe(syntax.message);
  });
});
