import { setTimeout as sleep } from 'node:timers/promises';

import { ErrorCode, INTERNAL_ERROR_MESSAGE, raisedOnPurpose, StoreUnavailableError } from '../errors.js';
import { logUnexpected, type Logger } from '../logger.js';
import { upstreamKey } from '../upstream/idempotency.js';
import {
  stepIdempotencyKey,
  terminal,
  type PlannedStep,
  type Provisioning,
  type Step,
  type StepError,
} from './model.js';
import type { ProvisioningRecords } from './records.js';

/**
 * The running unit of composite provisioning: runs a plan's steps in order, each a normal cloud mutation
 * under the key UUIDv5(key + step), and stores the provisioning after every step. Steps already DONE or
 * REUSED (a resumed provisioning) are skipped with their resource id, and SKIPPED ones are not written again.
 */
export class ProvisioningRunner {
  /** One entry per provisioning running in this process, removed when it ends. */
  private readonly running = new Map<string, Promise<void>>();
  /** True once the gateway shuts down (stop): a run sends no further step. */
  private stopping = false;
  /** Aborted by `stop`: ends the pause of a run trying again to store the state it stopped in (`endStopped`). */
  private readonly stopped = new AbortController();

  constructor(
    private readonly records: ProvisioningRecords,
    /** The takeover time: a live run touches its row every third of it. */
    private readonly staleMs: number,
    /** The gateway's clock: each stored state's updatedAt, which a resuming call judges on it. */
    private readonly now: () => number = () => Date.now(),
  ) {}

  /** True while this process runs the provisioning. */
  isRunning(id: string): boolean {
    return this.running.has(id);
  }

  /**
   * A refused step's error is stored and streamed as it came: an upstream's refusal that quotes the request it refused
   * has that request's secrets masked where it arrives (src/cloud/client.ts). `logger`: the logger of the request that
   * launched the run (a resume: the resuming request's), whose lines name that request's id. The run goes on after
   * the request's answer, and an operator who reads one of its lines finds the call that started it by that id.
   */
  launch(p: Provisioning, plan: PlannedStep[], logger: Logger): void {
    const run: RunWrites = {
      revision: p.revision,
      stored: p,
      step: -1,
      ended: false,
      takenOver: false,
      queue: Promise.resolve(),
      logger,
    };
    let beating = false;
    const heartbeat = setInterval(
      () => {
        if (beating) return;
        beating = true;
        void this.write(run, async () => {
          if (run.ended || run.takenOver) return;
          if (!(await this.records.touch(p.id, run.revision))) this.takenOver(run, p.id);
        })
          .catch((err: unknown) => logger.warn({ err, provisioning: p.id }, 'provisioning heartbeat failed'))
          .finally(() => (beating = false));
      },
      Math.max(10, Math.floor(this.staleMs / 3)),
    );
    heartbeat.unref();
    const work = this.run(run, p, plan)
      .catch((err: unknown) => this.endStopped(run, p.id, err))
      .finally(async () => {
        clearInterval(heartbeat);
        // A heartbeat already under way ends before the run counts as ended: nothing writes the record after idle().
        await run.queue;
        this.running.delete(p.id);
      });
    this.running.set(p.id, work);
  }

  /** Waits for running provisionings (tests). */
  async idle(): Promise<void> {
    await Promise.all([...this.running.values()]);
  }

