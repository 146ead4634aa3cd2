/**
 * Regular expressions that come from clients (filters, globs of image references, .dockerignore and
 * COPY sources). Docker compiles them with Go's regexp package (RE2): matching takes time linear in the
 * input, whatever the pattern, and Perl-only constructs (lookaround, backreferences) are syntax errors.
 * JavaScript's RegExp backtracks, so that a short pattern such as `(a+)+$` can take seconds on a name;
 * these go through re2js instead, a port of RE2 with Go's syntax.
 */
import { createRequire } from 'node:module';
import type { RE2JS } from 're2js';
import { InvalidParameter } from '../errors.js';

// re2js is about 260 kB of code: it is loaded (its CommonJS build, synchronously) at the first pattern a client
// sends, not with the daemon, which starts and idles without it.
let re2js: typeof RE2JS | undefined;
const loadRe2js = (): typeof RE2JS => (re2js ??= (createRequire(import.meta.url)('re2js') as typeof import('re2js')).RE2JS);

/** A compiled client pattern: `test` is true when the pattern matches somewhere in the text. */
export interface LinearRegExp {
  test(text: string): boolean;
}

/**
 * Compiles a pattern in Go's syntax. A syntax error is an InvalidParameter naming `what` (for example
 * `filter 'name'`) with RE2's own words.
 */
export function compileLinear(pattern: string, what: string): LinearRegExp {
  let re: RE2JS;
  try {
    re = loadRe2js().compile(pattern);
  } catch (err) {
    throw new InvalidParameter(`invalid ${what} ${JSON.stringify(pattern)}: ${(err as Error).message}`, { cause: err });
  }
  return { test: (text: string) => re.matcher(text).find() };
}
