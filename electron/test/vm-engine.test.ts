import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { VmEngine, type VmModules, type VmView } from '../src/vm-engine.js';
import { vmEnginePlan } from '../src/vm-plan.js';

/** A VM driver that records what it is asked; its VM "stops by itself" when told. */
class FakeDriver {
  static made: FakeDriver[] = [];
  static failStart = '';
  calls: string[] = [];
  state = 'stopped';
  constructor(
    readonly config: Record<string, any>,
    readonly opts: Record<string, unknown> = {},
  ) {
    FakeDriver.made.push(this);
  }
  async start() {
    this.calls.push('start');
    if (FakeDriver.failStart) throw new Error(FakeDriver.failStart);
    this.state = 'running';
    return { agentEndpoint: `unix://${this.config.stateDir}/agent.sock`, consoleLog: `${this.config.stateDir}/console.log`, pid: 4242 };
  }
  async stop() {
    this.calls.push('stop');
    this.state = 'stopped';
  }
  async status() {
    return { state: this.state };
  }
}

const mods = { drivers: { qemu: FakeDriver, vfkit: FakeDriver, wsl2: FakeDriver } } as unknown as VmModules;
const image = { arch: 'amd64' as const, kernel: '/img/vmlinuz', initrd: '/img/initrd.img' };

describe('the VM engine', () => {
  const cleanups: Array<() => void | Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
    FakeDriver.made = [];
    FakeDriver.failStart = '';
  });

  function setup(opts: { ready?: boolean } = {}) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-vmeng-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const home = path.join(dir, 'home');
    const plan = vmEnginePlan('vfkit', { platform: 'darwin', uid: 501, home, env: {}, userData: path.join(dir, 'app'), exists: () => false }, path.join(dir, 'engine.sock'), { cpus: 3, memoryMiB: 3072, diskGiB: 20 });
    const log: string[] = [];
    // The daemon, faked: a server on the plan's socket whose /info answers once the engine "restored its state".
    const startDaemon = async (args: string[]) => {
      log.push(`daemon ${args.join(' ')}`);
      const server = http.createServer((req, res) => {
        res.statusCode = req.url === '/info' && opts.ready !== false ? 200 : 503;
        res.end('{}');
      });
      await new Promise<void>((r) => server.listen(plan.socketPath, r));
      return {
        localToken: 'tok',
        shutdown: async () => {
          log.push('daemon shutdown');
          await new Promise((r) => server.close(r));
        },
      };
    };
    const engine = new VmEngine({ plan, mods, image, startDaemon, readyTimeoutMs: 1500 });
    const seen: VmView['state'][] = [];
    engine.onChange((v) => seen.push(v.state));
    return { dir, home, plan, engine, log, seen };
  }

  it('starts the VM with the resources, shares and data root of the plan, then the daemon with --agent to it; stops the daemon, then the VM', async () => {
    const { home, plan, engine, log, seen } = setup();
    const daemon = await engine.start();
    const driver = FakeDriver.made[0]!;
    assert.deepEqual(driver.config.resources, { cpus: 3, memoryMiB: 3072, diskGiB: 20 });
    assert.equal(driver.config.guestDataRoot, path.join(home, '.berth', 'data'));
    assert.deepEqual(driver.config.shares, plan.shares);
    assert.deepEqual(driver.config.image, image);
    // The shared folders exist before the VM starts.
    for (const s of plan.shares) assert.ok(existsSync(s.hostPath), s.hostPath);
    assert.equal(log[0], `daemon ${[...plan.args, '--agent', `unix://${plan.stateDir}/agent.sock`].join(' ')}`);
    assert.equal(daemon.socketPath, plan.socketPath);
    assert.equal(daemon.localToken, 'tok');
    assert.deepEqual(engine.status, { state: 'running', driver: 'vfkit', resources: { cpus: 3, memoryMiB: 3072, diskGiB: 20 }, error: undefined, consoleLog: `${plan.stateDir}/console.log` });
    await daemon.shutdown();
    assert.deepEqual(driver.calls, ['start', 'stop']);
    assert.equal(log.at(-1), 'daemon shutdown');
    assert.deepEqual(seen, ['starting', 'running', 'stopping', 'stopped']);
  });

  it('shows a VM that stopped by itself as an error, when asked', async () => {
    const { engine } = setup();
    const daemon = await engine.start();
    cleanups.push(() => daemon.shutdown().catch(() => undefined));
    assert.equal((await engine.refresh()).state, 'running');
    FakeDriver.made[0]!.state = 'stopped';
    const view = await engine.refresh();
    assert.equal(view.state, 'error');
    assert.match(view.error ?? '', /^the VM stopped by itself; its console log is .*console\.log$/);
  });

  it('reports a VM that does not start, and starts no daemon', async () => {
    const { engine, log, seen } = setup();
    FakeDriver.failStart = 'vfkit: not found';
    await assert.rejects(engine.start(), /vfkit: not found/);
    assert.deepEqual(log, []);
    assert.deepEqual(seen, ['starting', 'error']);
    assert.equal(engine.status.error, 'vfkit: not found');
  });

  it('gives up on an engine that never becomes ready: the daemon and the VM are stopped', async () => {
    const { engine, log } = setup({ ready: false });
    await assert.rejects(engine.start(), /the engine did not become ready in the VM within 2 s: \/info answered 503/);
    assert.deepEqual(FakeDriver.made[0]!.calls, ['start', 'stop']);
    assert.equal(log.at(-1), 'daemon shutdown');
    assert.equal(engine.status.state, 'error');
  });
});