  /**
   * Shutdown: each run finishes and stores the step under way, and sends no further one, so that the store closes
   * within the drain rather than after every step of every run. The row stays RUNNING with its heartbeat stopped: the
   * next call with its key resumes it once IDEMPOTENCY_TAKEOVER has passed, as after a crash, on any replica.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.stopped.abort();
    await this.idle();
  }

  /** Runs the steps; returns early, having written nothing more, once a write finds the row taken over. */
  private async run(run: RunWrites, p: Provisioning, plan: PlannedStep[]): Promise<void> {
    const ids = new Map<string, string>();
    let current: Provisioning | null = p;
    for (const [i, planned] of plan.entries()) {
      run.step = i;
      const step = current.steps[i]!;
      if ((step.state === 'DONE' || step.state === 'REUSED') && step.resourceId) {
        ids.set(planned.name, step.resourceId);
        continue;
      }
      // Skipped by the run this one resumes: nothing to write again.
      if (planned.skip && step.state === 'SKIPPED') continue;
      if (planned.skip) {
        current = await this.update(run, current, i, { state: 'SKIPPED' });
        if (!current) return;
        continue;
      }
      if (planned.reuse) {
        ids.set(planned.name, planned.reuse);
        current = await this.update(run, current, i, { state: 'REUSED', resourceId: planned.reuse });
        if (!current) return;
        continue;
      }
      // The step is an ordinary mutation under the caller's scope with key k; the upstream gets
      // upstreamKey(scope, k). Both derive from the provisioning's upstream key, so a resume (after a
      // restart, on another replica) sends every step's same key again. The step's name is the stored one: a resume
      // whose input writes a topic's or a user's name with other spaces around it derives the first call's key.
      if (this.stopping) return;
      const k = stepIdempotencyKey(p, step.name);
      current = await this.update(run, current, i, { state: 'RUNNING', idempotencyKey: upstreamKey(p.scope, k) });
      if (!current) return;
      const before: Provisioning = current;
      try {
        const result = await planned.run!(ids, k, run);
        ids.set(planned.name, result.result.id);
        current = await this.update(run, before, i, {
          state: 'DONE',
          resourceId: result.result.id,
          ...(result.publicAddress !== undefined ? { publicAddress: result.publicAddress } : {}),
        });
        if (!current) return;
      } catch (err) {
        if (!raisedOnPurpose(err))
          logUnexpected(run.logger, err, { provisioning: p.id, step: planned.name }, 'provisioning step failed');
        const error = (run.failure = stepError(err));
        await this.update(run, before, i, { state: 'FAILED', error }, { state: 'FAILED', error });
        return;
      }
    }
    run.step = -1;
    await this.update(run, current, -1, {}, { state: 'SUCCEEDED' });
  }

  /**
   * A run stopped by a write that failed (the store away or unwritable): left so, the row would read RUNNING with
   * nothing running behind it, a subscriber would wait for an end that never comes, and the app's next call with the
   * key would be answered with it, replayed, until IDEMPOTENCY_TAKEOVER. So the run writes the state it stopped in:
   * FAILED with the error on the step under way (SUCCEEDED when only the end was left to write), which the next call
   * with the key resumes at once. While the store is unavailable it tries again for the takeover time, the provisioning
   * still running here meanwhile; past it, at the shutdown (which would otherwise wait for it, past its drain), or after
   * anything else, a call with the key resumes the RUNNING row as a dead replica's. The failure is logged once, with
   * the first error. A terminal state stored whose announcement failed is announced again, on the same terms: a live
   * or resumed subscriber reads only the events, and would wait for that end until its token expires.
   */
  private async endStopped(run: RunWrites, id: string, err: unknown): Promise<void> {
    logUnexpected(run.logger, err, { provisioning: id }, 'provisioning run failed unexpectedly');
    // The step's own failure when it was the write of that failure that did not go through.
    const error = run.failure ?? stepError(err);
    const until = Date.now() + this.staleMs;
    for (;;) {
      if (run.takenOver) return;
      try {
        // Ended: the terminal state is stored and only its announcement failed, as nothing else throws once it is. It
        // is not announced over another call's resume of the FAILED row: that older end, logged after the resume's
        // states, would end a stream resumed from before it.
        if (run.ended) {
          if ((await this.records.read(id))?.revision === run.revision) await this.records.announce(run.stored);
        } else if (run.step === -1) await this.update(run, run.stored, -1, {}, { state: 'SUCCEEDED' });
        else await this.update(run, run.stored, run.step, { state: 'FAILED', error }, { state: 'FAILED', error });
        return;
      } catch (again) {
        if (!(again instanceof StoreUnavailableError) || Date.now() >= until || this.stopping) {
          run.logger.warn(
            { provisioning: id },
            run.ended
              ? 'provisioning end stored but not announced: its live and resumed subscribers wait for it until their tokens expire'
              : 'provisioning state could not be stored after its run stopped: it reads RUNNING until a call with its key resumes it',
          );
          return;
        }
      }
      await sleep(Math.max(10, Math.floor(this.staleMs / 10)), undefined, { signal: this.stopped.signal }).catch(
        () => undefined,
      );
    }
  }

