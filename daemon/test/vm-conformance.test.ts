/**
 * The Host conformance suite (test/conformance/host.ts) against the remote Host over the guest agent in a
 * QEMU VM (TCG unless BERTH_VM_ACCEL says otherwise), on the VM's virtio-serial port. The sandbox's folder is
 * shared with the guest at the same path (9p), as the suite names its files by their host paths. One VM for
 * the whole suite: the recovery test lets go of its Host and builds another, and the containers must still be
 * there. Skipped without QEMU, the image build's tools, or the agent in the build.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Host } from '../src/host/host.js';
import { createRemoteHost } from '../src/host/remote/index.js';
import { buildGuestImage, defaultCacheDir } from '../src/vm/guest/image.js';
import { QemuDriver } from '../src/vm/qemu.js';
import { hostConformance } from './conformance/host.js';
import { DAEMON_DIR } from './harness.js';

const onPath = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
const missing = ['qemu-system-x86_64', 'apt-get', 'dpkg-deb', 'depmod'].filter((c) => !onPath(c));
const skip =
  os.arch() !== 'x64'
    ? 'boots an amd64 guest on an amd64 host'
    : missing.length
      ? `${missing.join(', ')} not installed (scripts/install-deps.sh installs qemu-system-x86 and kmod)`
      : !existsSync('/usr/share/keyrings/debian-archive-keyring.gpg')
        ? 'debian-archive-keyring not installed'
        : !existsSync(path.join(DAEMON_DIR, 'dist', 'src', 'agent'))
          ? 'the guest agent is not in this build'
          : !existsSync('/bin/busybox')
            ? 'needs /bin/busybox'
            : false;

let driver: QemuDriver | undefined;

hostConformance(
  'remote Host over the guest agent in a QEMU VM',
  {
    async create(box) {
      if (!driver) {
        const image = await buildGuestImage({ arch: 'amd64', cacheDir: defaultCacheDir(), log: (l) => process.stderr.write(`# ${l}\n`) });
        driver = new QemuDriver(
          { name: 'conformance', stateDir: path.join(box.root, 'vm'), image, resources: { cpus: 2, memoryMiB: 2048, diskGiB: 4 }, shares: [{ hostPath: box.root, guestPath: box.root }] },
          { accel: (process.env.BERTH_VM_ACCEL as 'kvm' | 'tcg' | undefined) ?? 'tcg' },
        );
        await driver.start();
      }
      const status = await driver.status();
      return createRemoteHost(status.agentEndpoint!, { waitMs: 180_000 });
    },
    release: (host: Host) => host.close(),
    cleanup: async () => {
      await driver?.stop({ timeoutMs: 1000 });
      driver = undefined;
    },
  },
  // volumes: made where the agent says, under its own data root on the VM's data disk. plugins: the suite builds
  // its fixture plugin with the host's compiler into the sandbox and makes a plugin's interface with the host's
  // ip, for the guest's runtime and namespaces; that is left to the host's own runs for now.
  { skip: skip || ['plugins'] },
);
