/** A Linux dev_t split into its major and minor numbers (glibc's gnu_dev_major and gnu_dev_minor). */
export function devMajor(rdev: number | bigint): number {
  const d = BigInt(rdev);
  return Number(((d >> 8n) & 0xfffn) | ((d >> 32n) & ~0xfffn));
}

export function devMinor(rdev: number | bigint): number {
  const d = BigInt(rdev);
  return Number((d & 0xffn) | ((d >> 12n) & ~0xffn));
}