  /**
   * Stores the provisioning with the step at `index` and its top fields changed, as the next revision, and returns it;
   * null, with nothing written or announced, when the row is no longer at the revision this run last wrote (another
   * call resumed it meanwhile: this run was taken for abandoned), and then the run stops.
   */
  private async update(
    run: RunWrites,
    p: Provisioning,
    index: number,
    step: Partial<Step>,
    top: Partial<Pick<Provisioning, 'state' | 'error'>> = {},
  ): Promise<Provisioning | null> {
    const next: Provisioning = {
      ...p,
      ...top,
      steps: p.steps.map((s, i) => (i === index ? { ...s, ...step } : s)),
      revision: p.revision + 1,
      updatedAt: new Date(this.now()),
    };
    await this.write(run, async () => {
      if (run.takenOver) return;
      if (!(await this.records.save(next, run.revision))) return this.takenOver(run, p.id);
      run.revision = next.revision;
      run.stored = next;
      if (terminal(next.state)) run.ended = true;
      // Announced once the row is recorded as this run's: should the event fail (the store gone between the two
      // writes), the run stops and `endStopped` writes over the row as it is, rather than find it at a revision it
      // did not record and take that for another call's takeover, leaving it RUNNING with nothing behind it.
      await this.records.announce(next);
    });
    return run.takenOver ? null : next;
  }

  /** Runs `write` after the run's writes before it: a heartbeat never touches the row between a save and its end. */
  private write(run: RunWrites, write: () => Promise<void>): Promise<void> {
    const done = run.queue.then(write);
    run.queue = done.catch(() => undefined);
    return done;
  }

  private takenOver(run: RunWrites, id: string): void {
    if (run.takenOver) return;
    run.takenOver = true;
    run.logger.warn(
      { provisioning: id, revision: run.revision },
      'provisioning taken over by another call with its key while this run paused: this run stops, writing nothing',
    );
  }
}

/**
 * A step's error as the client reads it (the provisioning's query and progress events): the error's own words only when
 * the gateway raised it on purpose with a code of the contract; anything else says nothing of its own.
 */
function stepError(err: unknown): StepError {
  return raisedOnPurpose(err)
    ? {
        code: err.extensions.code,
        message: err.message,
        status: typeof err.extensions.status === 'number' ? err.extensions.status : null,
      }
    : { code: ErrorCode.INTERNAL_SERVER_ERROR, message: INTERNAL_ERROR_MESSAGE, status: null };
}

/** What one run wrote last, and whether it may write on. */
interface RunWrites {
  /** The revision this run last wrote (its claim's, then each step's); its writes are conditional on it. */
  revision: number;
  /** The state this run last wrote, at `revision`. */
  stored: Provisioning;
  /** The index of the step under way, -1 once only the end is left to write. */
  step: number;
  /** The error of the step that failed, once it did. */
  failure?: StepError;
  /** The run wrote its terminal state: the heartbeat has nothing more to touch. */
  ended: boolean;
  /** A write found the row at another revision: another call resumed the provisioning, and this run stops. */
  takenOver: boolean;
  /** The run's writes (its saves and heartbeats), one after the other. */
  queue: Promise<void>;
  /** The logger of the request that launched this run: each of the run's lines names that request's id. */
  readonly logger: Logger;
}
