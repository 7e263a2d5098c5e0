/**
 * Deterministic sample clickstream: `npx tsx examples/clickstream/sample-data.ts [count] [seed]`
 * prints JSON lines. A few lines are deliberately malformed, to show that bad input lands in the
 * dead letters instead of blocking a shard or vanishing.
 */
const PAGES = ['/', '/product/1', '/product/2', '/product/3', '/cart', '/checkout', '/search?q=shoes', '/account', '/health'];

export function sampleClicks(count: number, seed = 7, malformedEvery = 400): string[] {
  let s = seed >>> 0;
  const rnd = () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    return s / 4294967296;
  };
  const lines: string[] = [];
  const start = Date.UTC(2026, 10, 1, 12, 0, 0);
  for (let i = 0; i < count; i++) {
    if (malformedEvery > 0 && i % malformedEvery === malformedEvery - 1) {
      lines.push(i % (2 * malformedEvery) === malformedEvery - 1 ? '{"userId": "u1", "url": ' : JSON.stringify({ url: '/cart', ts: start + i }));
      continue;
    }
    const user = `u${Math.floor(rnd() * 25)}`;
    const url = PAGES[Math.floor(rnd() * PAGES.length)]!;
    lines.push(JSON.stringify({ userId: user, url, ts: start + i * 250 + Math.floor(rnd() * 1000) }));
  }
  return lines;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const count = Number(process.argv[2] ?? 2000);
  const seed = Number(process.argv[3] ?? 7);
  process.stdout.write(sampleClicks(count, seed).join('\n') + '\n');
}
