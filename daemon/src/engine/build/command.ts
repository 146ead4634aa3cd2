/** RUN: the command in a container of the container engine, its output streamed, its writable layer committed. */
import { StringDecoder } from 'node:string_decoder';
import { shortId } from '../../util/ids.js';
import { log } from '../../util/log.js';
import { errorMessage, InvalidParameter, NotImplemented } from '../../errors.js';
import type { Instruction } from './parser.js';
import { BuildStepError, type StageState } from './types.js';
import { hashKey, stderrText } from './helpers.js';
import type { BuildRun } from './run.js';

export async function runCommand(build: BuildRun, state: StageState, ins: Instruction): Promise<void> {
  const { containers, images, host } = build.builder.d;
  // As dockerd's classic builder: RUN's flags are BuildKit's, and the step that uses one fails.
  const buildkitFlag = Object.keys(ins.flags)[0];
  if (buildkitFlag !== undefined) {
    throw new NotImplemented(`the --${buildkitFlag} option requires BuildKit, which this engine does not have: build without RUN --${buildkitFlag}`);
  }
  if (!state.imageId) throw new InvalidParameter('RUN needs a base image with a shell: this stage starts from scratch and has no files yet');
  const cmd = build.commandOf(state, ins.args, ins.heredocs);
  const { env, shown } = build.runEnv(state);
  const createdBy = shown.length > 0 ? `|${shown.length} ${shown.join(' ')} ${cmd.join(' ')}` : cmd.join(' ');
  const key = hashKey([state.imageId, createdBy, '', state.config]);
  if (await build.fromCache(state, key)) return;
  const hostConfig: Record<string, unknown> = { ...build.opts.resources, AutoRemove: false };
  if (build.opts.networkMode && build.opts.networkMode !== 'default') hostConfig.NetworkMode = build.opts.networkMode;
  if (build.opts.extraHosts.length > 0) hostConfig.ExtraHosts = build.opts.extraHosts;
  const body = {
    Image: state.imageId,
    Cmd: cmd,
    Entrypoint: [''],
    Env: env,
    WorkingDir: state.config.WorkingDir ?? '',
    User: state.config.User ?? '',
    Labels: {},
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    OpenStdin: false,
    HostConfig: hostConfig,
  };
  build.checkAborted();
  const { Id: containerId } = await containers.create(body, undefined);
  build.out(` ---> Running in ${shortId(containerId)}\n`);
  let succeeded = false;
  const attachAbort = new AbortController();
  let detach: (() => void) | undefined;
  const onAbort = () => {
    attachAbort.abort();
    detach?.();
    // Stopped here; removed below, once the step has let go of it.
    void containers.kill(containerId, 'SIGKILL').catch(() => undefined);
  };
  build.signal.addEventListener('abort', onAbort, { once: true });
  try {
    build.checkAborted();
    const attached = containers.attach(containerId, attachAbort.signal);
    attached.catch(() => undefined);
    try {
      await containers.start(containerId);
    } catch (err) {
      attachAbort.abort();
      throw err;
    }
    const { streams } = await attached;
    detach = () => streams.close();
    build.checkAborted();
    const decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
    for await (const chunk of streams.output as AsyncIterable<{ stream: 'stdout' | 'stderr'; data: Buffer }>) {
      const textOut = decoders[chunk.stream].write(chunk.data);
      if (textOut) build.out(chunk.stream === 'stderr' ? stderrText(textOut) : textOut);
    }
    const restOut = decoders.stdout.end();
    if (restOut) build.out(restOut);
    const restErr = decoders.stderr.end();
    if (restErr) build.out(stderrText(restErr));
    const { StatusCode } = await containers.wait(containerId, 'not-running', build.signal);
    build.checkAborted();
    if (StatusCode !== 0) {
      throw new BuildStepError(`The command '${cmd.join(' ')}' returned a non-zero code: ${StatusCode}`, StatusCode);
    }
    const id = await images.createImage(
      {
        parent: state.imageId,
        layer: host.diffTar(containerId, images.lowerDirs(state.chainIds), build.signal),
        config: state.config,
        createdBy,
        container: containerId,
        containerConfig: { ...state.config, Cmd: cmd, Env: env },
      },
      build.signal,
    );
    await build.builder.cachePut(key, id);
    succeeded = true;
    if (build.opts.rm || build.opts.forcerm) {
      build.out(`Removing intermediate container ${shortId(containerId)}\n`);
      await containers.remove(containerId, { force: true, volumes: true }).catch(() => undefined);
    }
    build.adopt(state, id);
    build.out(` ---> ${shortId(id)}\n`);
  } finally {
    build.signal.removeEventListener('abort', onAbort);
    if (!succeeded && (build.opts.forcerm || build.signal.aborted)) {
      await containers.remove(containerId, { force: true, volumes: true }).catch((err) => log.debug('build step container removal', { id: containerId, error: errorMessage(err) }));
    }
  }
}
