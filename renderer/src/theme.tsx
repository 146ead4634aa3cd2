/**
 * The theme: the user's choice (system, light or dark), kept in the page's storage, and in the desktop app
 * also in its settings (so that the window's own colours follow). `system` follows the OS as it changes.
 */
import { createContext, useContext, useEffect, useState } from 'react';

export type ThemeChoice = 'system' | 'light' | 'dark';
export type Theme = 'light' | 'dark';

const KEY = 'berth.theme';
const DARK = '(prefers-color-scheme: dark)';

function readChoice(): ThemeChoice {
  const saved = localStorage.getItem(KEY);
  return saved === 'light' || saved === 'dark' || saved === 'system' ? saved : 'system';
}

export const ThemeContext = createContext<{ choice: ThemeChoice; theme: Theme; setChoice(choice: ThemeChoice): void }>({
  choice: 'system',
  theme: 'light',
  setChoice: () => undefined,
});

export function useTheme() {
  return useContext(ThemeContext);
}

/** The state behind ThemeContext; the App holds it once. */
export function useThemeState() {
  const [choice, setChoiceState] = useState<ThemeChoice>(readChoice);
  const [systemDark, setSystemDark] = useState(() => matchMedia(DARK).matches);
  useEffect(() => {
    const query = matchMedia(DARK);
    const on = () => setSystemDark(query.matches);
    query.addEventListener('change', on);
    return () => query.removeEventListener('change', on);
  }, []);
  // The desktop app's settings hold the choice too: read once, so that it wins over a fresh page's storage.
  useEffect(() => {
    void window.berth?.settings
      ?.get()
      .then((s) => {
        if (s?.theme === 'light' || s?.theme === 'dark' || s?.theme === 'system') setChoiceState(s.theme);
      })
      .catch(() => undefined);
  }, []);
  const theme: Theme = choice === 'system' ? (systemDark ? 'dark' : 'light') : choice;
  useEffect(() => {
    document.documentElement.dataset.theme = theme;
    localStorage.setItem(KEY, choice);
  }, [theme, choice]);
  const setChoice = (next: ThemeChoice) => {
    setChoiceState(next);
    void window.berth?.settings?.update({ theme: next }).catch(() => undefined);
  };
  return { choice, theme, setChoice };
}
