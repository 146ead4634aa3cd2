/** The one window: isolated, sandboxed, no Node in the page, and no navigation away from the app. */
import type { BrowserWindowConstructorOptions, WebContents } from 'electron';

export function windowOptions(preload: string, dark: boolean): BrowserWindowConstructorOptions {
  return {
    width: 1280,
    height: 820,
    minWidth: 900,
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

/** The page may only stay on the app's own file; new windows and navigations elsewhere are denied. */
export function guardNavigation(contents: Pick<WebContents, 'on' | 'setWindowOpenHandler'>, appUrl: string): void {
  const base = appUrl.replace(/#.*$/, '');
  contents.setWindowOpenHandler(() => ({ action: 'deny' }));
  contents.on('will-navigate', (event: { preventDefault(): void }, url: string) => {
    if (url.replace(/#.*$/, '') !== base) event.preventDefault();
  });
}
