// Reading the typed fields of a params JSON object the way Go's json.Unmarshal fills a struct
// (CPA's behaviour): key match exact first, then case-insensitive; null or absent keeps the
// zero value; a value of the wrong type is an error; unknown keys are ignored (and reported).
import { isRecord } from '../kube/types.js';

/** A ConfigMap or --default-params value that cannot drive scaling; nothing is changed. */
export class ParamsError extends Error {
  readonly code = 'AUTOSCALE_ERR_PARAMS';
  constructor(message: string) {
    super(message);
    this.name = 'ParamsError';
  }
}

export class ParamsObject {
  readonly #obj: Record<string, unknown>;
  readonly #used = new Set<string>();

  private constructor(
    obj: Record<string, unknown>,
    readonly mode: string,
  ) {
    this.#obj = obj;
  }

  /** Parse the JSON text of one mode's params; `null` is an empty object, as in Go. */
  static parse(text: string, mode: string): ParamsObject {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      throw new ParamsError(`could not parse parameters (${err instanceof Error ? err.message : String(err)})`);
    }
    if (value === null) return new ParamsObject({}, mode);
    if (!isRecord(value))
      throw new ParamsError(
        `could not parse parameters (${mode} params must be a JSON object, got ${JSON.stringify(value)})`,
      );
    return new ParamsObject(value, mode);
  }

  /** A float64 field; 0 when absent. */
  number(field: string): number {
    const v = this.#get(field);
    if (v === undefined) return 0;
    if (typeof v !== 'number') throw this.#typeError(field, v, 'a number');
    return v;
  }

  /** An int field; 0 when absent. */
  int(field: string): number {
    const v = this.number(field);
    if (!Number.isSafeInteger(v)) throw this.#typeError(field, v, 'an integer');
    return v;
  }

  bool(field: string): boolean {
    const v = this.#get(field);
    if (v === undefined) return false;
    if (typeof v !== 'boolean') throw this.#typeError(field, v, 'true or false');
    return v;
  }

  /** A list of [int, int] pairs; [] when absent. Each pair is checked by the caller. */
  intPairs(field: string): Array<[number, number]> {
    const v = this.#get(field);
    if (v === undefined) return [];
    if (!Array.isArray(v)) throw this.#typeError(field, v, 'a list of [threshold, replicas] pairs');
    return v.map((entry: unknown) => {
      if (!Array.isArray(entry) || entry.length !== 2)
        throw new ParamsError(`invalid element ${JSON.stringify(entry)} in ${field}: must be [threshold, replicas]`);
      const [a, b] = entry as unknown[];
      if (!Number.isSafeInteger(a) || !Number.isSafeInteger(b))
        throw new ParamsError(`invalid element ${JSON.stringify(entry)} in ${field}: both values must be integers`);
      return [a as number, b as number];
    });
  }

  /** Keys that matched no field read so far: typos the user should hear about. */
  unknownKeys(): string[] {
    return Object.keys(this.#obj).filter((k) => !this.#used.has(k));
  }

  #get(field: string): unknown {
    let key: string | undefined = field in this.#obj ? field : undefined;
    if (key === undefined) {
      const lower = field.toLowerCase();
      key = Object.keys(this.#obj).find((k) => k.toLowerCase() === lower);
    }
    if (key === undefined) return undefined;
    this.#used.add(key);
    const v = this.#obj[key];
    return v === null ? undefined : v;
  }

  #typeError(field: string, v: unknown, want: string): ParamsError {
    return new ParamsError(`could not parse parameters (${field}: ${JSON.stringify(v)} is not ${want})`);
  }
}
