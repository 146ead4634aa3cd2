/**
 * How the app starts its own engine: the berthd flags for this machine and user.
 *
 * - Linux, not root, with the agent service there (`/run/berth-agent.sock`, made by the deb's
 *   berth-agent.service): berthd runs in the app as the user and drives the root agent (`--agent`); its data
 *   root is the user's (`$XDG_DATA_HOME/berth`, by default ~/.local/share/berth), its exec root under
 *   `$XDG_RUNTIME_DIR/berth`, its socket the app's own. Nothing is shared with a system berthd (/var/lib/berth,
 *   /run/berth, /var/run/engine.sock, the bridge berth0).
 * - Linux, not root, without the agent: no engine can start; the error says what to install or choose instead.
 * - Linux as root (a development setup): berthd does the work itself, its state in the app's user data folder.
 * - macOS and Windows: the Linux side is a VM (its resources from the settings), reached the same way.
 * The app's engine always has a bridge of its own name.
 */
import path from 'node:path';

export const AGENT_SOCKET = '/run/berth-agent.sock';
/** The default bridge of the app's engine (a system berthd's is berth0). */
export const APP_BRIDGE = 'berthapp0';

export interface VmResources {
  cpus: number;
  memoryMiB: number;
  diskGiB: number;
}

/** What the choice depends on (the real values in main.ts; made up in tests). */
export interface HostFacts {
  platform: NodeJS.Platform;
  /** -1 where there are no uids (Windows). */
  uid: number;
  home: string;
  env: { XDG_DATA_HOME?: string; XDG_RUNTIME_DIR?: string };
  /** The app's user data folder (Electron's userData). */
  userData: string;
  exists(file: string): boolean;
}

export type EnginePlan = { args: string[]; vm?: VmResources; dataRoot: string; execRoot: string } | { error: string };

/** Whether the engine of this platform runs in a VM (whose resources the settings hold). */
export function usesVm(platform: NodeJS.Platform): boolean {
  return platform === 'darwin' || platform === 'win32';
}

export function embeddedEnginePlan(socketPath: string, facts: HostFacts, vm?: VmResources): EnginePlan {
  const common = (dataRoot: string, execRoot: string, extra: string[]) => ({
    args: ['-H', `unix://${socketPath}`, '--data-root', dataRoot, '--exec-root', execRoot, '--pidfile', path.join(execRoot, 'berthd.pid'), '--bridge', APP_BRIDGE, ...extra],
    dataRoot,
    execRoot,
  });
  const appState = path.join(facts.userData, 'engine');
  if (usesVm(facts.platform)) return { ...common(path.join(appState, 'data'), path.join(appState, 'run'), []), vm };
  if (facts.platform !== 'linux') return { error: `the bundled engine does not run on ${facts.platform}: connect to an engine in Settings` };
  if (facts.uid === 0) return common(path.join(appState, 'data'), path.join(appState, 'run'), []);
  if (!facts.exists(AGENT_SOCKET)) {
    return {
      error:
        `the Berth agent service is not running (${AGENT_SOCKET} is missing): install the berth package (it adds berth-agent.service) ` +
        'and add yourself to the berth group, or choose another engine in Settings',
    };
  }
  const dataHome = facts.env.XDG_DATA_HOME && path.isAbsolute(facts.env.XDG_DATA_HOME) ? facts.env.XDG_DATA_HOME : path.join(facts.home, '.local', 'share');
  const runtimeDir = facts.env.XDG_RUNTIME_DIR && path.isAbsolute(facts.env.XDG_RUNTIME_DIR) ? facts.env.XDG_RUNTIME_DIR : path.join('/run/user', String(facts.uid));
  return common(path.join(dataHome, 'berth'), path.join(runtimeDir, 'berth'), ['--agent', `unix://${AGENT_SOCKET}`]);
}
