/**
 * Top: the host's `ps` table (default `-ef`), keeping the rows of the container's processes only (the pids
 * the runtime reports for its cgroup), as Docker does.
 */
import { Conflict, InvalidParameter } from '../../errors.js';
import type { ContainerRecord } from './model.js';

/** What top needs of the Host. */
export interface ProcessListHost {
  /** The host's `ps` output for `psArgs` and the host pids of the container's processes. */
  listProcesses(id: string, psArgs: string[]): Promise<{ table: string; pids: number[] }>;
}

export interface TopContainers {
  get(ref: string): ContainerRecord;
  containerEvent(record: ContainerRecord, action: string, extra?: Record<string, string>): void;
}

export interface TopResult {
  Titles: string[];
  Processes: string[][];
}

/** Splits ps_args as a shell would split plain words; quotes are not supported by Docker either. */
export function parsePsArgs(raw: string | undefined): string[] {
  const text = raw === undefined || raw.trim() === '' ? '-ef' : raw;
  const args = text.trim().split(/\s+/);
  for (const a of args) {
    // Only options and their values: nothing that ps could take as a file or that a shell would expand.
    if (!/^[-\w,.:=%+/]+$/.test(a)) throw new InvalidParameter(`invalid ps_args ${JSON.stringify(raw)}: ${JSON.stringify(a)} is not a ps option`);
  }
  return args;
}

/**
 * Keeps the rows of `pids` from a ps table. The last column (the command) may hold spaces: each row is
 * split into as many fields as there are titles, the rest joined into the last one.
 */
export function filterPsTable(table: string, pids: number[]): TopResult {
  const lines = table.split('\n').filter((l) => l.trim() !== '');
  if (lines.length === 0) throw new InvalidParameter('ps printed nothing');
  const titles = lines[0].trim().split(/\s+/);
  const pidIndex = titles.indexOf('PID');
  if (pidIndex < 0) throw new InvalidParameter(`Couldn't find PID field in ps output: give ps_args that print a PID column`);
  const wanted = new Set(pids);
  const processes: string[][] = [];
  for (const line of lines.slice(1)) {
    const fields = line.trim().split(/\s+/);
    const pid = Number(fields[pidIndex]);
    if (!Number.isInteger(pid) || !wanted.has(pid)) continue;
    const row = fields.slice(0, titles.length - 1);
    row.push(fields.slice(titles.length - 1).join(' '));
    processes.push(row);
  }
  return { Titles: titles, Processes: processes };
}

export async function topProcesses(containers: TopContainers, host: ProcessListHost, ref: string, psArgsRaw: string | undefined): Promise<TopResult> {
  const record = containers.get(ref);
  const psArgs = parsePsArgs(psArgsRaw);
  if (!record.State.Running) throw new Conflict(`Container ${record.Id} is not running`);
  if (record.State.Restarting) throw new Conflict(`Container ${record.Id} is restarting, wait until the container is running`);
  const { table, pids } = await host.listProcesses(record.Id, psArgs);
  const result = filterPsTable(table, pids);
  containers.containerEvent(record, 'top');
  return result;
}
