/**
 * tar-stream, loaded at its first use: an idle daemon carries neither it nor the loader of CommonJS
 * modules from ES modules (together several megabytes of resident memory).
 */
import { createRequire } from 'node:module';
import type TarStream from 'tar-stream';

const require = createRequire(import.meta.url);
let loaded: typeof TarStream | undefined;

export function tarStream(): typeof TarStream {
  return (loaded ??= require('tar-stream') as typeof TarStream);
}
