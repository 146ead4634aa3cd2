import assert from 'node:assert/strict';
import { test } from 'node:test';
import { exactMatch, inCreationWindow, matchLabels, matchNotLabels, prefixMatch } from './filters.js';

test('label filters: key needs the label, key=value its value, every filter must hold', () => {
  const labels = { tier: 'front', 'com.example.owner': 'ops', empty: '' };
  assert.equal(matchLabels(undefined, labels), true);
  assert.equal(matchLabels(['tier'], labels), true);
  assert.equal(matchLabels(['tier=front'], labels), true);
  assert.equal(matchLabels(['tier=back'], labels), false);
  assert.equal(matchLabels(['tier', 'com.example.owner=ops'], labels), true);
  assert.equal(matchLabels(['tier', 'missing'], labels), false);
  assert.equal(matchLabels(['empty='], labels), true);
  assert.equal(matchLabels(['a=b=c'], { a: 'b=c' }), true);
  assert.equal(matchLabels(['tier'], null), false);
  assert.equal(matchNotLabels(['tier=back'], labels), true);
  assert.equal(matchNotLabels(['tier'], labels), false);
});

test('exact and prefix matches; an empty filter matches all', () => {
  assert.equal(exactMatch([], 'x'), true);
  assert.equal(exactMatch(['x'], 'x'), true);
  assert.equal(exactMatch(['x'], 'xy'), false);
  assert.equal(prefixMatch(['ab'], 'abcdef'), true);
  assert.equal(prefixMatch(['abd'], 'abcdef'), false);
  assert.equal(prefixMatch(['ab'], undefined), false);
});

test('before/since keep objects created strictly before/after the reference', () => {
  assert.equal(inCreationWindow(5n, { before: 6n }), true);
  assert.equal(inCreationWindow(6n, { before: 6n }), false);
  assert.equal(inCreationWindow(7, { since: 6 }), true);
  assert.equal(inCreationWindow(6, { since: 6 }), false);
  assert.equal(inCreationWindow(5, { since: 1, before: 9 }), true);
});
