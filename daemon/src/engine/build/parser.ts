/**
 * The Dockerfile parser of the classic builder: parser directives (`# escape=`), comments, line
 * continuations, heredocs (`<<EOF`), instruction flags (`--from=x`), and a full syntax check before the build
 * starts: an unknown instruction, missing arguments or a bad flag is an InvalidParameter naming the line.
 */
import { InvalidParameter } from '../../errors.js';

export interface Heredoc {
  name: string;
  content: string;
  /** `<<-EOF`: leading tabs were stripped. */
  chomp: boolean;
  /** `<<"EOF"` / `<<'EOF'`: no expansion. */
  quoted: boolean;
}

export interface Instruction {
  /** Upper case: FROM, RUN... */
  keyword: string;
  /** The text after the keyword and its flags, continuations joined (heredoc bodies not included). */
  args: string;
  flags: Record<string, string[]>;
  heredocs: Heredoc[];
  /** 1-based line of the instruction's first line. */
  line: number;
  /** The instruction as written on one line (for messages and the step line). */
  original: string;
}

const FLAGS: Record<string, string[]> = {
  FROM: ['platform'],
  // Parsed so that the build reaches the step, which then fails in the build's output: these need BuildKit.
  RUN: ['mount', 'network', 'security'],
  COPY: ['from', 'chown', 'chmod', 'link'],
  ADD: ['chown', 'chmod', 'checksum', 'link', 'keep-git-dir'],
  HEALTHCHECK: ['interval', 'timeout', 'start-period', 'start-interval', 'retries'],
};

export const INSTRUCTIONS = [
  'FROM', 'RUN', 'CMD', 'LABEL', 'MAINTAINER', 'EXPOSE', 'ENV', 'ADD', 'COPY', 'ENTRYPOINT', 'VOLUME', 'USER', 'WORKDIR',
  'ARG', 'ONBUILD', 'STOPSIGNAL', 'HEALTHCHECK', 'SHELL',
];

function parseError(line: number, message: string): InvalidParameter {
  return new InvalidParameter(`dockerfile parse error on line ${line}: ${message}`);
}

