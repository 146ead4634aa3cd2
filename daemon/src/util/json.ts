/**
 * JSON text for values holding bigints (nanosecond timestamps exceed 2^53), written as plain JSON numbers.
 */
export function stringifyWithBigInt(value: unknown): string {
  return JSON.stringify(value, (_key, v) => (typeof v === 'bigint' ? `\u0000big:${v}` : v)).replace(
    /"\\u0000big:(-?\d+)"/g,
    '$1',
  );
}

/** Nanoseconds since the epoch, as a bigint. */
export function nowNano(): bigint {
  return BigInt(Date.now()) * 1_000_000n + (process.hrtime.bigint() % 1_000_000n);
}

/** RFC 3339 with nine fractional digits, as Docker writes its timestamps. */
export function rfc3339Nano(nano: bigint): string {
  const ms = Number(nano / 1_000_000n);
  const frac = (nano % 1_000_000_000n).toString().padStart(9, '0');
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, `.${frac}Z`);
}

/** The zero time as Docker prints it for a timestamp that was never set. */
export const ZERO_TIME = '0001-01-01T00:00:00Z';

/**
 * Parses a timestamp as the API accepts it in since/until: Unix seconds with an optional fraction
 * ("1700000000.123456789"), or RFC 3339. Returns nanoseconds, or undefined when it is not a timestamp.
 */
export function parseTimestamp(text: string): bigint | undefined {
  const unix = /^(\d+)(?:\.(\d{1,9}))?$/.exec(text);
  if (unix) return BigInt(unix[1]) * 1_000_000_000n + BigInt((unix[2] ?? '').padEnd(9, '0') || '0');
  const rfc = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/.exec(text);
  if (rfc) {
    const secs = Date.parse(`${rfc[1]}${rfc[3]}`);
    if (Number.isNaN(secs)) return undefined;
    return BigInt(secs) * 1_000_000n + BigInt((rfc[2] ?? '').padEnd(9, '0') || '0');
  }
  return undefined;
}
