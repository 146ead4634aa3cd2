import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidParameter } from '../../errors.js';
import { applyChanges } from './changes.js';

describe('import changes', () => {
  it('applies the Dockerfile instructions import allows', () => {
    const config = applyChanges({ Env: ['PATH=/bin'] }, [
      'CMD ["/bin/sh", "-c", "echo hi"]',
      'ENTRYPOINT /entry.sh --flag',
      'ENV A=1 B="two words"',
      'ENV PATH /usr/bin:/bin',
      'LABEL "com.example.x"="y z" plain=1',
      'EXPOSE 80 53/udp 9000-9001',
      'USER app:app',
      'WORKDIR /srv',
      'WORKDIR data',
      'VOLUME ["/data", "/cache"]',
      'STOPSIGNAL SIGINT',
      'ONBUILD RUN true',
    ]);
    assert.deepEqual(config.Cmd, ['/bin/sh', '-c', 'echo hi']);
    assert.deepEqual(config.Entrypoint, ['/bin/sh', '-c', '/entry.sh --flag']);
    assert.deepEqual(config.Env, ['PATH=/usr/bin:/bin', 'A=1', 'B=two words']);
    assert.deepEqual(config.Labels, { 'com.example.x': 'y z', plain: '1' });
    assert.deepEqual(config.ExposedPorts, { '80/tcp': {}, '53/udp': {}, '9000/tcp': {}, '9001/tcp': {} });
    assert.equal(config.User, 'app:app');
    assert.equal(config.WorkingDir, '/srv/data');
    assert.deepEqual(config.Volumes, { '/data': {}, '/cache': {} });
    assert.equal(config.StopSignal, 'SIGINT');
    assert.deepEqual(config.OnBuild, ['RUN true']);
  });

  it('refuses instructions that need a build and malformed values', () => {
    assert.throws(() => applyChanges({}, ['RUN rm -rf /']), /RUN is not a valid change command/);
    assert.throws(() => applyChanges({}, ['FROM scratch']), InvalidParameter);
    assert.throws(() => applyChanges({}, ['EXPOSE http']), InvalidParameter);
    assert.throws(() => applyChanges({}, ['ENV A="unterminated']), InvalidParameter);
  });
});

describe('changes holding several instructions', () => {
  it('applies each line of a value, continued lines as one, without blank lines and comments', () => {
    const config = applyChanges({}, ['ENV A=1\nLABEL x=y\n\n# a comment\nCMD echo \\\n  continued', 'USER app']);
    assert.deepEqual(config.Env, ['A=1']);
    assert.deepEqual(config.Labels, { x: 'y' });
    assert.deepEqual(config.Cmd, ['/bin/sh', '-c', 'echo   continued']);
    assert.equal(config.User, 'app');
  });

  it('refuses a line of a value that is not a change command', () => {
    assert.throws(() => applyChanges({}, ['ENV A=1\nRUN true']), InvalidParameter);
  });
});
