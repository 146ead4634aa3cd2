import { promises as fs } from 'node:fs';
import type http from 'node:http';
import net from 'node:net';
import path from 'node:path';

export type ListenAddress = { kind: 'unix'; path: string } | { kind: 'npipe'; path: string } | { kind: 'tcp'; host: string; port: number };

/** A Windows named pipe as the docker CLI writes it (`npipe:////./pipe/berth`), as Windows names it (`\\.\pipe\berth`). */
export function npipePath(text: string): string {
  const name = /^npipe:\/\/(?:\/\/\.|\.)?\/pipe\/([^/\\]+)$/.exec(text)?.[1];
  if (!name) throw new Error(`invalid named pipe address ${JSON.stringify(text)}: expected npipe:////./pipe/NAME`);
  return `\\\\.\\pipe\\${name}`;
}

/** Parses a `-H` value: unix://PATH, npipe:////./pipe/NAME (Windows), tcp://HOST:PORT, or a bare path. */
export function parseListenAddress(text: string): ListenAddress {
  if (text.startsWith('npipe://')) return { kind: 'npipe', path: npipePath(text) };
  if (text.startsWith('unix://')) {
    const p = text.slice('unix://'.length);
    if (!p.startsWith('/')) throw new Error(`invalid unix socket address ${JSON.stringify(text)}: the path must be absolute`);
    return { kind: 'unix', path: p };
  }
  if (text.startsWith('/')) return { kind: 'unix', path: text };
  if (text.startsWith('tcp://')) {
    const url = new URL(`http://${text.slice('tcp://'.length)}`);
    const port = Number(url.port || 2375);
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`invalid port in ${JSON.stringify(text)}`);
    return { kind: 'tcp', host: url.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1', port };
  }
  throw new Error(`invalid listen address ${JSON.stringify(text)}: expected unix://PATH, npipe:////./pipe/NAME or tcp://HOST:PORT`);
}

export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** Removes a socket file that no process serves any more (left by a crash); refuses to steal a live one. */
async function clearStaleSocket(socketPath: string): Promise<void> {
  try {
    await fs.lstat(socketPath);
  } catch {
    return;
  }
  const alive = await new Promise<boolean>((resolve) => {
    const probe = net.connect(socketPath);
    probe.once('connect', () => {
      probe.destroy();
      resolve(true);
    });
    probe.once('error', () => resolve(false));
  });
  if (alive) throw new Error(`${socketPath} is served by another process`);
  await fs.rm(socketPath, { force: true });
}

/** Starts serving on one address; resolves once listening. */
export async function listenOn(server: http.Server, address: ListenAddress): Promise<void> {
  if (address.kind === 'unix') {
    await fs.mkdir(path.dirname(address.path), { recursive: true });
    await clearStaleSocket(address.path);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(address.path, () => {
        server.off('error', reject);
        resolve();
      });
    });
    await fs.chmod(address.path, 0o660);
    return;
  }
  // A named pipe has no file to clear or to give a mode (Windows keeps it while the server listens).
  if (address.kind === 'npipe') {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(address.path, () => {
        server.off('error', reject);
        resolve();
      });
    });
    return;
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}
