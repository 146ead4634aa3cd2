import { QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './App';
import { createQueryClient, TransportContext } from './engine';
import './styles.css';
import { createTransport } from './transport';

declare global {
  interface Window {
    /** Set by the inline script of index.html: the container list, asked for before this bundle was compiled. */
    berthBoot?: { at?: number; containers?: Promise<{ status: number; text: string } | undefined> };
  }
}

const transport = createTransport();
const queryClient = createQueryClient();
/** When the app first asked the engine for something: the event stream replays what happened since. */
const startedAt = window.berthBoot?.at ?? Date.now();

// The first view's data is asked for before React starts: by index.html's script when it ran, else here.
if (/^(#\/?)?(containers\/?)?$/.test(location.hash)) {
  const early = window.berthBoot?.containers;
  void queryClient.prefetchQuery({
    queryKey: ['containers'],
    queryFn: async () => {
      const answer = await early;
      // Anything but a plain success is asked again, so that an error reads as every other one does.
      if (answer?.status === 200) return JSON.parse(answer.text) as unknown;
      return transport.request('GET', '/containers/json?all=1');
    },
  });
}

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <TransportContext.Provider value={transport}>
      <QueryClientProvider client={queryClient}>
        <App since={startedAt} />
      </QueryClientProvider>
    </TransportContext.Provider>
  </StrictMode>,
);
