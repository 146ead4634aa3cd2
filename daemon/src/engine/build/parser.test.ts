import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isIgnored, parseDockerignore } from './context.js';
import { parseDockerfile } from './parser.js';
import { expandWord, expandWords, keyValuePairs } from './words.js';

describe('Dockerfile parser', () => {
  it('joins continuations, skips comments inside them, reads flags and heredocs', () => {
    const { instructions } = parseDockerfile('# syntax=x\nFROM busybox AS base\nRUN echo a \\\n# inner comment\n  && echo b\nCOPY --from=base --chown=1:2 a b\nRUN <<EOF\necho hi\nEOF\nrun true\n');
    assert.deepEqual(instructions.map((i) => i.keyword), ['FROM', 'RUN', 'COPY', 'RUN', 'RUN']);
    assert.equal(instructions[1].args, 'echo a   && echo b');
    assert.deepEqual(instructions[2].flags, { from: ['base'], chown: ['1:2'] });
    assert.equal(instructions[3].heredocs[0].content, 'echo hi\n');
    assert.equal(instructions[4].line, 10);
  });

  it('honours the escape directive', () => {
    const { instructions, escape } = parseDockerfile('# escape=`\nFROM busybox\nRUN echo a `\n  b\n');
    assert.equal(escape, '`');
    assert.equal(instructions[1].args, 'echo a   b');
  });

  it('refuses unknown instructions, flags and missing arguments with the line', () => {
    assert.throws(() => parseDockerfile('FROM busybox\nFOO bar\n'), /line 2: unknown instruction: FOO/);
    assert.throws(() => parseDockerfile('FROM busybox\nCOPY --nope=1 a b\n'), /line 2: unknown flag: nope/);
    assert.throws(() => parseDockerfile('FROM busybox\nCMD\n'), /CMD requires at least one argument/);
    assert.throws(() => parseDockerfile('FROM a b\n'), /FROM requires either one or three arguments/);
    assert.throws(() => parseDockerfile('FROM busybox\nONBUILD FROM x\n'), /FROM isn't allowed as an ONBUILD trigger/);
    assert.throws(() => parseDockerfile('FROM busybox\nRUN <<EOF\nno end\n'), /unterminated heredoc EOF/);
    assert.throws(() => parseDockerfile('\n# only a comment\n'), /empty/);
    // BuildKit's RUN flags parse; the build fails at their step (in its output, as dockerd's classic builder).
    assert.deepEqual(parseDockerfile('FROM busybox\nRUN --mount=type=cache,target=/x true\n').instructions[1].flags, { mount: ['type=cache,target=/x'] });
  });
});

describe('variable substitution', () => {
  const vars: Record<string, string> = { A: 'a', EMPTY: '', SP: 'x y' };
  const lookup = (n: string) => vars[n];

  it('substitutes $VAR, ${VAR}, defaults and alternatives, respecting quotes and escapes', () => {
    assert.equal(expandWord('$A-${A}', lookup), 'a-a');
    assert.equal(expandWord('${MISSING:-def} ${EMPTY:-def} ${EMPTY-def}', lookup), 'def def ');
    assert.equal(expandWord('${A:+alt} ${MISSING:+alt}|', lookup), 'alt |');
    assert.equal(expandWord("'$A' \"$A\" \\$A", lookup), '$A a $A');
    assert.deepEqual(expandWords('one "two three" $SP', lookup), ['one', 'two three', 'x', 'y']);
  });

  it('reads ENV and LABEL pairs in both forms', () => {
    assert.deepEqual(keyValuePairs('ENV', 'K=v K2="two words" K3=$A', lookup), [['K', 'v'], ['K2', 'two words'], ['K3', 'a']]);
    assert.deepEqual(keyValuePairs('ENV', 'K value with  spaces', lookup), [['K', 'value with  spaces']]);
  });
});

describe('.dockerignore', () => {
  it('matches paths and their parents, with ** and ! exceptions in order', () => {
    const patterns = parseDockerignore('# c\n*.tmp\n**/*.log\n!keep/*.log\nbuild/\n/abs\n');
    assert.equal(isIgnored(patterns, 'a.tmp'), true);
    assert.equal(isIgnored(patterns, 'sub/a.tmp'), false);
    assert.equal(isIgnored(patterns, 'x.log'), true);
    assert.equal(isIgnored(patterns, 'deep/er/x.log'), true);
    assert.equal(isIgnored(patterns, 'keep/x.log'), false);
    assert.equal(isIgnored(patterns, 'build/out/file'), true);
    assert.equal(isIgnored(patterns, 'abs'), true);
    assert.equal(isIgnored(patterns, 'src/main.c'), false);
  });
});
