/**
 * Expected results computed straight from the input lines, sharing no code with the engine or the
 * example job: if the pipeline loses, duplicates or mangles a record, these disagree.
 */
export interface ClickCount {
  clicks: number;
  lastClickTs: number;
}

/** Clicks per `user|pageType` and the number of malformed lines, from raw JSON lines. */
export function clickstreamOracle(lines: readonly string[]): { counts: Map<string, ClickCount>; malformed: number } {
  const counts = new Map<string, ClickCount>();
  let malformed = 0;
  for (const line of lines) {
    let rec: { userId?: unknown; url?: unknown; ts?: unknown };
    try {
      rec = JSON.parse(line);
    } catch {
      malformed++;
      continue;
    }
    if (typeof rec.userId !== 'string' || !rec.userId || typeof rec.url !== 'string' || typeof rec.ts !== 'number') {
      malformed++;
      continue;
    }
    if (rec.url.startsWith('/health')) continue;
    const path = rec.url.replace(/^https?:\/\/[^/]+/, '');
    const segment = path.split('?')[0]!.split('#')[0]!.split('/').find((p) => p.length > 0);
    const pageType = segment ? segment.toLowerCase() : 'home';
    const key = `${rec.userId}|${pageType}`;
    const c = counts.get(key) ?? { clicks: 0, lastClickTs: 0 };
    counts.set(key, { clicks: c.clicks + 1, lastClickTs: Math.max(c.lastClickTs, rec.ts) });
  }
  return { counts, malformed };
}
