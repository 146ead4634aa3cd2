import assert from 'node:assert/strict';
import { test } from 'node:test';
import { splitSearchTerm } from './search.js';

test('the registry part of a search term picks the index; without one it is Docker Hub', () => {
  assert.deepEqual(splitSearchTerm('busybox'), { index: 'docker.io', remote: 'busybox' });
  assert.deepEqual(splitSearchTerm('someone/tools'), { index: 'docker.io', remote: 'someone/tools' });
  assert.deepEqual(splitSearchTerm('127.0.0.1:5000/busybox'), { index: '127.0.0.1:5000', remote: 'busybox' });
  assert.deepEqual(splitSearchTerm('localhost/team/app'), { index: 'localhost', remote: 'team/app' });
  assert.deepEqual(splitSearchTerm('registry.example.com/app'), { index: 'registry.example.com', remote: 'app' });
  assert.deepEqual(splitSearchTerm('index.docker.io/library/busybox'), { index: 'docker.io', remote: 'library/busybox' });
});
