// Kubernetes resource quantities ("4", "3920m", "1.5", "2k", "1e3", "1Ki") as exact nano-units,
// so CPU can be summed over nodes without float error and rounded up once, as CPA does.

/** A quantity string that does not follow the Kubernetes grammar. */
export class QuantityError extends Error {
  readonly code = 'AUTOSCALE_ERR_QUANTITY';
  constructor(text: string, why: string) {
    super(`quantity "${text}": ${why}`);
    this.name = 'QuantityError';
  }
}

const NANO_PER_UNIT = 1_000_000_000n;

/** Power-of-ten exponent of each decimal SI suffix. */
const DECIMAL_SUFFIX: Readonly<Record<string, number>> = {
  n: -9,
  u: -6,
  m: -3,
  '': 0,
  k: 3,
  M: 6,
  G: 9,
  T: 12,
  P: 15,
  E: 18,
};
/** Power-of-1024 exponent of each binary SI suffix. */
const BINARY_SUFFIX: Readonly<Record<string, number>> = { Ki: 1, Mi: 2, Gi: 3, Ti: 4, Pi: 5, Ei: 6 };

// sign, integer digits, fraction digits, suffix (SI letters or an e/E exponent)
const QUANTITY = /^([+-]?)(\d*)(?:\.(\d*))?(.*)$/;
const EXPONENT = /^[eE]([+-]?\d{1,3})$/;

/**
 * The quantity in units of 10⁻⁹, rounded up (Kubernetes also rounds sub-nano values up).
 * Throws QuantityError for anything the API server would not have accepted.
 */
export function parseQuantityNanos(text: string): bigint {
  if (text.length === 0 || text.length > 64) throw new QuantityError(text, 'must be 1 to 64 characters');
  const m = QUANTITY.exec(text);
  if (!m) throw new QuantityError(text, 'not a number');
  const [, sign, intDigits = '', fracDigits = '', suffix = ''] = m;
  if (intDigits === '' && fracDigits === '') throw new QuantityError(text, 'no digits');
  let exp10: number;
  let exp1024 = 0;
  if (suffix in DECIMAL_SUFFIX) exp10 = DECIMAL_SUFFIX[suffix] ?? 0;
  else if (suffix in BINARY_SUFFIX) {
    exp10 = 0;
    exp1024 = BINARY_SUFFIX[suffix] ?? 0;
  } else {
    const e = EXPONENT.exec(suffix);
    if (!e) throw new QuantityError(text, `unknown suffix "${suffix}" (use n u m k M G T P E, Ki..Ei, or eN)`);
    exp10 = Number(e[1]);
  }
  // value = digits × 10^(exp10 − fraction length) × 1024^exp1024, in nanos: × 10^9.
  let numerator = BigInt(intDigits + fracDigits || '0') * 1024n ** BigInt(exp1024);
  let denominator = 1n;
  const shift = exp10 - fracDigits.length + 9;
  if (shift >= 0) numerator *= 10n ** BigInt(shift);
  else denominator = 10n ** BigInt(-shift);
  const nanos = (numerator + denominator - 1n) / denominator;
  return sign === '-' ? -nanos : nanos;
}

/** Whole units of a nano-unit sum, rounded up: 3 × 3920m = 11.76 → 12. */
export function ceilUnits(nanos: bigint): number {
  if (nanos <= 0n) return 0;
  return Number((nanos + NANO_PER_UNIT - 1n) / NANO_PER_UNIT);
}
