/**
 * The SELECT list: its items (an expression with its alias, or the columns a `*` or `t.*` stands
 * for), the check that output column names are unique, the output row they build, and the
 * projection of a query without GROUP BY, which maps each row (or both rows of an updating result's
 * change) to the selected columns.
 */
import type { CompileContext } from './context.js';
import { columnName, compileExpr, functionName, WINDOW_PROPERTIES, type AstNode, type ExprType, type Row, type Scope, type ScopeColumn } from './expressions.js';
import { onChange, type Change, type QueryOutput, type Relation } from './relation.js';

/** One item of a SELECT list: an expression, or the columns of a `*`. */
export type SelectItem = { expr: AstNode; as: string | undefined } | { star: ScopeColumn[] };

/** The items of `node`'s SELECT list, with each `*` and `t.*` expanded against `scope`. */
export function selectItems(node: AstNode, scope: Scope, c: CompileContext): SelectItem[] {
  const out: SelectItem[] = [];
  for (const item of node.columns === '*' ? [{ expr: { type: 'column_ref', table: null, column: '*' } }] : node.columns) {
    const e = item.expr;
    if (e?.type === 'column_ref' && columnName(e) === '*') {
      const q = e.table;
      const cols = q ? scope.columns.filter((x) => x.qualifier?.toLowerCase() === String(q).toLowerCase()) : [...scope.columns];
      if (q && !cols.length) throw c.error(e, `unknown table or alias "${q}" in ${q}.*`, 'SQL_UNKNOWN_TABLE', `${q}`);
      for (const col of cols) col.use?.();
      out.push({ star: cols });
    } else {
      out.push({ expr: e, as: item.as ?? undefined });
    }
  }
  return out;
}

/** Fails when two output columns share a name (case-insensitively). */
export function checkColumnNames(node: AstNode, names: string[], c: CompileContext): void {
  const seen = new Set<string>();
  for (const n of names) {
    if (seen.has(n.toLowerCase())) throw c.error(node, `two output columns are named "${n}": give one an alias (… AS other_name)`, 'SQL_INVALID', n);
    seen.add(n.toLowerCase());
  }
}

/** Builds an output row from the SELECT list's fields, in their order (a missing value is NULL). */
export function outputRow(fields: ReadonlyArray<{ readonly name: string; readonly fn: (r: Row) => unknown }>): (r: Row) => Record<string, unknown> {
  const names = fields.map((f) => f.name);
  const fns = fields.map((f) => f.fn);
  return (r: Row) => {
    const o: Record<string, unknown> = {};
    for (let j = 0; j < names.length; j++) o[names[j]!] = fns[j]!(r) ?? null;
    return o;
  };
}

/** The output of a query without GROUP BY or aggregates: each row mapped to the SELECT list. */
export function compileProjection(node: AstNode, rel: Relation, c: CompileContext): QueryOutput {
  const fields: Array<{ name: string; fn: (r: Row) => unknown; type: ExprType; column?: ScopeColumn }> = [];
  let i = 0;
  for (const item of selectItems(node, rel.scope, c)) {
    if ('star' in item) {
      for (const col of item.star) fields.push({ name: col.name, fn: col.get, type: col.type, column: col });
    } else {
      if (item.expr?.type === 'function' && WINDOW_PROPERTIES.test(functionName(item.expr))) {
        throw c.error(item.expr, `${functionName(item.expr)}(...) needs GROUP BY ${functionName(item.expr).replace(/_.*$/, '')}(...)`, 'SQL_INVALID', functionName(item.expr));
      }
      const e = compileExpr(item.expr, rel.scope, c);
      fields.push({ name: item.as ?? e.name ?? `EXPR$${i}`, fn: e.fn, type: e.type, ...(e.column ? { column: e.column } : {}) });
    }
    i++;
  }
  checkColumnNames(node, fields.map((f) => f.name), c);
  const select = outputRow(fields);
  if (rel.updating) {
    // an updating input stays updating: both the new row and the one it replaces are projected
    const stream = rel.stream.flatMap((u: Change) => onChange(u, select), { name: 'select' });
    return { stream, columns: fields.map((f) => ({ name: f.name, type: f.type })), rowtime: undefined, shards: rel.shards, updating: true };
  }
  const stream = rel.stream.map(select, { name: 'select' });
  const rowtime = rel.rowtime ? fields.find((f) => f.column?.id === rel.rowtime!.id)?.name : undefined;
  return { stream, columns: fields.map((f) => ({ name: f.name, type: f.type })), rowtime, shards: rel.shards, updating: false };
}
