import { QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './App';
import { createQueryClient, TransportContext } from './engine';
import './styles.css';
import { createTransport } from './transport';

const transport = createTransport();
const queryClient = createQueryClient();

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <TransportContext.Provider value={transport}>
      <QueryClientProvider client={queryClient}>
        <App />
      </QueryClientProvider>
    </TransportContext.Provider>
  </StrictMode>,
);
