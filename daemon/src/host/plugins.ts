/**
 * The plugins part of the Host: the folders of managed plugins (their roots, staged installs, socket
 * folders), their processes under the OCI runtime (outside the containers, in a runtime state root of their
 * own), the files legacy plugins are found by (sockets, `.spec` and `.json` files), and byte streams to the
 * sockets plugins listen on. All of them are the Host's machine's: through an agent, the plugins run and
 * listen there, and the plugin client's requests cross on the agent's stream. host/linux/plugins.ts
 * implements it.
 */
import type { Duplex } from 'node:stream';

/** What a path of the machine is. */
export type PathKind = 'dir' | 'file' | 'socket' | 'other';

export interface PluginRunSpec {
  /** The plugin's id: its runtime container's name. */
  id: string;
  /** The OCI runtime's state root for plugins. */
  runtimeRoot: string;
  /** The bundle folder: its config.json is written from `spec`. */
  bundle: string;
  /** The OCI runtime spec (plain data). */
  spec: object;
  /** Where the plugin's output is appended. */
  logFile: string;
  /** The socket the plugin listens on (a host path): the run ends once it accepts a connection. */
  socket: string;
  timeoutMs: number;
}

export interface PluginExit {
  code: number | null;
  signal: string | null;
}

/** Where a plugin listens on the Host's machine: a unix socket, or a TCP address (a legacy plugin's spec file). */
export type PluginDialAddress = { socketPath: string } | { host: string; port: number };

export interface PluginHost {
  /**
   * The folder on the Host's machine that holds managed plugins' folders (`<pluginsRoot>/<id>`: the rootfs,
   * the propagated mount, the log; staged installs beside them).
   */
  readonly pluginsRoot: string;
  /** The per-boot folder on the Host's machine for plugins' socket folders, bundles and runtime state. */
  readonly pluginsRunRoot: string;
  /** Creates the folder (and its parents), mode 0700 for those it makes. */
  makeDir(dir: string): Promise<void>;
  /** The entries of a folder with what they are (symlinks followed); [] when it does not exist. */
  entries(dir: string): Promise<Array<{ name: string; kind: PathKind }>>;
  /** What the path is (symlinks followed), or undefined when nothing is there. */
  kindOf(path: string): Promise<PathKind | undefined>;
  /** A small file's text, or undefined when it does not exist; a file over `maxBytes` is an error. */
  readText(file: string, maxBytes: number): Promise<string | undefined>;
  rename(from: string, to: string): Promise<void>;
  /** Removes the path and everything under it; nothing when it does not exist. */
  remove(path: string): Promise<void>;
  /**
   * Runs the plugin in the foreground of the OCI runtime (a leftover of the same id, and its socket, deleted
   * first) and resolves once its socket accepts a connection. When it exits first or the timeout passes, it
   * is stopped and the run fails with the end of its log. A plugin this Host runs already (a daemon that went
   * away without stopping it, through an agent), or an earlier Host object ran (see waitExit), is kept when
   * its socket accepts a connection, run again otherwise.
   */
  run(spec: PluginRunSpec): Promise<void>;
  /**
   * Resolves when the plugin's current run ends (at once when it does not run). A plugin run under
   * `<pluginsRunRoot>/runtime` by an earlier Host object (an agent that restarted) is found there: its end is
   * the end of its state.
   */
  waitExit(id: string): Promise<PluginExit>;
  /**
   * Stops the plugin (TERM, KILL after 5 s) and deletes its runtime state; one an earlier Host object ran under
   * `<pluginsRunRoot>/runtime` is killed. Nothing when it does not run.
   */
  stop(id: string): Promise<void>;
  /**
   * Opens a byte stream to a socket on the Host's machine; resolves once connected. A failure to connect
   * keeps the system error's `code` (ECONNREFUSED, ENOENT: a plugin still starting).
   */
  dial(address: PluginDialAddress): Promise<Duplex>;
}
