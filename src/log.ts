// CoreDNS-style log lines: "[INFO] plugin/NAME: message". Plain writes, no JSON, no library:
// a fixed one-line format needs no serializer, and the hot path pays only for a string concat.

import cluster from 'node:cluster';
import { registerCollected } from './metrics/collected.js';
import { withRegistry } from './metrics/registry.js';

export type Level = 'DEBUG' | 'INFO' | 'WARNING' | 'ERROR' | 'FATAL';

export interface Logger {
  debug(msg: string): void;
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string): void;
  fatal(msg: string): void;
  /** Writes a raw line (the log plugin's query lines). */
  line(text: string): void;
}

/** Bytes of log output waiting for a slow stdout before lines are dropped (not queued). */
export const LOG_BACKLOG_BYTES = 1 << 20;

/** Lines dropped since the process started, for clusterdns_log_dropped_lines_total. */
let droppedTotal = 0;
/** Lines dropped since the current backlog began; -1 while stdout keeps up. */
let droppedNow = -1;

// stdout is the process's: so is this counter, in the process registry.
withRegistry((registry) =>
  registerCollected(
    registry,
    'clusterdns_log_dropped_lines_total',
    'Log lines dropped because stdout could not keep up (its reader stalled or was too slow).',
    'counter',
    () => [{ labels: {}, value: droppedTotal }],
  ),
);

function onStdoutDrained(): void {
  process.stdout.write(`[WARNING] log output caught up: ${droppedNow} lines dropped while stdout could not keep up\n`);
  droppedNow = -1;
}

/** Writes to stdout unless LOG_BACKLOG_BYTES already wait there: then the line is counted and dropped. */
function boundedStdout(text: string): void {
  const out = process.stdout;
  if (droppedNow < 0) {
    if (out.writableLength < LOG_BACKLOG_BYTES) {
      out.write(text);
      return;
    }
    droppedNow = 0;
    // Past the stream's high-water mark a 'drain' is due once the backlog is written.
    out.once('drain', onStdoutDrained);
    out.write(`[WARNING] log output cannot keep up: dropping lines until stdout drains\n`);
  }
  countDroppedLine();
}

/** True while stdout is backlogged: a caller may count a line as dropped without formatting it. */
export function logBacklogged(): boolean {
  return droppedNow >= 0 && sink === boundedStdout;
}

/** Counts a line the caller did not format because logBacklogged() said it would be dropped. */
export function countDroppedLine(): void {
  droppedNow++;
  droppedTotal++;
}

let debugEnabled = false;
let sink: (text: string) => void = boundedStdout;

export function setDebug(on: boolean): void {
  debugEnabled = on;
}

/** For tests: capture log output. Returns a function that restores the previous sink. */
export function setLogSink(fn: (text: string) => void): () => void {
  const prev = sink;
  sink = fn;
  return () => {
    sink = prev;
  };
}

export function logger(name: string): Logger {
  const prefix = name ? `plugin/${name}: ` : '';
  const emit = (level: Level, msg: string) => sink(`[${level}] ${prefix}${msg}\n`);
  return {
    debug: (m) => {
      if (debugEnabled) emit('DEBUG', m);
    },
    info: (m) => emit('INFO', m),
    warn: (m) => emit('WARNING', m),
    error: (m) => emit('ERROR', m),
    fatal: (m) => emit('FATAL', m),
    line: (t) => sink(t + '\n'),
  };
}

export const coreLog = logger('');

/** Distinct warnings remembered by warnEachOnce before it starts afresh. */
const MAX_WARNINGS_REMEMBERED = 10_000;

/**
 * `WHAT: WHY` warnings, each distinct one logged once: a relist would repeat them all. The
 * memory is bounded; past it, it starts afresh (a line may then be said again).
 */
export function warnEachOnce(log: Logger): (what: string, why: string) => void {
  const seen = new Set<string>();
  return (what, why) => {
    const line = `${what}: ${why}`;
    if (seen.has(line)) return;
    if (seen.size >= MAX_WARNINGS_REMEMBERED) seen.clear();
    seen.add(line);
    log.warn(line);
  };
}

/** A logger for a role other than the server: "[INFO] ROLE: message". */
export function roleLogger(role: string): Logger {
  const base = logger('');
  const p = (m: string) => `${role}: ${m}`;
  return {
    debug: (m) => base.debug(p(m)),
    info: (m) => base.info(p(m)),
    warn: (m) => base.warn(p(m)),
    error: (m) => base.error(p(m)),
    fatal: (m) => base.fatal(p(m)),
    line: (t) => base.line(t),
  };
}

/** Ends a subcommand with `clusterdns ROLE: message` on stderr and the exit code. */
export function exitWith(role: string, code: number, message: string): never {
  process.stderr.write(`clusterdns ${role}: ${message}\n`);
  process.exit(code);
}

/**
 * True in the one process that speaks for the server: the only process, or the first worker
 * (so N workers that load the same configuration log its warnings once, not N times).
 */
export function leadProcess(): boolean {
  return !cluster.isWorker || cluster.worker?.id === 1;
}
