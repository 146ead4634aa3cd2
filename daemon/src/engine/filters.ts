/**
 * Matching helpers shared by the list and prune filters of every resource, with Docker's semantics.
 * Each takes the values of one filter key (as parsed by api/params parseFilters); an absent or empty
 * list of values matches everything.
 */

/** True when `source` equals one of the values. */
export function exactMatch(values: readonly string[] | undefined, source: string | undefined): boolean {
  if (!values || values.length === 0) return true;
  return source !== undefined && values.includes(source);
}

/** True when `source` equals one of the values or starts with one (ids given as a prefix). */
export function prefixMatch(values: readonly string[] | undefined, source: string | undefined): boolean {
  if (!values || values.length === 0) return true;
  if (source === undefined) return false;
  return values.some((v) => source === v || (v !== '' && source.startsWith(v)));
}

/**
 * `label` filters: every value must match; `key` needs the label to exist, `key=value` needs it to hold
 * that value.
 */
export function matchLabels(values: readonly string[] | undefined, labels: Readonly<Record<string, string>> | null | undefined): boolean {
  if (!values || values.length === 0) return true;
  const have = labels ?? {};
  return values.every((value) => {
    const eq = value.indexOf('=');
    const key = eq < 0 ? value : value.slice(0, eq);
    if (!Object.prototype.hasOwnProperty.call(have, key)) return false;
    return eq < 0 || have[key] === value.slice(eq + 1);
  });
}

/**
 * `label!` filters (prune): an object is excluded when it matches any of them; `key` excludes objects
 * that have the label, `key=value` those where it holds that value.
 */
export function matchNotLabels(values: readonly string[] | undefined, labels: Readonly<Record<string, string>> | null | undefined): boolean {
  if (!values || values.length === 0) return true;
  return !values.some((value) => matchLabels([value], labels));
}

/**
 * `before` and `since` filters by creation time: `before` keeps objects created strictly before the
 * reference object, `since` those created strictly after it. The caller resolves the references.
 */
export function inCreationWindow(created: bigint | number, bounds: { before?: bigint | number; since?: bigint | number }): boolean {
  const c = BigInt(created);
  if (bounds.before !== undefined && !(c < BigInt(bounds.before))) return false;
  if (bounds.since !== undefined && !(c > BigInt(bounds.since))) return false;
  return true;
}
