/** The instructions of a Dockerfile, one case each: config-only steps, WORKDIR, and RUN, COPY and ADD handed on. */
import { InvalidParameter } from '../../errors.js';
import type { ImageRunConfig } from '../images/types.js';
import type { Instruction } from './parser.js';
import { expandWord, expandWords, keyValuePairs } from './words.js';
import type { StageState } from './types.js';
import { jsonArray, parseDuration, setEnv, splitArg } from './helpers.js';
import type { BuildRun } from './run.js';
import { runCommand } from './command.js';
import { copyStep } from './copy.js';

export async function runStep(build: BuildRun, state: StageState, ins: Instruction, trigger: boolean): Promise<void> {
  void trigger;
  const lookup = build.lookupFor(state);
  const expand = (t: string) => expandWord(t, lookup, build.escape);
  const text = ins.original.replace(/^\S+/, ins.keyword);
  switch (ins.keyword) {
    case 'ARG': {
      const [name, raw] = splitArg(ins.args);
      const value = raw === undefined ? undefined : expand(raw);
      state.args.set(name, value);
      build.usedArgs.add(name);
      const shown = value === undefined ? name : `${name}=${value}`;
      return build.configStep(state, `ARG ${shown}`, () => undefined);
    }
    case 'ENV': {
      const pairs = keyValuePairs('ENV', ins.args, lookup, build.escape);
      return build.configStep(state, `ENV ${pairs.map(([k, v]) => `${k}=${v}`).join(' ')}`, (c) => {
        for (const [k, v] of pairs) c.Env = setEnv(c.Env, k, v);
      });
    }
    case 'LABEL': {
      const pairs = keyValuePairs('LABEL', ins.args, lookup, build.escape);
      return build.configStep(state, `LABEL ${pairs.map(([k, v]) => `${k}=${v}`).join(' ')}`, (c) => {
        c.Labels = { ...(c.Labels ?? {}) };
        for (const [k, v] of pairs) c.Labels[k] = v;
      });
    }
    case 'MAINTAINER':
      return build.configStep(state, `MAINTAINER ${ins.args}`, () => undefined);
    case 'EXPOSE': {
      const ports = expandWords(ins.args, lookup, build.escape);
      const keys: string[] = [];
      for (const word of ports) {
        const pm = /^(\d+)(?:-(\d+))?(?:\/(tcp|udp|sctp))?$/i.exec(word);
        if (!pm) throw new InvalidParameter(`EXPOSE: invalid port ${JSON.stringify(word)}`);
        const from = Number(pm[1]);
        const to = pm[2] ? Number(pm[2]) : from;
        if (from < 1 || to > 65535 || to < from) throw new InvalidParameter(`EXPOSE: invalid port range ${JSON.stringify(word)}`);
        for (let p = from; p <= to; p++) keys.push(`${p}/${(pm[3] ?? 'tcp').toLowerCase()}`);
      }
      return build.configStep(state, `EXPOSE ${keys.join(' ')}`, (c) => {
        c.ExposedPorts = { ...(c.ExposedPorts ?? {}) };
        for (const k of keys) c.ExposedPorts[k] = {};
      });
    }
    case 'CMD': {
      const cmd = build.commandOf(state, ins.args, []);
      state.cmdSet = true;
      return build.configStep(state, `CMD ${JSON.stringify(cmd)}`, (c) => {
        c.Cmd = cmd;
      });
    }
    case 'ENTRYPOINT': {
      const entrypoint = build.commandOf(state, ins.args, []);
      const resetCmd = !state.cmdSet;
      return build.configStep(state, `ENTRYPOINT ${JSON.stringify(entrypoint)}`, (c) => {
        c.Entrypoint = entrypoint;
        if (resetCmd) c.Cmd = null;
      });
    }
    case 'SHELL': {
      const shell = JSON.parse(ins.args) as string[];
      return build.configStep(state, `SHELL ${JSON.stringify(shell)}`, (c) => {
        c.Shell = shell;
      });
    }
    case 'USER': {
      const user = expand(ins.args);
      return build.configStep(state, `USER ${user}`, (c) => {
        c.User = user;
      });
    }
    case 'STOPSIGNAL': {
      const sig = expand(ins.args);
      if (!/^(SIG)?[A-Z0-9+-]+$/i.test(sig)) throw new InvalidParameter(`Invalid signal: ${sig}`);
      return build.configStep(state, `STOPSIGNAL ${sig}`, (c) => {
        c.StopSignal = sig;
      });
    }
    case 'VOLUME': {
      const list = jsonArray(ins.args) ?? expandWords(ins.args, lookup, build.escape);
      for (const v of list) if (v.trim() === '') throw new InvalidParameter('VOLUME specified can not be an empty string');
      return build.configStep(state, `VOLUME ${JSON.stringify(list)}`, (c) => {
        c.Volumes = { ...(c.Volumes ?? {}) };
        for (const v of list) c.Volumes[v] = {};
      });
    }
    case 'ONBUILD': {
      const trigger = ins.args.replace(/^(\S+)/, (k) => k.toUpperCase());
      return build.configStep(state, `ONBUILD ${trigger}`, (c) => {
        c.OnBuild = [...(c.OnBuild ?? []), trigger];
      });
    }
    case 'HEALTHCHECK': {
      const m = /^(\S+)\s*([\s\S]*)$/.exec(ins.args)!;
      if (m[1].toUpperCase() === 'NONE') {
        return build.configStep(state, 'HEALTHCHECK NONE', (c) => {
          c.Healthcheck = { Test: ['NONE'] };
        });
      }
      const exec = jsonArray(m[2]);
      const test = exec ? ['CMD', ...exec] : ['CMD-SHELL', m[2]];
      const hc: NonNullable<ImageRunConfig['Healthcheck']> = { Test: test };
      for (const [flag, key] of [['interval', 'Interval'], ['timeout', 'Timeout'], ['start-period', 'StartPeriod'], ['start-interval', 'StartInterval']] as const) {
        if (ins.flags[flag]) hc[key] = parseDuration(flag, ins.flags[flag][0]);
      }
      if (ins.flags.retries) {
        const r = Number(ins.flags.retries[0]);
        if (!Number.isInteger(r) || r < 0) throw new InvalidParameter(`invalid --retries ${JSON.stringify(ins.flags.retries[0])}`);
        hc.Retries = r;
      }
      return build.configStep(state, `HEALTHCHECK &{${JSON.stringify(test)}}`, (c) => {
        c.Healthcheck = hc;
      });
    }
    case 'WORKDIR':
      return build.workdir(state, expand(ins.args));
    case 'RUN':
      return runCommand(build, state, ins);
    case 'COPY':
    case 'ADD':
      return copyStep(build, state, ins, lookup);
    default:
      throw new InvalidParameter(`${text}: not supported here`);
  }
}
