import { createHash } from 'node:crypto';
import { defineConfig, type Plugin } from 'vite';
import react from '@vitejs/plugin-react';

/**
 * The page's Content-Security-Policy, written into index.html as a meta element, so that the page has it
 * wherever it is loaded from: Electron loads the file from file://, where no server sends a header.
 * `berthd --ui` sends the same policy as a header (daemon/src/ui/server.ts; the end-to-end tests check
 * that the two agree), with frame-ancestors besides, which a meta element cannot carry. Inline scripts
 * (the boot script of index.html) are allowed by their sha256, as the daemon does.
 */
const POLICY = "default-src 'self'; connect-src 'self' ws: wss:; style-src 'self' 'unsafe-inline'; img-src 'self' data:";

function contentSecurityPolicy(): Plugin {
  return {
    name: 'berth-csp',
    apply: 'build',
    transformIndexHtml: {
      order: 'post',
      handler(html) {
        const hashes: string[] = [];
        for (const m of html.matchAll(/<script(\s[^>]*)?>([\s\S]*?)<\/script>/gi)) {
          if (/\ssrc\s*=/i.test(m[1] ?? '') || !m[2]!.trim()) continue;
          hashes.push(`'sha256-${createHash('sha256').update(m[2]!, 'utf8').digest('base64')}'`);
        }
        const policy = hashes.length ? `${POLICY}; script-src 'self' ${hashes.join(' ')}` : POLICY;
        // Before any script: a policy applies only to what comes after it (the charset stays first).
        const meta = `<meta http-equiv="Content-Security-Policy" content="${policy}" />`;
        return /<meta charset[^>]*>/i.test(html) ? html.replace(/(<meta charset[^>]*>)/i, `$1\n    ${meta}`) : html.replace(/<head>/i, `<head>\n    ${meta}`);
      },
    },
  };
}

// base './': the same build loads from file:// in Electron and from `berthd --ui` over HTTP.
export default defineConfig({
  base: './',
  plugins: [react(), contentSecurityPolicy()],
  build: { outDir: 'dist', emptyOutDir: true, chunkSizeWarningLimit: 1500 },
});
