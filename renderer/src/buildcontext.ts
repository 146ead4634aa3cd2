/**
 * A build context from a folder the user picked: a tar made of the files as Blob parts (headers built
 * here, contents the File objects themselves), so the browser reads each file only as the upload sends it.
 * Entries are regular files of mode 0644 (a page cannot read permissions); names longer than the ustar
 * fields take a PAX `path` record.
 */

export interface ContextFile {
  /** The path inside the context, with `/` separators and no leading folder. */
  path: string;
  file: Blob & { lastModified?: number };
}

const encoder = new TextEncoder();

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, '0') + '\0';
}

function header(name: string, size: number, mtime: number, type: '0' | 'x', prefix = ''): Uint8Array<ArrayBuffer> {
  const block = new Uint8Array(512);
  const put = (text: string, offset: number, width: number) => block.set(encoder.encode(text).subarray(0, width), offset);
  put(name, 0, 100);
  put(octal(0o644, 8), 100, 8);
  put(octal(0, 8), 108, 8);
  put(octal(0, 8), 116, 8);
  put(octal(size, 12), 124, 12);
  put(octal(Math.max(0, Math.floor(mtime / 1000)), 12), 136, 12);
  put('        ', 148, 8);
  put(type, 156, 1);
  put('ustar\0' + '00', 257, 8);
  put(prefix, 345, 155);
  let sum = 0;
  for (const b of block) sum += b;
  put(octal(sum, 7) + ' ', 148, 8);
  return block;
}

/** Splits a path into ustar's prefix and name fields, or undefined when it does not fit them. */
function ustarName(path: string): { name: string; prefix: string } | undefined {
  const bytes = encoder.encode(path).length;
  if (bytes <= 100) return { name: path, prefix: '' };
  for (let i = path.indexOf('/'); i > 0; i = path.indexOf('/', i + 1)) {
    const prefix = path.slice(0, i);
    const name = path.slice(i + 1);
    if (encoder.encode(prefix).length <= 155 && encoder.encode(name).length <= 100 && name) return { name, prefix };
  }
  return undefined;
}

function paxRecord(key: string, value: string): string {
  // The record's length counts its own digits.
  const base = encoder.encode(` ${key}=${value}\n`).length;
  let length = base + String(base).length;
  if (base + String(length).length !== length) length = base + String(length).length;
  return `${length} ${key}=${value}\n`;
}

const padding = (size: number): Uint8Array<ArrayBuffer> => new Uint8Array((512 - (size % 512)) % 512);

/** The tar of the files; its size is the upload's total. */
export function contextTar(files: ContextFile[]): Blob {
  const parts: BlobPart[] = [];
  for (const { path, file } of files) {
    const mtime = file.lastModified ?? Date.now();
    const fits = ustarName(path);
    if (!fits) {
      const pax = new Uint8Array(encoder.encode(paxRecord('path', path)));
      parts.push(header('PaxHeader', pax.length, mtime, 'x'), pax, padding(pax.length));
    }
    parts.push(header(fits?.name ?? path.slice(-100), file.size, mtime, '0', fits?.prefix ?? ''), file, padding(file.size));
  }
  parts.push(new Uint8Array(1024));
  return new Blob(parts, { type: 'application/x-tar' });
}

/** The files of a folder picked with `webkitdirectory`, their paths without the folder's own name. */
export function filesOfFolder(list: FileList | File[]): ContextFile[] {
  return Array.from(list).map((file) => {
    const relative = (file as File & { webkitRelativePath?: string }).webkitRelativePath || file.name;
    return { path: relative.split('/').slice(1).join('/') || file.name, file };
  });
}
