/**
 * The Flink SQL grammar (node-sql-parser's flinksql build) and what its failures become: a parse
 * error is turned into a SqlError at the word the parser stopped in, with the literals it expected
 * and, when that word is a reserved one, how to quote it.
 */
import * as flinksql from 'node-sql-parser/build/flinksql.js';
import { SqlError } from './errors.js';
import type { AstNode } from './expressions.js';
import type { SourceText } from './source-text.js';

// the Flink SQL grammar alone (a fraction of the package's size). It is CommonJS: Node hands it over
// as the default export; a static import so that bundlers (esbuild in CDK) ship it.
type ParserModule = { Parser: new () => { astify(sql: string, opt: object): AstNode } };
const flinkSqlModule = flinksql as unknown as ParserModule & { default?: ParserModule };
const { Parser } = flinkSqlModule.default ?? flinkSqlModule;

const RESERVED =
  /^(out|at|in|key|value|values|table|window|range|rows|row|timestamp|time|date|user|order|group|current|year|month|day|hour|minute|second|interval|position|end|start|result|system|language|level|all|any|both|case|cast|check|column|default|desc|asc|from|full|function|global|grant|having|inner|left|right|like|limit|local|match|new|no|none|not|null|of|offset|old|on|only|open|outer|over|partition|primary|references|returns|select|set|some|sql|then|to|trim|union|unique|update|using|when|where|with|within|without)$/i;

/** Parses one statement (`text`, starting at `offset` in `source`); a syntax error names its place. */
export function parseStatement(source: SourceText, text: string, offset: number): AstNode {
  try {
    return new Parser().astify(text, { database: 'flinksql', parseOptions: { includeLocations: true } });
  } catch (err) {
    const e = err as { location?: { start?: { offset: number } }; found?: string | null; expected?: Array<{ type: string; text?: string; description?: string }>; message?: string };
    if (!e.location?.start) throw new SqlError(source.origin, source.position(offset).line, 1, `cannot parse: ${e.message ?? String(err)}`, 'SQL_SYNTAX');
    let local = e.location.start.offset;
    const ident = /[A-Za-z0-9_]/;
    // point at the whole word the parser stopped in (or right after): "out" rather than its "t"
    if (local > 0 && !ident.test(text[local] ?? '') && ident.test(text[local - 1] ?? '')) local--;
    while (local > 0 && ident.test(text[local] ?? '') && ident.test(text[local - 1]!)) local--;
    const rest = text.slice(local);
    const word = /^[A-Za-z_][A-Za-z0-9_]*/.exec(rest)?.[0];
    const atEnd = e.found == null || text.slice(local).trim() === '';
    const at = atEnd ? offset + text.trimEnd().length : offset + local;
    const found = atEnd ? 'the end of the statement' : word ? `"${word}"` : `"${e.found}"`;
    const expected = [...new Set((e.expected ?? []).filter((x) => x.type === 'literal' && x.text && /^[A-Z,()=;*]/.test(x.text)).map((x) => x.text!))].slice(0, 8);
    let hint = expected.length ? ` (expected ${expected.join(', ')}${(e.expected?.length ?? 0) > expected.length ? ', …' : ''})` : '';
    if (word && RESERVED.test(word)) hint += `; "${word}" is a reserved word: write it in backquotes (\`${word}\`) to use it as a name`;
    throw source.error(at, `syntax error at ${found}${hint}`, 'SQL_SYNTAX');
  }
}
