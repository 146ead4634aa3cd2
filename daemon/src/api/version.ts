/**
 * API versions. Every version this engine serves is 1.x, so a version is carried as its minor number
 * (1.44 is 44) which compares with plain < and >=.
 */
export const MIN_API_MINOR = 24;
export const MAX_API_MINOR = 53;
export const MIN_API_VERSION = `1.${MIN_API_MINOR}`;
export const MAX_API_VERSION = `1.${MAX_API_MINOR}`;

export type ApiMinor = number;

export function formatVersion(minor: ApiMinor): string {
  return `1.${minor}`;
}

/** Parses "1.44" into 44; returns undefined for anything that is not 1.<digits>. */
export function parseVersion(text: string): ApiMinor | undefined {
  const m = /^1\.(\d{1,3})$/.exec(text);
  return m ? Number(m[1]) : undefined;
}
