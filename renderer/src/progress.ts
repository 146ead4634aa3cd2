/**
 * The JSON progress stream of a pull or a push, as rows to show: one per layer id with its last status and
 * bytes, the lines without a layer (the "Pulling from", "Digest:", "Status:" lines), and the in-band error
 * that ends a failed stream (the engine answered 200 before it knew).
 */

export interface ProgressMessage {
  id?: string;
  status?: string;
  progress?: string;
  progressDetail?: { current?: number; total?: number };
  error?: string;
  errorDetail?: { message?: string };
  aux?: unknown;
}

export interface LayerProgress {
  id: string;
  status: string;
  current: number;
  total: number;
  /** The layer is there: downloaded and extracted, pushed, or already present. */
  done: boolean;
}

export interface ProgressState {
  /** In the order they first appeared. */
  layers: LayerProgress[];
  /** The lines before the first layer ("1.0: Pulling from name", "The push refers to..."), shown above them. */
  head?: string[];
  lines: string[];
  error?: string;
}

export const EMPTY_PROGRESS: ProgressState = { layers: [], lines: [] };

const DONE = /^(pull complete|already exists|pushed|layer already exists|mounted from|download complete)/i;
const FINISHED_PHASE = /^(download complete|verifying checksum)/i;

/** A layer's message carries progressDetail (an empty object for the statuses without bytes). */
function isLayerMessage(m: ProgressMessage): m is ProgressMessage & { id: string } {
  return !!m.id && m.progressDetail !== undefined;
}

export function applyProgress(state: ProgressState, m: ProgressMessage): ProgressState {
  if (m.error || m.errorDetail?.message) return { ...state, error: m.errorDetail?.message || m.error };
  if (isLayerMessage(m)) {
    const status = m.status ?? '';
    const at = state.layers.findIndex((l) => l.id === m.id);
    const old: LayerProgress = at >= 0 ? state.layers[at]! : { id: m.id, status, current: 0, total: 0, done: false };
    const detail = m.progressDetail ?? {};
    let { current, total } = old;
    if (typeof detail.total === 'number' && detail.total > 0) {
      total = detail.total;
      current = Math.min(detail.current ?? 0, total);
    } else if (typeof detail.current === 'number') current = detail.current;
    // A phase that ended (download complete, checksum) reads as a full bar until the next phase counts again.
    if (FINISHED_PHASE.test(status) && total) current = total;
    const layer: LayerProgress = { id: m.id, status, current, total, done: old.done || (DONE.test(status) && !/^download complete/i.test(status)) };
    if (layer.done && total) layer.current = total;
    const layers = at >= 0 ? state.layers.map((l, i) => (i === at ? layer : l)) : [...state.layers, layer];
    return { ...state, layers };
  }
  if (m.status) {
    const line = m.id ? `${m.id}: ${m.status}` : m.status;
    return state.layers.length ? { ...state, lines: [...state.lines, line] } : { ...state, head: [...(state.head ?? []), line] };
  }
  return state;
}

/** The bar's fill between 0 and 1: bytes when known, full when the layer is done, empty otherwise. */
export function fraction(l: LayerProgress): number {
  if (l.done) return 1;
  return l.total > 0 ? l.current / l.total : 0;
}
