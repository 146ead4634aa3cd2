/**
 * Helpers for unit tests of the API layer: serves a Router on a temporary unix socket in this process
 * and sends raw HTTP to it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Router } from './router.js';
import { createApiServer, type ServerOptions } from './server.js';

export interface TestServer {
  socket: string;
  server: http.Server;
  request(method: string, urlPath: string, opts?: { body?: string | Buffer; headers?: Record<string, string> }): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }>;
  /** Writes raw bytes on a fresh connection and returns everything read until the server closes it or `until` matches. */
  raw(bytes: string | Buffer, opts?: { until?: RegExp; endAfterWrite?: boolean; timeoutMs?: number }): Promise<string>;
  close(): Promise<void>;
}

export async function serveRouter(router: Router, opts: ServerOptions = {}): Promise<TestServer> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-api-'));
  const socket = path.join(dir, 'api.sock');
  const server = createApiServer(router, opts);
  // Hijacked sockets leave the HTTP machinery: track every connection so that close() can end them.
  const connections = new Set<net.Socket>();
  server.on('connection', (conn: net.Socket) => {
    connections.add(conn);
    conn.on('close', () => connections.delete(conn));
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  const agent = new http.Agent({ keepAlive: false });
  return {
    socket,
    server,
    request(method, urlPath, { body, headers = {} } = {}) {
      return new Promise((resolve, reject) => {
        const req = http.request({ socketPath: socket, method, path: urlPath, headers, agent }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        });
        req.on('error', reject);
        req.end(body);
      });
    },
    raw(bytes, { until, endAfterWrite = false, timeoutMs = 5000 } = {}) {
      return new Promise((resolve, reject) => {
        const conn = net.connect(socket);
        let text = '';
        const timer = setTimeout(() => {
          conn.destroy();
          resolve(text);
        }, timeoutMs);
        conn.on('data', (c: Buffer) => {
          text += c.toString('latin1');
          if (until && until.test(text)) {
            clearTimeout(timer);
            conn.destroy();
            resolve(text);
          }
        });
        conn.on('close', () => {
          clearTimeout(timer);
          resolve(text);
        });
        conn.on('error', reject);
        conn.write(bytes);
        if (endAfterWrite) conn.end();
      });
    },
    async close() {
      server.closeAllConnections();
      for (const conn of connections) conn.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
