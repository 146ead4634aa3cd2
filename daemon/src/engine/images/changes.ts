/**
 * Dockerfile-like `changes` of `docker import --change` and `docker commit --change`: one instruction per
 * value (CMD, ENTRYPOINT, ENV, EXPOSE, LABEL, ONBUILD, STOPSIGNAL, USER, VOLUME, WORKDIR), applied to an
 * image's run configuration.
 */
import { InvalidParameter } from '../../errors.js';
import type { ImageRunConfig } from './types.js';

const ALLOWED = ['CMD', 'ENTRYPOINT', 'ENV', 'EXPOSE', 'LABEL', 'ONBUILD', 'STOPSIGNAL', 'USER', 'VOLUME', 'WORKDIR'];

/** Splits words the way Dockerfile key=value lists are split: quotes group, backslash escapes. */
export function splitWords(text: string): string[] {
  const words: string[] = [];
  let current = '';
  let inWord = false;
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote) quote = null;
      else if (c === '\\' && quote === '"' && i + 1 < text.length) current += text[++i];
      else current += c;
      continue;
    }
    if (c === '"' || c === "'") {
      quote = c;
      inWord = true;
    } else if (c === '\\' && i + 1 < text.length) {
      current += text[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(current);
      current = '';
      inWord = false;
    } else {
      current += c;
      inWord = true;
    }
  }
  if (quote) throw new InvalidParameter(`unterminated quote in ${JSON.stringify(text)}`);
  if (inWord) words.push(current);
  return words;
}

/** JSON array form (`["a", "b"]`) or shell form (`a b` -> `/bin/sh -c "a b"`). */
function commandForm(args: string): string[] {
  const trimmed = args.trim();
  if (trimmed.startsWith('[')) {
    try {
      const parsed = JSON.parse(trimmed) as unknown;
      if (Array.isArray(parsed) && parsed.every((p) => typeof p === 'string')) return parsed as string[];
    } catch {
      // Not JSON: Dockerfile semantics take it as the shell form.
    }
  }
  return ['/bin/sh', '-c', trimmed];
}

function keyValues(instruction: string, args: string): Array<[string, string]> {
  const words = splitWords(args);
  if (words.length === 0) throw new InvalidParameter(`${instruction} requires at least one argument`);
  if (!words[0].includes('=')) {
    // Legacy form: `ENV key value with spaces`.
    const m = /^\s*(\S+)\s+([\s\S]*)$/.exec(args);
    if (!m) throw new InvalidParameter(`${instruction} ${args}: expected key=value or key value`);
    return [[m[1], splitWords(m[2]).join(' ')]];
  }
  return words.map((w) => {
    const eq = w.indexOf('=');
    if (eq <= 0) throw new InvalidParameter(`${instruction} ${args}: ${JSON.stringify(w)} is not key=value`);
    return [w.slice(0, eq), w.slice(eq + 1)];
  });
}

/**
 * The instructions of the `changes` values. As in Docker, the values are read as one Dockerfile (joined with
 * newlines): a value may hold several instructions on lines of their own, a line ending in a backslash goes
 * on on the next one, and blank lines and `#` comments are skipped.
 */
export function changeInstructions(changes: string[]): string[] {
  const instructions: string[] = [];
  let pending: string | undefined;
  for (const raw of changes.join('\n').split('\n')) {
    const line = raw.replace(/\r$/, '');
    if (pending === undefined && /^\s*(#|$)/.test(line)) continue;
    // A comment line inside a continued instruction is dropped, as the Dockerfile parser does.
    if (pending !== undefined && /^\s*#/.test(line)) continue;
    const continued = /\\\s*$/.test(line);
    const text = continued ? line.replace(/\\\s*$/, '') : line;
    pending = pending === undefined ? text : `${pending}${text}`;
    if (!continued) {
      instructions.push(pending);
      pending = undefined;
    }
  }
  if (pending !== undefined && pending.trim() !== '') instructions.push(pending);
  return instructions;
}

/** Applies change lines to a copy of `config` and returns it. */
export function applyChanges(config: ImageRunConfig, changes: string[]): ImageRunConfig {
  const out: ImageRunConfig = JSON.parse(JSON.stringify(config)) as ImageRunConfig;
  for (const line of changeInstructions(changes)) {
    const m = /^\s*(\S+)\s*([\s\S]*)$/.exec(line);
    if (!m) continue;
    const instruction = m[1].toUpperCase();
    const args = m[2].trim();
    if (!ALLOWED.includes(instruction)) throw new InvalidParameter(`${m[1]} is not a valid change command`);
    switch (instruction) {
      case 'CMD':
        out.Cmd = commandForm(args);
        break;
      case 'ENTRYPOINT':
        out.Entrypoint = commandForm(args);
        break;
      case 'ENV': {
        const env = [...(out.Env ?? [])];
        for (const [k, v] of keyValues(instruction, args)) {
          const i = env.findIndex((e) => e.split('=')[0] === k);
          if (i >= 0) env[i] = `${k}=${v}`;
          else env.push(`${k}=${v}`);
        }
        out.Env = env;
        break;
      }
      case 'LABEL': {
        const labels = { ...(out.Labels ?? {}) };
        for (const [k, v] of keyValues(instruction, args)) labels[k] = v;
        out.Labels = labels;
        break;
      }
      case 'EXPOSE': {
        const ports = { ...(out.ExposedPorts ?? {}) };
        for (const word of splitWords(args)) {
          const pm = /^(\d+)(?:-(\d+))?(?:\/(tcp|udp|sctp))?$/i.exec(word);
          if (!pm) throw new InvalidParameter(`EXPOSE: invalid port ${JSON.stringify(word)}`);
          const from = Number(pm[1]);
          const to = pm[2] ? Number(pm[2]) : from;
          if (from < 1 || to > 65535 || to < from) throw new InvalidParameter(`EXPOSE: invalid port range ${JSON.stringify(word)}`);
          for (let p = from; p <= to; p++) ports[`${p}/${(pm[3] ?? 'tcp').toLowerCase()}`] = {};
        }
        out.ExposedPorts = ports;
        break;
      }
      case 'ONBUILD':
        out.OnBuild = [...(out.OnBuild ?? []), args];
        break;
      case 'STOPSIGNAL':
        if (!args) throw new InvalidParameter('STOPSIGNAL requires one argument');
        out.StopSignal = args;
        break;
      case 'USER':
        if (!args) throw new InvalidParameter('USER requires one argument');
        out.User = args;
        break;
      case 'WORKDIR':
        if (!args) throw new InvalidParameter('WORKDIR requires one argument');
        out.WorkingDir = args.startsWith('/') ? args : `${(out.WorkingDir ?? '/').replace(/\/$/, '')}/${args}`;
        break;
      case 'VOLUME': {
        const volumes = { ...(out.Volumes ?? {}) };
        let list: string[];
        if (args.startsWith('[')) {
          try {
            list = JSON.parse(args) as string[];
          } catch {
            list = splitWords(args);
          }
        } else list = splitWords(args);
        for (const v of list) volumes[String(v)] = {};
        out.Volumes = volumes;
        break;
      }
    }
  }
  return out;
}
