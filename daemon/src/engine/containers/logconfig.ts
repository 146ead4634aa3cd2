/**
 * HostConfig.LogConfig at create, as Docker merges and checks it: an empty Type is the daemon's default
 * driver (its Config kept), the options every driver shares (`mode`, `max-buffer-size`) are checked, then the
 * driver (an unknown one is looked up as a plugin, which this engine has none of), then its own options.
 */
import { InvalidParameter } from '../../errors.js';

export const DEFAULT_LOG_DRIVER = 'json-file';

/** Tag and metadata options that every file driver takes. */
const COMMON_OPTIONS = ['env', 'env-regex', 'labels', 'labels-regex', 'tag'];

/** The drivers this engine writes with, and the options each takes (conmon's own k8s-file as json-file). */
const DRIVER_OPTIONS: Record<string, string[]> = {
  'json-file': [...COMMON_OPTIONS, 'max-file', 'max-size', 'compress'],
  'k8s-file': [...COMMON_OPTIONS, 'max-file', 'max-size', 'compress'],
  local: [...COMMON_OPTIONS, 'max-file', 'max-size', 'compress'],
  none: [],
};

/** Options of the logging layer itself, taken by every driver. */
const BUILT_IN_OPTIONS = ['mode', 'max-buffer-size'];

function unknownOption(driver: string, key: string): string {
  return driver === 'local' ? `unknown log opt '${key}' for log driver local` : `unknown log opt '${key}' for ${driver} log driver`;
}

/** A size as Docker's units.RAMInBytes reads it: a number with an optional k, m, g, t or p (and b, i) suffix. */
function isSize(text: string): boolean {
  return /^\s*\d+(\.\d+)?\s*([kmgtp]i?b?|b)?\s*$/i.test(text);
}

/** Answers the LogConfig to record; throws InvalidParameter with Docker's wording for what it refuses. */
export function verifyLogConfig(raw: unknown): { Type: string; Config: Record<string, string> } {
  const given = (raw ?? {}) as { Type?: unknown; Config?: unknown };
  if (given.Type !== undefined && given.Type !== null && typeof given.Type !== 'string') {
    throw new InvalidParameter('invalid value for HostConfig.LogConfig.Type: expected a string');
  }
  const config = given.Config ?? {};
  if (typeof config !== 'object' || Array.isArray(config) || !Object.values(config as object).every((v) => typeof v === 'string')) {
    throw new InvalidParameter('invalid value for HostConfig.LogConfig.Config: expected a map of strings');
  }
  const type = (given.Type as string | undefined) || DEFAULT_LOG_DRIVER;
  const options = { ...(config as Record<string, string>) };
  if (type === 'none') return { Type: type, Config: options };
  const mode = options.mode ?? '';
  if (!['', 'blocking', 'non-blocking'].includes(mode)) throw new InvalidParameter(`logger: logging mode not supported: ${mode}`);
  if ('max-buffer-size' in options) {
    if (mode !== 'non-blocking') throw new InvalidParameter("logger: max-buffer-size option is only supported with 'mode=non-blocking'");
    if (!isSize(options['max-buffer-size'])) throw new InvalidParameter(`error parsing option max-buffer-size: invalid size: '${options['max-buffer-size']}'`);
  }
  const allowed = DRIVER_OPTIONS[type];
  if (!allowed) throw new InvalidParameter(`error looking up logging plugin ${type}: plugin "${type}" not found`);
  for (const key of Object.keys(options)) {
    if (!BUILT_IN_OPTIONS.includes(key) && !allowed.includes(key)) throw new InvalidParameter(unknownOption(type, key));
  }
  return { Type: type, Config: options };
}
