/**
 * Scalar expressions: a node of the parser's tree → a function of a row. Names resolve through a
 * scope (the columns of the FROM clause, each with an accessor into the row shape the compiler
 * chose); in an aggregate query, a hook resolves grouped expressions, aggregate calls and window
 * properties first. SQL's NULL is `null`, with three-valued logic: a comparison with NULL is NULL,
 * and a WHERE keeps a row only when its condition is TRUE.
 */
import type { SqlType } from './catalog.js';
import type { CompileContext } from './context.js';

/* eslint-disable @typescript-eslint/no-explicit-any -- the parser's tree is untyped JSON */
export type AstNode = any;
export type Row = any;

export type ExprType = SqlType | 'INTERVAL' | 'NULL' | 'ANY';

export interface Compiled {
  readonly fn: (row: Row) => unknown;
  readonly type: ExprType;
  /** the column name a select item gets by default (column references only) */
  readonly name?: string;
  /** set when the expression is exactly a column of the scope */
  readonly column?: ScopeColumn;
}

export interface ScopeColumn {
  /** table name or alias the column is qualified by */
  readonly qualifier: string | undefined;
  readonly name: string;
  readonly type: ExprType;
  readonly get: (row: Row) => unknown;
  /** a stable id for structural comparison (same column ⇒ same id) */
  readonly id: string;
  /** told when the compiler resolves the column: a source's rows carry only the columns resolved (compiler.ts) */
  readonly use?: () => void;
}

export class Scope {
  constructor(readonly columns: readonly ScopeColumn[]) {}

  /** The columns a reference names (none, one, or several when ambiguous); each is marked used. */
  lookup(qualifier: string | null | undefined, name: string): ScopeColumn[] {
    const eq = (a: string | undefined, b: string) => a !== undefined && a.toLowerCase() === b.toLowerCase();
    const found = this.columns.filter((c) => eq(c.name, name) && (qualifier == null || eq(c.qualifier, qualifier)));
    for (const c of found) c.use?.();
    return found;
  }

  qualifiers(): string[] {
    return [...new Set(this.columns.map((c) => c.qualifier).filter((q): q is string => !!q))];
  }
}

/** What an aggregate query resolves before looking at columns: grouped expressions, aggregate calls, window properties. */
export type ResolveHook = (node: AstNode) => Compiled | undefined;

export function columnName(node: AstNode): string {
  const c = node.column;
  if (typeof c === 'string') return c;
  if (c && typeof c === 'object' && c.expr) return String(c.expr.value);
  return String(c);
}

export function functionName(node: AstNode): string {
  const n = node.name;
  if (typeof n === 'string') return n.toUpperCase();
  const parts = n?.name ?? [];
  return parts.map((p: { value: string }) => p.value).join('.').toUpperCase();
}

export function functionArgs(node: AstNode): AstNode[] {
  const a = node.args;
  if (!a) return [];
  if (a.type === 'expr_list') return a.value ?? [];
  if (Array.isArray(a)) return a;
  return [a];
}

export function stringValue(node: AstNode): string {
  return String(node.value).replace(/''/g, "'");
}

const UNIT_MS: Record<string, number> = {
  millisecond: 1,
  second: 1000,
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
};

/** An INTERVAL literal in ms, or undefined when the node is not one. */
export function intervalMs(node: AstNode, ctx: CompileContext): number | undefined {
  if (node?.type !== 'interval') return undefined;
  const unit = String(node.unit ?? '').toLowerCase().replace(/s$/, '');
  const per = UNIT_MS[unit];
  if (per === undefined) throw ctx.error(node, `unsupported INTERVAL unit ${String(node.unit).toUpperCase()}: use MILLISECOND, SECOND, MINUTE, HOUR or DAY`, 'SQL_UNSUPPORTED', 'INTERVAL');
  const v = Number(node.expr?.value);
  if (!Number.isFinite(v)) throw ctx.error(node, `INTERVAL needs a number, got ${JSON.stringify(node.expr?.value)}`, 'SQL_INVALID', 'INTERVAL');
  return v * per;
}

const numeric = (t: ExprType) => t === 'BIGINT' || t === 'DOUBLE' || t === 'TIMESTAMP' || t === 'INTERVAL' || t === 'ANY' || t === 'NULL';

function arith(op: string, a: ExprType, b: ExprType): ExprType {
  if (a === 'TIMESTAMP' || b === 'TIMESTAMP') return op === '-' && a === 'TIMESTAMP' && b === 'TIMESTAMP' ? 'BIGINT' : 'TIMESTAMP';
  if (a === 'INTERVAL' && b === 'INTERVAL') return 'INTERVAL';
  if (op === '/') return 'DOUBLE';
  if (a === 'BIGINT' && b === 'BIGINT') return 'BIGINT';
  if (a === 'INTERVAL' || b === 'INTERVAL') return 'BIGINT';
  return a === 'ANY' || b === 'ANY' ? 'ANY' : 'DOUBLE';
}

