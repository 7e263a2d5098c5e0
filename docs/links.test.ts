/** Every relative link in the README and docs/ points at a file (and heading) that exists. */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const pages = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => join('docs', f))];

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes. */
function anchors(markdown: string): Set<string> {
  const out = new Set<string>();
  for (const m of markdown.matchAll(/^#{1,6}\s+(.+)$/gm)) {
    out.add(m[1]!.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-'));
  }
  return out;
}

describe('documentation links', () => {
  it.each(pages)('%s links only to files and headings that exist', (page) => {
    const text = readFileSync(join(ROOT, page), 'utf8').replace(/```[\s\S]*?```/g, '');
    const broken: string[] = [];
    for (const m of text.matchAll(/\[[^\]]*\]\(([^)\s]+)\)/g)) {
      const target = m[1]!;
      if (/^[a-z]+:/i.test(target)) continue; // http(s), mailto: not checked here
      const [path, hash] = target.split('#') as [string, string | undefined];
      const file = path ? join(dirname(join(ROOT, page)), path) : join(ROOT, page);
      if (!existsSync(file)) {
        broken.push(`${target} (no ${relative(ROOT, file)})`);
        continue;
      }
      if (hash && file.endsWith('.md') && !anchors(readFileSync(file, 'utf8')).has(hash)) broken.push(`${target} (no heading #${hash})`);
    }
    expect(broken).toEqual([]);
  });
});
