/**
 * Progress lines as dockerd writes them: `{"status","progressDetail":{"current","total"},"progress","id"}`
 * with the bar text the CLI shows (`[=====>     ]  1.23MB/4.56MB`), updates throttled per layer.
 */
export type Emit = (message: Record<string, unknown>) => void;

const UNITS = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];

/** Go's units.HumanSize: decimal units, four significant digits (`2.097MB`, `512B`). */
export function humanSize(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < UNITS.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${Number(value.toPrecision(4))}${UNITS[unit]}`;
}

/** The progress text of a JSONProgress (the daemon side renders it with a 200-column width: bar shown). */
export function progressText(current: number, total: number): string {
  if (total > 0 && current <= total) {
    const percentage = Math.min(50, Math.floor(Math.floor((current / total) * 100) / 2));
    const bar = `[${'='.repeat(percentage)}>${' '.repeat(Math.max(0, 50 - percentage))}] `;
    return `${bar}${humanSize(current).padStart(8)}/${humanSize(total)}`;
  }
  return humanSize(current).padStart(8);
}

export function status(emit: Emit, id: string, text: string): void {
  emit({ status: text, progressDetail: {}, id });
}

/** Reports bytes moving for one layer, at most every `intervalMs` (and always at the end). */
export class ByteProgress {
  private last = 0;
  current = 0;

  constructor(
    private readonly emit: Emit,
    private readonly id: string,
    private readonly action: string,
    private readonly total: number,
    private readonly intervalMs = 100,
  ) {}

  add(bytes: number): void {
    this.current += bytes;
    const now = Date.now();
    if (now - this.last >= this.intervalMs) {
      this.last = now;
      this.report();
    }
  }

  report(): void {
    const detail: Record<string, number> = { current: this.current };
    if (this.total > 0) detail.total = this.total;
    this.emit({ status: this.action, progressDetail: detail, progress: progressText(this.current, this.total), id: this.id });
  }
}

/** The 12-character id Docker shows for a digest. */
export function shortDigest(digest: string): string {
  return digest.replace(/^sha256:/, '').slice(0, 12);
}