const cmp = (a: unknown, b: unknown): number => (a! < b! ? -1 : a! > b! ? 1 : 0);

function likeRegex(pattern: string): RegExp {
  let re = '';
  for (const ch of pattern) re += ch === '%' ? '.*' : ch === '_' ? '.' : ch.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^${re}$`, 's');
}

/** Compiles a scalar expression. Aggregate calls are allowed only where `hook` resolves them. */
export function compileExpr(node: AstNode, scope: Scope, ctx: CompileContext, hook?: ResolveHook): Compiled {
  const hooked = hook?.(node);
  if (hooked) return hooked;
  const sub = (n: AstNode) => compileExpr(n, scope, ctx, hook);
  switch (node?.type) {
    case 'number':
      return { fn: () => Number(node.value), type: Number.isInteger(Number(node.value)) && !String(node.value).includes('.') ? 'BIGINT' : 'DOUBLE' };
    case 'single_quote_string':
    case 'string':
    case 'natural_string': {
      const v = stringValue(node);
      return { fn: () => v, type: 'VARCHAR' };
    }
    case 'bool':
    case 'boolean': {
      const v = Boolean(node.value);
      return { fn: () => v, type: 'BOOLEAN' };
    }
    case 'null':
      return { fn: () => null, type: 'NULL' };
    case 'interval': {
      const ms = intervalMs(node, ctx)!;
      return { fn: () => ms, type: 'INTERVAL' };
    }
    case 'column_ref': {
      const name = columnName(node);
      const qualifier: string | null = node.table ?? null;
      if (name === '*') throw ctx.error(node, '* is allowed only as a whole select item or in COUNT(*)', 'SQL_INVALID', '*');
      const token = qualifier ? `${qualifier}.${name}` : name;
      if (qualifier && !scope.qualifiers().some((q) => q.toLowerCase() === qualifier.toLowerCase())) {
        throw ctx.error(node, `unknown table or alias "${qualifier}" (in scope: ${scope.qualifiers().join(', ') || 'none'})`, 'SQL_UNKNOWN_TABLE', token);
      }
      const found = scope.lookup(qualifier, name);
      if (found.length === 0) {
        const known = scope.columns.map((c) => (scope.qualifiers().length > 1 && c.qualifier ? `${c.qualifier}.${c.name}` : c.name));
        throw ctx.error(node, `unknown column "${token}" (columns: ${known.join(', ')})`, 'SQL_UNKNOWN_COLUMN', token);
      }
      if (found.length > 1) {
        throw ctx.error(node, `column "${name}" is ambiguous: qualify it (${found.map((c) => `${c.qualifier}.${c.name}`).join(' or ')})`, 'SQL_AMBIGUOUS_COLUMN', token);
      }
      const col = found[0]!;
      return { fn: col.get, type: col.type, name: col.name, column: col };
    }
    case 'aggr_func':
      throw ctx.error(node, `aggregate ${String(node.name).toUpperCase()}(...) is not allowed here (only in the SELECT list or HAVING of a grouped query, and not nested)`, 'SQL_INVALID', String(node.name));
    case 'unary_expr': {
      const e = sub(node.expr);
      const op = String(node.operator).toUpperCase();
      if (op === 'NOT') return { fn: (r) => { const v = e.fn(r); return v === null ? null : !v; }, type: 'BOOLEAN' };
      if (op === '-') return { fn: (r) => { const v = e.fn(r); return v === null ? null : -(v as number); }, type: e.type };
      if (op === '+') return e;
      throw ctx.error(node, `unsupported operator ${op}`, 'SQL_UNSUPPORTED', op);
    }
    case 'binary_expr':
      return binary(node, scope, ctx, hook);
    case 'cast': {
      const e = sub(node.expr);
      const target = node.target?.[0]?.dataType ?? node.target?.dataType;
      const t = String(target ?? '').toUpperCase();
      switch (t) {
        case 'BIGINT':
        case 'INT':
        case 'INTEGER':
          return { fn: (r) => { const v = e.fn(r); return v === null ? null : Math.trunc(Number(v)); }, type: 'BIGINT' };
        case 'DOUBLE':
        case 'FLOAT':
        case 'DECIMAL':
          return { fn: (r) => { const v = e.fn(r); return v === null ? null : Number(v); }, type: 'DOUBLE' };
        case 'VARCHAR':
        case 'STRING':
        case 'CHAR':
          return { fn: (r) => { const v = e.fn(r); return v === null ? null : String(v); }, type: 'VARCHAR' };
        case 'BOOLEAN':
          return { fn: (r) => { const v = e.fn(r); return v === null ? null : v === true || v === 'true' || v === 1; }, type: 'BOOLEAN' };
        default:
          throw ctx.error(node, `CAST to ${t} is not supported (BIGINT, INT, DOUBLE, DECIMAL, VARCHAR, STRING, BOOLEAN are)`, 'SQL_UNSUPPORTED', 'CAST');
      }
    }
    case 'case': {
      const base = node.expr ? sub(node.expr) : undefined;
      const whens = (node.args ?? []).filter((a: AstNode) => a.type === 'when').map((a: AstNode) => ({ cond: sub(a.cond), result: sub(a.result) }));
      const otherwise = (node.args ?? []).find((a: AstNode) => a.type === 'else');
      const other = otherwise ? sub(otherwise.result) : undefined;
      const type = whens.find((w: { result: Compiled }) => w.result.type !== 'NULL')?.result.type ?? other?.type ?? 'NULL';
      return {
        fn: (r) => {
          const b = base?.fn(r);
          for (const w of whens) {
            const c = w.cond.fn(r);
            if (base ? b !== null && c === b : c === true) return w.result.fn(r);
          }
          return other ? other.fn(r) : null;
        },
        type,
      };
    }
    case 'function':
      return callFunction(node, scope, ctx, hook);
    case 'expr_list':
      throw ctx.error(node, 'a list of values is allowed only after IN', 'SQL_INVALID');
    default:
      if (node?.ast || node?.type === 'select') throw ctx.error(node, 'subqueries in expressions are not supported; use a subquery in FROM', 'SQL_UNSUPPORTED', 'SELECT');
      throw ctx.error(node, `unsupported expression (${String(node?.type)})`, 'SQL_UNSUPPORTED');
  }
}

function binary(node: AstNode, scope: Scope, ctx: CompileContext, hook?: ResolveHook): Compiled {
  const op = String(node.operator).toUpperCase();
  const sub = (n: AstNode) => compileExpr(n, scope, ctx, hook);
  if (op === 'IN' || op === 'NOT IN') {
    const left = sub(node.left);
    if (node.right?.type !== 'expr_list') throw ctx.error(node, `${op} needs a list of values (subqueries are not supported)`, 'SQL_UNSUPPORTED', 'IN');
    const items = (node.right.value as AstNode[]).map(sub);
    const neg = op === 'NOT IN';
    return {
      fn: (r) => {
        const v = left.fn(r);
        if (v === null) return null;
        let sawNull = false;
        for (const i of items) {
          const x = i.fn(r);
          if (x === null) sawNull = true;
          else if (x === v) return !neg;
        }
        return sawNull ? null : neg;
      },
      type: 'BOOLEAN',
    };
  }
  if (op === 'BETWEEN' || op === 'NOT BETWEEN') {
    const v = sub(node.left);
    const [lo, hi] = (node.right.value as AstNode[]).map(sub);
    const neg = op === 'NOT BETWEEN';
    return {
      fn: (r) => {
        const x = v.fn(r);
        const a = lo!.fn(r);
        const b = hi!.fn(r);
        if (x === null || a === null || b === null) return null;
        const inside = cmp(x, a) >= 0 && cmp(x, b) <= 0;
        return neg ? !inside : inside;
      },
      type: 'BOOLEAN',
    };
  }
  if (op === 'IS' || op === 'IS NOT') {
    const left = sub(node.left);
    const neg = op === 'IS NOT';
    if (node.right?.type === 'null') return { fn: (r) => (left.fn(r) === null) !== neg, type: 'BOOLEAN' };
    if (node.right?.type === 'bool') {
      const want = Boolean(node.right.value);
      return { fn: (r) => (left.fn(r) === want) !== neg, type: 'BOOLEAN' };
    }
    throw ctx.error(node, `${op} must be followed by NULL, TRUE or FALSE`, 'SQL_INVALID', 'IS');
  }
  const left = sub(node.left);
  const right = sub(node.right);
  const l = left.fn;
  const rt = right.fn;
  switch (op) {
    case 'AND':
      return {
        fn: (r) => {
          const a = l(r);
          if (a === false) return false;
          const b = rt(r);
          if (b === false) return false;
          return a === null || b === null ? null : true;
        },
        type: 'BOOLEAN',
      };
    case 'OR':
      return {
        fn: (r) => {
          const a = l(r);
          if (a === true) return true;
          const b = rt(r);
          if (b === true) return true;
          return a === null || b === null ? null : false;
        },
        type: 'BOOLEAN',
      };
    case '=':
    case '<>':
    case '!=':
    case '<':
    case '<=':
    case '>':
    case '>=': {
      const test =
        op === '=' ? (c: number) => c === 0 : op === '<>' || op === '!=' ? (c: number) => c !== 0 : op === '<' ? (c: number) => c < 0 : op === '<=' ? (c: number) => c <= 0 : op === '>' ? (c: number) => c > 0 : (c: number) => c >= 0;
      return {
        fn: (r) => {
          const a = l(r);
          const b = rt(r);
          return a === null || b === null ? null : test(cmp(a, b));
        },
        type: 'BOOLEAN',
      };
    }
    case '+':
    case '-':
    case '*':
    case '/':
    case '%': {
      for (const [side, c] of [[node.left, left], [node.right, right]] as const) {
        if (!numeric(c.type)) throw ctx.error(side, `${op} needs numbers, got ${c.type}${c.name ? ` (column ${c.name})` : ''}`, 'SQL_INVALID', c.name);
      }
      const f =
        op === '+'
          ? (a: number, b: number) => a + b
          : op === '-'
            ? (a: number, b: number) => a - b
            : op === '*'
              ? (a: number, b: number) => a * b
              : op === '/'
                ? (a: number, b: number) => (b === 0 ? null : a / b)
                : (a: number, b: number) => (b === 0 ? null : a % b);
      return {
        fn: (r) => {
          const a = l(r);
          const b = rt(r);
          return a === null || b === null ? null : f(a as number, b as number);
        },
        type: arith(op, left.type, right.type),
      };
    }
    case '||':
      return {
        fn: (r) => {
          const a = l(r);
          const b = rt(r);
          return a === null || b === null ? null : `${String(a)}${String(b)}`;
        },
        type: 'VARCHAR',
      };
    case 'LIKE':
    case 'NOT LIKE': {
      const neg = op === 'NOT LIKE';
      const fixed = node.right?.type === 'single_quote_string' ? likeRegex(stringValue(node.right)) : undefined;
      return {
        fn: (r) => {
          const a = l(r);
          const p = fixed ?? (rt(r) === null ? null : likeRegex(String(rt(r))));
          if (a === null || p === null) return null;
          return p.test(String(a)) !== neg;
        },
        type: 'BOOLEAN',
      };
    }
    default:
      throw ctx.error(node, `unsupported operator ${op}`, 'SQL_UNSUPPORTED', op);
  }
}

type Fn = (args: unknown[]) => unknown;

/** Scalar functions: name → [arity range, result type (or 'arg' for the first argument's), implementation]. NULL in → NULL out unless noted. */
const SCALARS: Record<string, { min: number; max: number; type: ExprType | 'arg'; fn: Fn; nullSafe?: boolean }> = {
  MOD: { min: 2, max: 2, type: 'arg', fn: ([a, b]) => ((b as number) === 0 ? null : (a as number) % (b as number)) },
  ABS: { min: 1, max: 1, type: 'arg', fn: ([a]) => Math.abs(a as number) },
  FLOOR: { min: 1, max: 1, type: 'arg', fn: ([a]) => Math.floor(a as number) },
  CEIL: { min: 1, max: 1, type: 'arg', fn: ([a]) => Math.ceil(a as number) },
  CEILING: { min: 1, max: 1, type: 'arg', fn: ([a]) => Math.ceil(a as number) },
  ROUND: {
    min: 1,
    max: 2,
    type: 'arg',
    fn: ([a, d]) => {
      const p = 10 ** Number(d ?? 0);
      return Math.round((a as number) * p) / p;
    },
  },
  POWER: { min: 2, max: 2, type: 'DOUBLE', fn: ([a, b]) => (a as number) ** (b as number) },
  SQRT: { min: 1, max: 1, type: 'DOUBLE', fn: ([a]) => Math.sqrt(a as number) },
  LOWER: { min: 1, max: 1, type: 'VARCHAR', fn: ([a]) => String(a).toLowerCase() },
  UPPER: { min: 1, max: 1, type: 'VARCHAR', fn: ([a]) => String(a).toUpperCase() },
  TRIM: { min: 1, max: 1, type: 'VARCHAR', fn: ([a]) => String(a).trim() },
  CHAR_LENGTH: { min: 1, max: 1, type: 'BIGINT', fn: ([a]) => [...String(a)].length },
  CHARACTER_LENGTH: { min: 1, max: 1, type: 'BIGINT', fn: ([a]) => [...String(a)].length },
  LENGTH: { min: 1, max: 1, type: 'BIGINT', fn: ([a]) => [...String(a)].length },
  SUBSTR: {
    min: 2,
    max: 3,
    type: 'VARCHAR',
    fn: ([s, start, len]) => {
      const chars = [...String(s)];
      const from = Math.max(0, Number(start) - 1);
      return chars.slice(from, len === undefined ? undefined : from + Number(len)).join('');
    },
  },
  CONCAT: { min: 1, max: 64, type: 'VARCHAR', fn: (xs) => xs.map(String).join('') },
  COALESCE: { min: 1, max: 64, type: 'arg', nullSafe: true, fn: (xs) => xs.find((x) => x !== null) ?? null },
  IFNULL: { min: 2, max: 2, type: 'arg', nullSafe: true, fn: ([a, b]) => (a === null ? b : a) },
  NULLIF: { min: 2, max: 2, type: 'arg', nullSafe: true, fn: ([a, b]) => (a === b ? null : a) },
  GREATEST: { min: 1, max: 64, type: 'arg', fn: (xs) => xs.reduce((m, x) => (cmp(x, m) > 0 ? x : m)) },
  LEAST: { min: 1, max: 64, type: 'arg', fn: (xs) => xs.reduce((m, x) => (cmp(x, m) < 0 ? x : m)) },
};
SCALARS['SUBSTRING'] = SCALARS['SUBSTR']!;

/** Window grouping functions and their properties: the compiler resolves these, never this module. */
export const WINDOW_FUNCTIONS = ['TUMBLE', 'HOP', 'SESSION'];
export const WINDOW_PROPERTIES = /^(TUMBLE|HOP|SESSION)_(START|END|ROWTIME)$/;

export function isAggregateCall(node: AstNode): boolean {
  return node?.type === 'aggr_func';
}

function callFunction(node: AstNode, scope: Scope, ctx: CompileContext, hook?: ResolveHook): Compiled {
  const name = functionName(node);
  if (WINDOW_FUNCTIONS.includes(name)) {
    throw ctx.error(node, `${name}(...) is a window grouping: it belongs in GROUP BY (its bounds are ${name}_START, ${name}_END, ${name}_ROWTIME)`, 'SQL_INVALID', name);
  }
  if (WINDOW_PROPERTIES.test(name)) {
    throw ctx.error(node, `${name}(...) needs the query to be grouped by ${name.replace(/_.*$/, '')}(...) with the same arguments`, 'SQL_INVALID', name);
  }
  const spec = SCALARS[name];
  if (!spec) {
    throw ctx.error(
      node,
      `unknown function ${name} (scalar functions: ${Object.keys(SCALARS).sort().join(', ')}; aggregates: COUNT, SUM, MIN, MAX, AVG)`,
      'SQL_UNSUPPORTED',
      name,
    );
  }
  const args = functionArgs(node).map((a) => compileExpr(a, scope, ctx, hook));
  if (args.length < spec.min || args.length > spec.max) {
    const want = spec.min === spec.max ? `${spec.min}` : `${spec.min} to ${spec.max}`;
    throw ctx.error(node, `${name} takes ${want} argument${spec.max === 1 ? '' : 's'}, got ${args.length}`, 'SQL_INVALID', name);
  }
  const fns = args.map((a) => a.fn);
  const f = spec.fn;
  const nullSafe = spec.nullSafe === true;
  return {
    fn: (r) => {
      const vs = fns.map((g) => g(r));
      if (!nullSafe && vs.some((v) => v === null || v === undefined)) return null;
      return f(vs);
    },
    type: spec.type === 'arg' ? (args[0]?.type ?? 'ANY') : spec.type,
  };
}

/** A structural key of an expression, with columns replaced by their resolved ids: two spellings of the same expression compare equal. */
export function canonical(node: AstNode, scope: Scope, columnKey: (col: ScopeColumn) => string = (col) => `#${col.id}`): string {
  const walk = (n: AstNode): unknown => {
    if (Array.isArray(n)) return n.map(walk);
    if (!n || typeof n !== 'object') return typeof n === 'string' ? n.toLowerCase() : n;
    if (n.type === 'column_ref') {
      const found = scope.lookup(n.table ?? null, columnName(n));
      return found.length === 1 ? columnKey(found[0]!) : `?${String(n.table)}.${columnName(n)}`;
    }
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(n).sort()) {
      if (k === 'loc' || k === 'parentheses' || k === 'collate' || k === 'as') continue;
      out[k] = walk(n[k]);
    }
    return out;
  };
  return JSON.stringify(walk(node));
}
