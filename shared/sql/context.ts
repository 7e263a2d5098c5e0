/** Where the compiler is in the SQL text, so every error it raises carries line:column. */
import type { SqlError, SqlErrorCode } from './errors.js';
import type { SourceText, Statement } from './source-text.js';

export class CompileContext {
  constructor(
    readonly source: SourceText,
    readonly statement: Statement,
  ) {}

  /**
   * An error at `node`: at the parser's recorded location when it has one, else at the first
   * occurrence of `token` in the statement, else at the statement's start.
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  error(node: any, message: string, code: SqlErrorCode, token?: string): SqlError {
    return this.source.error(this.offsetOf(node, token), message, code);
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  offsetOf(node: any, token?: string): number {
    const s = this.statement;
    const loc = node?.loc?.start?.offset;
    if (typeof loc === 'number') {
      // the parser's start may include the blanks before the node
      let o = s.offset + loc;
      while (/\s/.test(this.source.text[o] ?? '')) o++;
      return o;
    }
    if (token?.startsWith("'")) {
      // a string literal (a table option): search the raw text
      const at = s.text.toLowerCase().indexOf(token.toLowerCase());
      if (at >= 0) return s.offset + at;
    } else if (token) {
      const at = this.source.find(token, s.offset, s.offset + s.text.length);
      if (at !== undefined) return at;
      const last = token.split('.').pop()!;
      const at2 = this.source.find(last, s.offset, s.offset + s.text.length);
      if (at2 !== undefined) return at2;
    }
    // the first non-blank character of the statement
    const lead = /^\s*/.exec(s.text)![0].length;
    return s.offset + lead;
  }
}