/** Heredoc markers in an instruction line (`<<EOF`, `<<-EOF`, `<<"EOF"`), in order. */
function heredocMarkers(text: string): Array<{ name: string; chomp: boolean; quoted: boolean }> {
  const out: Array<{ name: string; chomp: boolean; quoted: boolean }> = [];
  for (const m of text.matchAll(/<<(-?)(["']?)([A-Za-z_][A-Za-z0-9_]*)\2/g)) out.push({ name: m[3], chomp: m[1] === '-', quoted: m[2] !== '' });
  return out;
}

/** Splits leading `--name=value` flags off the arguments. */
function takeFlags(keyword: string, rest: string, line: number): { flags: Record<string, string[]>; args: string } {
  const flags: Record<string, string[]> = {};
  let args = rest;
  for (;;) {
    const m = /^--([A-Za-z][A-Za-z0-9-]*)(?:=(\S*))?(?:\s+|$)/.exec(args);
    if (!m) break;
    const name = m[1];
    const allowed = FLAGS[keyword] ?? [];
    if (!allowed.includes(name)) throw parseError(line, `unknown flag: ${name}`);
    if (m[2] === undefined && name !== 'link' && name !== 'keep-git-dir') throw parseError(line, `flag --${name} needs a value (--${name}=VALUE)`);
    (flags[name] ??= []).push(m[2] ?? 'true');
    args = args.slice(m[0].length);
  }
  return { flags, args: args.trim() };
}

export interface ParsedDockerfile {
  instructions: Instruction[];
  escape: string;
}

export function parseDockerfile(text: string): ParsedDockerfile {
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  let escape = '\\';
  let i = 0;
  // Parser directives: `# key=value` lines at the very top.
  for (; i < lines.length; i++) {
    const m = /^#\s*([A-Za-z]+)\s*=\s*(\S+)\s*$/.exec(lines[i]);
    if (!m) break;
    const key = m[1].toLowerCase();
    if (key === 'escape') {
      if (m[2] !== '\\' && m[2] !== '`') throw parseError(i + 1, `invalid escape token '${m[2]}' does not match ` + '` or \\');
      escape = m[2];
    } else if (key !== 'syntax' && key !== 'check') break;
  }
  const instructions: Instruction[] = [];
  while (i < lines.length) {
    const raw = lines[i];
    const trimmed = raw.trim();
    if (trimmed === '' || trimmed.startsWith('#')) {
      i++;
      continue;
    }
    const startLine = i + 1;
    // Continuation lines: a trailing escape joins the next line; comment lines inside are skipped.
    let text = '';
    let current = raw;
    for (;;) {
      const t = current.replace(/\s+$/, '');
      if (t.endsWith(escape)) {
        text += t.slice(0, -1);
        i++;
        while (i < lines.length && /^\s*#/.test(lines[i])) i++;
        if (i >= lines.length) break;
        current = lines[i];
        continue;
      }
      text += current;
      i++;
      break;
    }
    const m = /^\s*(\S+)\s*([\s\S]*)$/.exec(text)!;
    const keyword = m[1].toUpperCase();
    if (!INSTRUCTIONS.includes(keyword)) throw parseError(startLine, `unknown instruction: ${m[1]}`);
    const { flags, args } = takeFlags(keyword, m[2], startLine);
    const heredocs: Heredoc[] = [];
    if (keyword === 'RUN' || keyword === 'COPY' || keyword === 'ADD') {
      for (const marker of heredocMarkers(args)) {
        const body: string[] = [];
        let closed = false;
        while (i < lines.length) {
          const l = lines[i++];
          const candidate = marker.chomp ? l.replace(/^\t+/, '') : l;
          if (candidate === marker.name) {
            closed = true;
            break;
          }
          body.push(candidate);
        }
        if (!closed) throw parseError(startLine, `unterminated heredoc ${marker.name}`);
        heredocs.push({ ...marker, content: body.join('\n') + '\n' });
      }
    }
    const instruction: Instruction = { keyword, args, flags, heredocs, line: startLine, original: text.trim().replace(/\s+/g, ' ') };
    checkArguments(instruction);
    instructions.push(instruction);
  }
  if (instructions.length === 0) throw new InvalidParameter('the Dockerfile (build instructions file) is empty');
  const first = instructions.find((x) => x.keyword !== 'ARG');
  if (!first || first.keyword !== 'FROM') {
    throw parseError((first ?? instructions[0]).line, 'no build stage in current context: the first instruction must be FROM (ARG may come before it)');
  }
  return { instructions, escape };
}

function isJsonArray(text: string): boolean {
  if (!text.startsWith('[')) return false;
  try {
    const v = JSON.parse(text) as unknown;
    return Array.isArray(v) && v.every((x) => typeof x === 'string');
  } catch {
    return false;
  }
}

/** The syntax rules of each instruction's arguments (what the classic builder refuses before step 1). */
export function checkArguments(ins: Instruction): void {
  const { keyword, args, line } = ins;
  const need = (ok: boolean, message: string) => {
    if (!ok) throw parseError(line, message);
  };
  switch (keyword) {
    case 'FROM': {
      const words = args.split(/\s+/).filter(Boolean);
      need(words.length === 1 || (words.length === 3 && words[1].toLowerCase() === 'as'), 'FROM requires either one or three arguments (FROM image [AS name])');
      if (words.length === 3) need(/^[a-zA-Z][a-zA-Z0-9_.-]*$/.test(words[2]), `invalid name for build stage: ${JSON.stringify(words[2])}, name can't start with a number or contain symbols`);
      break;
    }
    case 'RUN':
    case 'CMD':
    case 'ENTRYPOINT':
      need(args !== '', `${keyword} requires at least one argument`);
      break;
    case 'SHELL':
      need(isJsonArray(args) && (JSON.parse(args) as string[]).length > 0, 'SHELL requires the arguments to be in JSON form, e.g. SHELL ["/bin/sh", "-c"]');
      break;
    case 'COPY':
    case 'ADD': {
      const words = isJsonArray(args) ? (JSON.parse(args) as string[]) : args.split(/\s+/).filter(Boolean);
      need(words.length >= 2 || (ins.heredocs.length > 0 && words.length >= 2), `${keyword} requires at least two arguments, but only ${words.length} provided`);
      if (ins.flags.chmod) need(/^[0-7]{3,4}$/.test(ins.flags.chmod[0]), `invalid chmod parameter ${JSON.stringify(ins.flags.chmod[0])}: an octal mode is expected`);
      break;
    }
    case 'ENV':
    case 'LABEL':
      need(args !== '', `${keyword} requires at least one argument`);
      break;
    case 'ARG':
      need(args !== '' && !/\s/.test(args.replace(/=.*$/, '')), 'ARG requires exactly one argument');
      need(/^[A-Za-z_][A-Za-z0-9_]*(=|$)/.test(args), `ARG names must be letters, digits and underscores: ${JSON.stringify(args)}`);
      break;
    case 'EXPOSE':
    case 'VOLUME':
    case 'USER':
    case 'WORKDIR':
    case 'STOPSIGNAL':
    case 'MAINTAINER':
      need(args !== '', `${keyword} requires at least one argument`);
      break;
    case 'ONBUILD': {
      const m = /^(\S+)/.exec(args);
      need(m !== null, 'ONBUILD requires at least one argument');
      const inner = m![1].toUpperCase();
      need(inner !== 'ONBUILD', 'Chaining ONBUILD via `ONBUILD ONBUILD` isn\'t allowed');
      need(inner !== 'FROM' && inner !== 'MAINTAINER', `${inner} isn't allowed as an ONBUILD trigger`);
      need(INSTRUCTIONS.includes(inner), `unknown instruction: ${m![1]}`);
      break;
    }
    case 'HEALTHCHECK': {
      const m = /^(\S+)\s*([\s\S]*)$/.exec(args);
      need(m !== null, 'HEALTHCHECK requires at least one argument');
      const kind = m![1].toUpperCase();
      need(kind === 'NONE' || kind === 'CMD', `Unknown type ${JSON.stringify(m![1])} in HEALTHCHECK (try CMD)`);
      if (kind === 'NONE') need(m![2] === '' && Object.keys(ins.flags).length === 0, 'HEALTHCHECK NONE takes no arguments');
      else need(m![2] !== '', 'Missing command after HEALTHCHECK CMD');
      break;
    }
  }
}

/** Parses one instruction given as a line (ONBUILD triggers, the `labels` parameter). */
export function parseInstructionLine(text: string, line: number): Instruction {
  const parsed = parseDockerfile(`FROM scratch\n${text}`);
  const ins = parsed.instructions[1];
  if (!ins) throw parseError(line, `empty instruction: ${JSON.stringify(text)}`);
  return { ...ins, line };
}
