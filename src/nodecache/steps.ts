// A sequence of commands written once as a generator and driven either asynchronously (the
// normal path) or synchronously (the process 'exit' hook, after a fatal error).

import type { CommandResult, CommandRunner, SyncCommandRunner } from '../sys/exec.js';

export interface Step {
  file: string;
  args: string[];
  /** Standard input (iptables-restore's batch). */
  input?: string;
}

/** Yields the commands to run; each yield receives that command's result. */
export type Steps<T> = Generator<Step, T, CommandResult>;

export async function runSteps<T>(steps: Steps<T>, run: CommandRunner): Promise<T> {
  let next = steps.next();
  while (!next.done) {
    const r = await run(next.value.file, next.value.args, next.value.input);
    next = steps.next(r);
  }
  return next.value;
}

export function runStepsSync<T>(steps: Steps<T>, run: SyncCommandRunner): T {
  let next = steps.next();
  while (!next.done) next = steps.next(run(next.value.file, next.value.args, next.value.input));
  return next.value;
}
