// The primary <-> worker control messages (serve.ts). Every message has a `type` in the
// clusterdns: namespace, so other streams (the kubernetes relay, metrics, a query handed to
// the worker that owns it) share the channel and each listener takes only its own.

import type { Worker } from 'node:cluster';
import type { ConfigSource } from './runtime.js';

/** Primary -> worker: one step of a configuration change (see serve.ts for the protocol). */
export interface ConfigMessage {
  type: 'clusterdns:config';
  op: 'start' | 'prepare' | 'commit' | 'open' | 'abort';
  /** The change this step belongs to. */
  gen: number;
  /** The validated Corefile text and its imports (start, prepare). */
  source?: ConfigSource;
}

/** Worker -> primary: a step is done (`error` when it failed). */
export interface ConfigAck {
  type: 'clusterdns:config-ack';
  op: 'prepare' | 'commit';
  gen: number;
  error?: string;
}

/** Worker -> primary: the worker asks for its configuration at start. */
export interface ConfigRequest {
  type: 'clusterdns:config-request';
}

/** Worker -> primary: SIGUSR1 or a plugin asked for a reload; the primary does it for all. */
export interface ReloadRequest {
  type: 'clusterdns:reload-request';
  reason: string;
}

/** Worker -> primary: the worker serves (`gen`: the configuration it runs). */
export interface WorkerState {
  type: 'clusterdns:worker';
  state: 'ready';
  gen: number;
}

/** Worker -> primary: the server must stop (a worker that cannot start, the loop plugin). */
export interface WorkerFatal {
  type: 'fatal';
  message?: string;
}

export type WorkerMessage = ConfigAck | ConfigRequest | ReloadRequest | WorkerState | WorkerFatal;

/** Sends to a worker unless it is gone (a send to a dead worker throws). */
export function sendTo(w: Worker, m: ConfigMessage): void {
  if (w.isConnected()) w.send(m);
}
