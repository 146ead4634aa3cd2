import { QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './App';
import { createQueryClient, TransportContext } from './engine';
import './styles.css';
import { createTransport } from './transport';

const transport = createTransport();
const queryClient = createQueryClient();

// The first view's data is asked for before React starts, not after its first render.
if (/^(#\/?)?(containers\/?)?$/.test(location.hash)) {
  void queryClient.prefetchQuery({ queryKey: ['containers'], queryFn: () => transport.request('GET', '/containers/json?all=1') });
}

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <TransportContext.Provider value={transport}>
      <QueryClientProvider client={queryClient}>
        <App />
      </QueryClientProvider>
    </TransportContext.Provider>
  </StrictMode>,
);
