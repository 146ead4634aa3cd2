/** A small leveled logger writing one line per record to stderr, like dockerd's text format. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'fatal';
const order: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, fatal: 50 };
let threshold = order.info;

export function setLogLevel(level: LogLevel): void {
  threshold = order[level];
}

export function isLogLevel(value: string): value is LogLevel {
  return value in order;
}

function emit(level: LogLevel, msg: string, fields?: Record<string, unknown>): void {
  if (order[level] < threshold) return;
  let line = `time="${new Date().toISOString()}" level=${level} msg=${JSON.stringify(msg)}`;
  if (fields) for (const [k, v] of Object.entries(fields)) line += ` ${k}=${JSON.stringify(v)}`;
  process.stderr.write(line + '\n');
}

export const log = {
  debug: (msg: string, fields?: Record<string, unknown>) => emit('debug', msg, fields),
  info: (msg: string, fields?: Record<string, unknown>) => emit('info', msg, fields),
  warn: (msg: string, fields?: Record<string, unknown>) => emit('warn', msg, fields),
  error: (msg: string, fields?: Record<string, unknown>) => emit('error', msg, fields),
  enabled: (level: LogLevel) => order[level] >= threshold,
};
