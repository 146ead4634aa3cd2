import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// base './': the same build loads from file:// in Electron and from `berthd --ui` over HTTP.
export default defineConfig({
  base: './',
  plugins: [react()],
  build: { outDir: 'dist', emptyOutDir: true, chunkSizeWarningLimit: 1500 },
});
