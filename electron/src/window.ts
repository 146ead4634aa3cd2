/** The one window: isolated, sandboxed, no Node in the page, and no navigation away from the app. */
import type { BrowserWindowConstructorOptions, WebContents } from 'electron';

export function windowOptions(preload: string, dark: boolean): BrowserWindowConstructorOptions {
  return {
    width: 1280,
    height: 820,
    minWidth: 800,
    minHeight: 560,
    title: 'Berth',
    show: false,
    backgroundColor: dark ? '#12151c' : '#f7f8fa',
    webPreferences: {
      preload,
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInWorker: false,
      webviewTag: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      spellcheck: false,
    },
  };
}

/** Links the page may hand to the system's browser: plain web addresses (a container's published port). */
export function isExternalWebLink(url: string): boolean {
  try {
    const u = new URL(url);
    return (u.protocol === 'http:' || u.protocol === 'https:') && !u.username && !u.password;
  } catch {
    return false;
  }
}

/**
 * The page may only stay on the app's own file; new windows and navigations elsewhere are denied. A link
 * opened in a new window (`target=_blank`) to a web address goes to the system's browser instead, when
 * `openExternal` is given; nothing else is ever opened.
 */
export function guardNavigation(contents: Pick<WebContents, 'on' | 'setWindowOpenHandler'>, appUrl: string, openExternal?: (url: string) => unknown): void {
  const base = appUrl.replace(/#.*$/, '');
  contents.setWindowOpenHandler((details?: { url?: string }) => {
    const url = details?.url ?? '';
    if (openExternal && isExternalWebLink(url)) void Promise.resolve(openExternal(url)).catch(() => undefined);
    return { action: 'deny' };
  });
  contents.on('will-navigate', (event: { preventDefault(): void }, url: string) => {
    if (url.replace(/#.*$/, '') !== base) event.preventDefault();
  });
}
