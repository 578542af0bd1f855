// The scaling params in the ConfigMap: exactly one data key, `linear` or `ladder`, whose value
// is that mode's JSON. The same parser checks --default-params at start-up.
import type { ClusterStatus } from './cluster.js';
import { ladderReplicas, parseLadderParams, type LadderParams } from './ladder.js';
import { linearReplicas, parseLinearParams, type LinearParams } from './linear.js';
import { ParamsError, ParamsObject } from './params-json.js';

export { ParamsError } from './params-json.js';

export type ScalingParams = { mode: 'linear'; params: LinearParams } | { mode: 'ladder'; params: LadderParams };

export interface ParsedParams {
  scaling: ScalingParams;
  /** Keys in the mode's JSON that no param reads (ignored, as CPA does; worth a warning). */
  unknownKeys: string[];
}

/** ConfigMap `data` → params; ParamsError says what is wrong. */
export function parseScalingParams(data: Readonly<Record<string, string>>): ParsedParams {
  const keys = Object.keys(data);
  if (keys.length !== 1) {
    throw new ParamsError(
      `expected exactly one data key, "linear" or "ladder"; found ${keys.length === 0 ? 'none' : keys.map((k) => `"${k}"`).join(', ')}`,
    );
  }
  const mode = keys[0] ?? '';
  const text = data[mode] ?? '';
  if (mode === 'linear') {
    const obj = ParamsObject.parse(text, mode);
    try {
      return { scaling: { mode, params: parseLinearParams(obj) }, unknownKeys: obj.unknownKeys() };
    } catch (err) {
      throw prefixed('linear', err);
    }
  }
  if (mode === 'ladder') {
    const obj = ParamsObject.parse(text, mode);
    try {
      return { scaling: { mode, params: parseLadderParams(obj) }, unknownKeys: obj.unknownKeys() };
    } catch (err) {
      throw prefixed('ladder', err);
    }
  }
  throw new ParamsError(`unknown mode "${mode}": the data key must be "linear" or "ladder"`);
}

function prefixed(mode: string, err: unknown): Error {
  return err instanceof ParamsError ? new ParamsError(`error parsing ${mode} params: ${err.message}`) : (err as Error);
}

export function expectedReplicas(s: ScalingParams, status: ClusterStatus): number {
  return s.mode === 'linear' ? linearReplicas(s.params, status) : ladderReplicas(s.params, status);
}

/**
 * `--default-params` JSON → ConfigMap data, as CPA stores it: each top-level key's value
 * re-encoded as compact JSON with object keys sorted (Go's encoding of a map).
 */
export function defaultParamsData(json: string): Record<string, string> {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (err) {
    throw new ParamsError(`--default-params: not JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ParamsError('--default-params: must be a JSON object such as {"linear":{...}}');
  const data: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) data[k] = JSON.stringify(sortKeys(v));
  return data;
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (typeof v !== 'object' || v === null) return v;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v).sort()) out[k] = sortKeys((v as Record<string, unknown>)[k]);
  return out;
}
