/**
 * Variable substitution and word splitting where the Dockerfile applies them (FROM, ADD, COPY, ENV, EXPOSE,
 * LABEL, STOPSIGNAL, USER, VOLUME, WORKDIR, ARG): `$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR:+alt}`
 * (and the forms without the colon), single quotes verbatim, double quotes with substitution, the escape
 * character escaping the next one.
 */
import { InvalidParameter } from '../../errors.js';

export type Lookup = (name: string) => string | undefined;

/**
 * Expands `text` into words: quotes group and are removed, unquoted whitespace splits (unless `single`),
 * variables are substituted.
 */
export function expandWords(text: string, lookup: Lookup, escape = '\\', single = false): string[] {
  const words: string[] = [];
  let current = '';
  let inWord = false;
  let i = 0;

  const readVar = (_inQuotes: boolean): string => {
    // At text[i] === '$'.
    i++;
    if (text[i] === '{') {
      const end = matchBrace(text, i);
      if (end < 0) throw new InvalidParameter(`missing '}' in ${JSON.stringify(text)}`);
      const inner = text.slice(i + 1, end);
      i = end + 1;
      const m = /^([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-+])([\s\S]*))?$/.exec(inner);
      if (!m) throw new InvalidParameter(`bad substitution: \${${inner}} in ${JSON.stringify(text)}`);
      const value = lookup(m[1]);
      if (!m[2]) return value ?? '';
      const word = expandWords(m[3], lookup, escape, true)[0] ?? '';
      switch (m[2]) {
        case ':-':
          return value ? value : word;
        case '-':
          return value !== undefined ? value : word;
        case ':+':
          return value ? word : '';
        default:
          return value !== undefined ? word : '';
      }
    }
    const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i));
    if (!m) return '$';
    i += m[0].length;
    return lookup(m[0]) ?? '';
  };

  while (i < text.length) {
    const c = text[i];
    if (c === escape && i + 1 < text.length) {
      current += text[i + 1];
      inWord = true;
      i += 2;
      continue;
    }
    if (c === "'") {
      const end = text.indexOf("'", i + 1);
      if (end < 0) throw new InvalidParameter(`unexpected end of statement while looking for matching single-quote in ${JSON.stringify(text)}`);
      current += text.slice(i + 1, end);
      inWord = true;
      i = end + 1;
      continue;
    }
    if (c === '"') {
      i++;
      inWord = true;
      let closed = false;
      while (i < text.length) {
        const d = text[i];
        if (d === '"') {
          closed = true;
          i++;
          break;
        }
        if (d === escape && i + 1 < text.length && (text[i + 1] === '"' || text[i + 1] === '$' || text[i + 1] === escape)) {
          current += text[i + 1];
          i += 2;
          continue;
        }
        if (d === '$') {
          current += readVar(true);
          continue;
        }
        current += d;
        i++;
      }
      if (!closed) throw new InvalidParameter(`unexpected end of statement while looking for matching double-quote in ${JSON.stringify(text)}`);
      continue;
    }
    if (c === '$') {
      const value = readVar(false);
      if (single) {
        current += value;
        inWord = true;
        continue;
      }
      // An unquoted value splits into words at its whitespace, as the shell does.
      for (const ch of value) {
        if (/\s/.test(ch)) {
          if (inWord) words.push(current);
          current = '';
          inWord = false;
        } else {
          current += ch;
          inWord = true;
        }
      }
      continue;
    }
    if (!single && /\s/.test(c)) {
      if (inWord) words.push(current);
      current = '';
      inWord = false;
      i++;
      continue;
    }
    current += c;
    inWord = true;
    i++;
  }
  if (inWord || single) words.push(current);
  return words;
}

function matchBrace(text: string, open: number): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === '{') depth++;
    else if (text[i] === '}' && --depth === 0) return i;
  }
  return -1;
}

/** One word: quotes removed, variables substituted, whitespace kept. */
export function expandWord(text: string, lookup: Lookup, escape = '\\'): string {
  return expandWords(text, lookup, escape, true)[0] ?? '';
}

/**
 * Splits `text` into raw words on unquoted whitespace, quotes kept (the words are expanded one by one
 * afterwards, as ENV and LABEL do).
 */
export function rawWords(text: string, escape = '\\'): string[] {
  const words: string[] = [];
  let current = '';
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === escape && i + 1 < text.length) {
      current += c + text[++i];
      continue;
    }
    if (quote) {
      if (c === quote) quote = null;
      current += c;
      continue;
    }
    if (c === '"' || c === "'") {
      quote = c;
      current += c;
      continue;
    }
    if (/\s/.test(c)) {
      if (current) words.push(current);
      current = '';
      continue;
    }
    current += c;
  }
  if (quote) throw new InvalidParameter(`unterminated quote in ${JSON.stringify(text)}`);
  if (current) words.push(current);
  return words;
}

/** `key=value ...` pairs (ENV, LABEL) or the legacy `key value` form, values expanded. */
export function keyValuePairs(keyword: string, text: string, lookup: Lookup, escape = '\\'): Array<[string, string]> {
  const words = rawWords(text, escape);
  if (words.length === 0) throw new InvalidParameter(`${keyword} requires at least one argument`);
  if (!words[0].includes('=')) {
    const m = /^\s*(\S+)\s+([\s\S]*)$/.exec(text);
    if (!m) throw new InvalidParameter(`${keyword} names can not be blank: ${keyword} ${text} needs a value`);
    return [[expandWord(m[1], lookup, escape), expandWord(m[2].trim(), lookup, escape)]];
  }
  return words.map((w) => {
    const eq = w.indexOf('=');
    if (eq <= 0) throw new InvalidParameter(`${keyword}: ${JSON.stringify(w)} is not key=value`);
    return [expandWord(w.slice(0, eq), lookup, escape), expandWord(w.slice(eq + 1), lookup, escape)];
  });
}
