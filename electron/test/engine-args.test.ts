import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { AGENT_SOCKET, embeddedEnginePlan, usesVm, type HostFacts } from '../src/engine-args.js';

/** The daemon's own flag parser (daemon/src/cli.ts), as main.ts loads it: built beside this package. */
const daemonCli = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'daemon', 'dist', 'src', 'cli.js');

const facts = (over: Partial<HostFacts> = {}): HostFacts => ({
  platform: 'linux',
  uid: 1000,
  home: '/home/ann',
  env: { XDG_RUNTIME_DIR: '/run/user/1000' },
  userData: '/home/ann/.config/Berth',
  exists: (file) => file === AGENT_SOCKET,
  ...over,
});

/** The value given to a flag. */
const flag = (args: string[], name: string) => {
  const i = args.indexOf(name);
  return i < 0 ? undefined : args[i + 1];
};

describe('the arguments of the app\'s engine', () => {
  it('on Linux as a user with the agent service: the user\'s own roots and socket, driving the root agent', () => {
    const plan = embeddedEnginePlan('/home/ann/.config/Berth/engine.sock', facts());
    assert.ok('args' in plan);
    assert.deepEqual(plan.args, [
      '-H', 'unix:///home/ann/.config/Berth/engine.sock',
      '--data-root', '/home/ann/.local/share/berth',
      '--exec-root', '/run/user/1000/berth',
      '--pidfile', '/run/user/1000/berth/berthd.pid',
      '--bridge', 'berthapp0',
      '--agent', 'unix:///run/berth-agent.sock',
    ]);
    // Nothing a system berthd uses.
    for (const taken of ['/var/lib/berth', '/run/berth', '/var/run/engine.sock', '/var/run/berthd.pid', 'berth0'])
      assert.ok(!plan.args.filter((a) => a !== 'unix:///run/berth-agent.sock').some((a) => a === taken || a.startsWith(`${taken}/`) || a === `unix://${taken}`), `${taken} in ${plan.args.join(' ')}`);
  });

  it('follows XDG_DATA_HOME and falls back to /run/user/<uid> without XDG_RUNTIME_DIR', () => {
    const plan = embeddedEnginePlan('/s.sock', facts({ env: { XDG_DATA_HOME: '/data/ann' } }));
    assert.ok('args' in plan);
    assert.equal(flag(plan.args, '--data-root'), '/data/ann/berth');
    assert.equal(flag(plan.args, '--exec-root'), '/run/user/1000/berth');
    // A relative value is not a base directory (XDG says to ignore it).
    const relative = embeddedEnginePlan('/s.sock', facts({ env: { XDG_DATA_HOME: 'data', XDG_RUNTIME_DIR: 'run' } }));
    assert.ok('args' in relative);
    assert.equal(flag(relative.args, '--data-root'), '/home/ann/.local/share/berth');
    assert.equal(flag(relative.args, '--exec-root'), '/run/user/1000/berth');
  });

  it('on Linux as a user without the agent: an error that says what to do, and no engine', () => {
    const plan = embeddedEnginePlan('/s.sock', facts({ exists: () => false }));
    assert.ok('error' in plan);
    assert.match(plan.error, /agent service is not running.*berth-agent\.service.*berth group.*another engine/);
  });

  it('on Linux as root: the daemon does the work itself, in the app\'s folder, without the agent', () => {
    const plan = embeddedEnginePlan('/root/.config/Berth/engine.sock', facts({ uid: 0, home: '/root', userData: '/root/.config/Berth' }));
    assert.ok('args' in plan);
    assert.equal(flag(plan.args, '--agent'), undefined);
    assert.equal(flag(plan.args, '--data-root'), '/root/.config/Berth/engine/data');
    assert.equal(flag(plan.args, '--bridge'), 'berthapp0');
  });

  it('on macOS and Windows: the VM with the resources of the settings', () => {
    assert.equal(usesVm('darwin'), true);
    assert.equal(usesVm('win32'), true);
    assert.equal(usesVm('linux'), false);
    const vm = { cpus: 4, memoryMiB: 4096, diskGiB: 100 };
    const plan = embeddedEnginePlan('/Users/ann/Library/Application Support/Berth/engine.sock', facts({ platform: 'darwin', userData: '/Users/ann/Library/Application Support/Berth' }), vm);
    assert.ok('args' in plan);
    assert.deepEqual(plan.vm, vm);
    assert.equal(flag(plan.args, '--data-root'), '/Users/ann/Library/Application Support/Berth/engine/data');
    assert.ok('error' in embeddedEnginePlan('/s.sock', facts({ platform: 'freebsd' })));
  });

  it("are flags the daemon's own parser reads as meant", { skip: !existsSync(daemonCli) && 'the daemon is not built' }, async () => {
    const { parseFlags } = (await import(pathToFileURL(daemonCli).href)) as { parseFlags(argv: string[]): Record<string, unknown> | string };
    const plan = embeddedEnginePlan('/home/ann/.config/Berth/engine.sock', facts());
    assert.ok('args' in plan);
    const opts = parseFlags(plan.args);
    assert.ok(typeof opts === 'object');
    assert.deepEqual(opts.hosts, ['unix:///home/ann/.config/Berth/engine.sock']);
    assert.equal(opts.dataRoot, '/home/ann/.local/share/berth');
    assert.equal(opts.execRoot, '/run/user/1000/berth');
    assert.equal(opts.pidfile, '/run/user/1000/berth/berthd.pid');
    assert.equal(opts.bridgeName, 'berthapp0');
    assert.equal(opts.agent, 'unix:///run/berth-agent.sock');
  });
});
