/**
 * The engine API on a TCP listener for the tests: a free loopback port, an engine started listening on it
 * beside its unix socket, and one request to it.
 */
import http from 'node:http';
import net from 'node:net';
import { readResponse, startEngine, type Engine, type EngineOptions, type HttpResult } from './harness.js';

/** A loopback port nothing listens on (free when asked; the caller binds it soon after). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** An engine listening on tcp://127.0.0.1:<a free port> too, `args` after that listener. */
export async function startTcpEngine(args: string[] = [], opts: EngineOptions = {}): Promise<{ engine: Engine; port: number }> {
  const port = await freePort();
  const engine = await startEngine({ ...opts, args: ['-H', `tcp://127.0.0.1:${port}`, ...args] });
  return { engine, port };
}

/** One request to 127.0.0.1:<port> on a connection of its own. */
export function tcpRequest(port: number, method: string, urlPath: string, headers: Record<string, string> = {}, body?: string): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: urlPath, headers, agent: false }, (res) => {
      readResponse(res).then(resolve, reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}
