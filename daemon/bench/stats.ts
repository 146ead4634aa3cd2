/** Summaries of timing samples: percentiles by nearest rank, so every figure is a measured sample. */

export interface Summary {
  n: number;
  p50: number;
  p90: number;
  min: number;
  max: number;
  mean: number;
}

/** The nearest-rank percentile (0 < p <= 100) of `samples`; NaN for no samples. */
export function percentile(samples: readonly number[], p: number): number {
  if (!(p > 0 && p <= 100)) throw new RangeError(`percentile ${p} is outside (0, 100]`);
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.max(0, rank - 1)]!;
}

export function summarize(samples: readonly number[]): Summary {
  const n = samples.length;
  if (n === 0) return { n: 0, p50: NaN, p90: NaN, min: NaN, max: NaN, mean: NaN };
  let min = Infinity;
  let max = -Infinity;
  let sum = 0;
  for (const s of samples) {
    if (s < min) min = s;
    if (s > max) max = s;
    sum += s;
  }
  return { n, p50: percentile(samples, 50), p90: percentile(samples, 90), min, max, mean: sum / n };
}

/** Milliseconds elapsed since a `process.hrtime.bigint()` reading. */
export function msSince(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1e6;
}

/** Formats a number with a fixed number of decimals, or `-` when it is not a number. */
export function fmt(value: number, decimals = 1): string {
  return Number.isFinite(value) ? value.toFixed(decimals) : '-';
}
