/** A small SVG chart of the headline figures, made by hand (no chart library). */

export interface Bar {
  readonly label: string;
  readonly value: number;
  readonly color: string;
  /** text after the bar; defaults to the value */
  readonly text?: string;
}

export interface Panel {
  readonly title: string;
  readonly unit: string;
  readonly bars: readonly Bar[];
  /** draw a vertical marker at this value (a target or a floor) */
  readonly marker?: { readonly value: number; readonly label: string };
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export function fmt(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  const a = Math.abs(x);
  if (a >= 1e6) return `${(x / 1e6).toFixed(a >= 1e7 ? 1 : 2)} M`;
  if (a >= 1e4) return `${(x / 1e3).toFixed(0)} k`;
  if (a >= 1000) return `${(x / 1e3).toFixed(1)} k`;
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  if (a >= 1) return x.toFixed(2);
  return x.toPrecision(2);
}

export function chart(title: string, subtitle: string, panels: readonly Panel[]): string {
  const width = 960;
  const labelW = 300;
  const barMax = width - labelW - 170;
  const barH = 18;
  const gap = 6;
  let y = 64;
  const parts: string[] = [];
  for (const p of panels) {
    parts.push(`<text x="16" y="${y}" font-size="15" font-weight="bold">${esc(p.title)}</text>`);
    y += 12;
    const max = Math.max(...p.bars.map((b) => b.value), p.marker?.value ?? 0) || 1;
    const top = y;
    for (const b of p.bars) {
      const w = Math.max(1, (b.value / max) * barMax);
      parts.push(`<text x="${labelW - 8}" y="${y + barH - 5}" font-size="12" text-anchor="end">${esc(b.label)}</text>`);
      parts.push(`<rect x="${labelW}" y="${y}" width="${w.toFixed(1)}" height="${barH}" fill="${b.color}" rx="2"/>`);
      parts.push(`<text x="${labelW + w + 6}" y="${y + barH - 5}" font-size="12">${esc(b.text ?? `${fmt(b.value)} ${p.unit}`)}</text>`);
      y += barH + gap;
    }
    if (p.marker) {
      const x = labelW + (p.marker.value / max) * barMax;
      parts.push(`<line x1="${x.toFixed(1)}" y1="${top - 4}" x2="${x.toFixed(1)}" y2="${y - gap + 4}" stroke="#c0392b" stroke-dasharray="4 3" stroke-width="1.5"/>`);
      parts.push(`<text x="${(x + 4).toFixed(1)}" y="${top + 6}" font-size="11" fill="#c0392b">${esc(p.marker.label)}</text>`);
    }
    y += 22;
  }
  const height = y + 10;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif">`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="16" y="28" font-size="19" font-weight="bold">${esc(title)}</text>`,
    `<text x="16" y="46" font-size="12" fill="#555">${esc(subtitle)}</text>`,
    ...parts,
    '</svg>',
    '',
  ].join('\n');
}
