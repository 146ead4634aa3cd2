import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { trayTemplate } from '../src/tray.js';
import { guardNavigation, windowOptions } from '../src/window.js';

describe('tray menu', () => {
  const actions = { show: () => undefined, start: () => undefined, stop: () => undefined, quit: () => undefined };
  const find = (items: ReturnType<typeof trayTemplate>, label: string) => items.find((i) => i.label === label)!;

  it("shows the engine's state and offers start or stop accordingly", () => {
    const running = trayTemplate('running', { mode: 'embedded', socketPath: '/s' }, actions);
    assert.equal(running[0]!.label, 'Engine running');
    assert.equal(find(running, 'Start engine').enabled, false);
    assert.equal(find(running, 'Stop engine').enabled, true);
    const stopped = trayTemplate('stopped', { mode: 'embedded', socketPath: '/s' }, actions);
    assert.equal(find(stopped, 'Start engine').enabled, true);
    assert.equal(find(stopped, 'Stop engine').enabled, false);
    const failed = trayTemplate('error', { mode: 'socket', socketPath: '/s', error: 'no engine answers on /s' }, actions);
    assert.equal(failed[0]!.label, 'Engine failed: no engine answers on /s');
    assert.equal(failed[1]!.label, 'Connected to /s');
    assert.equal(find(failed, 'Disconnect').enabled, false);
    const starting = trayTemplate('starting', { mode: 'embedded', socketPath: '/s' }, actions);
    assert.equal(find(starting, 'Start engine').enabled, false);
  });
});

describe('window', () => {
  it('isolates the page: context isolation, sandbox, no Node integration', () => {
    const o = windowOptions('/app/preload.cjs', false);
    assert.equal(o.webPreferences!.contextIsolation, true);
    assert.equal(o.webPreferences!.sandbox, true);
    assert.equal(o.webPreferences!.nodeIntegration, false);
    assert.equal(o.webPreferences!.webviewTag, false);
    assert.equal(o.webPreferences!.preload, '/app/preload.cjs');
  });

  it('denies new windows and navigation away from the app', () => {
    const handlers: Record<string, (...a: any[]) => void> = {};
    let openHandler: (() => { action: string }) | undefined;
    guardNavigation({ on: (ev: string, h: (...a: any[]) => void) => (handlers[ev] = h), setWindowOpenHandler: (h: () => { action: string }) => (openHandler = h) } as never, 'file:///app/index.html');
    assert.deepEqual(openHandler!(), { action: 'deny' });
    let prevented = 0;
    const event = { preventDefault: () => prevented++ };
    handlers['will-navigate']!(event, 'file:///app/index.html#/images');
    assert.equal(prevented, 0);
    handlers['will-navigate']!(event, 'https://evil.example/');
    assert.equal(prevented, 1);
  });

  it("opens a published port's web link in the system's browser, and nothing else", () => {
    let openHandler: ((d: { url: string }) => { action: string }) | undefined;
    const opened: string[] = [];
    guardNavigation(
      { on: () => undefined, setWindowOpenHandler: (h: (d: { url: string }) => { action: string }) => (openHandler = h) } as never,
      'file:///app/index.html',
      (url) => opened.push(url),
    );
    assert.deepEqual(openHandler!({ url: 'http://127.0.0.1:8080' }), { action: 'deny' }, 'never a new app window');
    assert.deepEqual(openHandler!({ url: 'file:///etc/passwd' }), { action: 'deny' });
    openHandler!({ url: 'javascript:alert(1)' });
    openHandler!({ url: 'http://user:pw@127.0.0.1:1/' });
    openHandler!({ url: 'https://[::1]:8443/x' });
    assert.deepEqual(opened, ['http://127.0.0.1:8080', 'https://[::1]:8443/x']);
  });
});
