/**
 * The SQL text a user wrote, and the two things the compiler needs from it besides the parser's
 * tree: where each statement starts (statements are split at top-level semicolons, so a syntax
 * error is reported at its place in the file, not in the statement), and where a name appears (the
 * parser does not record positions for every node; an error about a column points at the first
 * occurrence of its token in the statement). This is a scanner for quotes and comments, not a parser.
 */
import { SqlError, type SqlErrorCode } from './errors.js';

export interface Statement {
  /** the statement's text, without the trailing semicolon */
  readonly text: string;
  /** offset of the statement's first character in the whole text */
  readonly offset: number;
}

export interface Position {
  readonly line: number;
  readonly column: number;
}

export class SourceText {
  private readonly lineStarts: number[] = [0];

  constructor(
    readonly text: string,
    /** shown in error messages (a file name) */
    readonly origin = '<sql>',
  ) {
    for (let i = 0; i < text.length; i++) if (text[i] === '\n') this.lineStarts.push(i + 1);
  }

  /** 1-based line and column of an offset. */
  position(offset: number): Position {
    let lo = 0;
    let hi = this.lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.lineStarts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return { line: lo + 1, column: offset - this.lineStarts[lo]! + 1 };
  }

  /** Splits at semicolons outside quotes and comments; drops statements that hold only blanks and comments. */
  statements(): Statement[] {
    const out: Statement[] = [];
    let start = 0;
    let meaningful = false;
    const t = this.text;
    const push = (end: number) => {
      if (meaningful) out.push({ text: t.slice(start, end), offset: start });
      meaningful = false;
    };
    for (let i = 0; i < t.length; i++) {
      const c = t[i]!;
      if (c === '-' && t[i + 1] === '-') {
        while (i < t.length && t[i] !== '\n') i++;
      } else if (c === '/' && t[i + 1] === '*') {
        const end = t.indexOf('*/', i + 2);
        if (end < 0) throw this.error(i, 'a /* comment is never closed with */', 'SQL_SYNTAX');
        i = end + 1;
      } else if (c === "'" || c === '"' || c === '`') {
        const open = i;
        for (i++; i < t.length; i++) {
          if (t[i] === c) {
            if (t[i + 1] === c) i++;
            else break;
          }
        }
        if (i >= t.length) throw this.error(open, `a ${c}-quoted ${c === "'" ? 'string' : 'name'} is never closed`, 'SQL_SYNTAX');
        meaningful = true;
      } else if (c === ';') {
        push(i);
        start = i + 1;
      } else if (!/\s/.test(c)) {
        meaningful = true;
      }
    }
    push(t.length);
    return out;
  }

  /**
   * Offset of the first occurrence of `token` (a name, or `qualifier.name`) in [from, to) as a whole
   * word outside strings and comments, matched case-insensitively and with or without backquotes.
   */
  find(token: string, from = 0, to = this.text.length): number | undefined {
    const parts = token.split('.');
    const ident = (p: string) => `(?:\`${escapeRe(p)}\`|"${escapeRe(p)}"|\\b${escapeRe(p)}\\b)`;
    const re = new RegExp(parts.map(ident).join('\\s*\\.\\s*'), 'gi');
    const t = this.text.slice(0, to);
    const masked = maskQuotesAndComments(t);
    re.lastIndex = from;
    for (let m = re.exec(masked); m; m = re.exec(masked)) {
      // a hit inside a masked region is made of spaces, so it cannot match a name; check the start is code
      if (m.index >= from) return m.index;
    }
    return undefined;
  }

  error(offset: number, message: string, code: SqlErrorCode): SqlError {
    const p = this.position(offset);
    return new SqlError(this.origin, p.line, p.column, message, code);
  }
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Replaces string literals and comments by spaces (same length), keeping quoted names. */
function maskQuotesAndComments(t: string): string {
  const out = t.split('');
  for (let i = 0; i < t.length; i++) {
    const c = t[i]!;
    if (c === '-' && t[i + 1] === '-') {
      for (; i < t.length && t[i] !== '\n'; i++) out[i] = ' ';
    } else if (c === '/' && t[i + 1] === '*') {
      const end = t.indexOf('*/', i + 2);
      const stop = end < 0 ? t.length : end + 2;
      for (; i < stop; i++) out[i] = ' ';
      i--;
    } else if (c === "'") {
      let j = i + 1;
      for (; j < t.length; j++) {
        if (t[j] === "'") {
          if (t[j + 1] === "'") j++;
          else break;
        }
      }
      for (let k = i; k <= Math.min(j, t.length - 1); k++) out[k] = ' ';
      i = j;
    } else if (c === '"' || c === '`') {
      const j = t.indexOf(c, i + 1);
      i = j < 0 ? t.length : j;
    }
  }
  return out.join('');
}
