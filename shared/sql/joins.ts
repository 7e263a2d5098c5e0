/**
 * Joins of two inputs. The ON/WHERE condition is split into conjuncts:
 * - equalities between a column expression of each side become the join key (both sides keyBy it);
 * - bounds between the two event-time columns (`b.ts BETWEEN a.ts - INTERVAL … AND a.ts + INTERVAL …`,
 *   `b.ts >= a.ts …`, `a.ts = b.ts`) make it an **interval join**: `keyedA.intervalJoin(keyedB,
 *   { lowerMs, upperMs })`, which keeps each side's rows only as long as a match can still come;
 * - conditions on one side only are applied to that side before the join;
 * - anything else is applied to the joined rows.
 * Without time bounds the join is a **regular join** (`keyedA.connect(keyedB).process(...)`): both
 * sides are kept in keyed state forever (document the state growth to users).
 * A joined row is the pair [leftRow, rightRow]; the output has no event-time column.
 */
import type { DataStream } from '../api/job.js';
import { listState } from '../api/state.js';
import type { CompileContext } from './context.js';
import { columnName, compileExpr, intervalMs, Scope, type AstNode, type Row, type ScopeColumn } from './expressions.js';
import type { Relation } from './relation.js';
import { rowKeyOf } from './row-key.js';

/* The join API as the compiler uses it (KeyedStream.intervalJoin / KeyedStream.connect). */
interface IntervalJoinApi {
  intervalJoin(
    other: unknown,
    bounds: { lowerMs: number; upperMs: number },
  ): { process(fn: (left: Row, right: Row, ctx: unknown, out: { collect(v: Row): void }) => void, options?: { name?: string }): DataStream<Row> };
}
interface ConnectApi {
  connect(other: unknown): {
    process(
      fn: {
        state?: readonly unknown[];
        processElement1(v: Row, ctx: { getListState(d: unknown): { get(): readonly Row[]; add(v: Row): void } }, out: { collect(v: Row): void }): void;
        processElement2(v: Row, ctx: { getListState(d: unknown): { get(): readonly Row[]; add(v: Row): void } }, out: { collect(v: Row): void }): void;
      },
      options?: { name?: string },
    ): DataStream<Row>;
  };
}

function conjuncts(n: AstNode): AstNode[] {
  if (!n) return [];
  if (n.type === 'binary_expr' && String(n.operator).toUpperCase() === 'AND') return [...conjuncts(n.left), ...conjuncts(n.right)];
  return [n];
}

function and(parts: AstNode[]): AstNode {
  return parts.reduce((a, b) => (a ? { type: 'binary_expr', operator: 'AND', left: a, right: b } : b), undefined);
}

/** Which inputs an expression reads: 'L', 'R', both, or none. */
function sides(n: AstNode, left: Scope, right: Scope): Set<'L' | 'R'> {
  const out = new Set<'L' | 'R'>();
  const walk = (x: AstNode) => {
    if (!x || typeof x !== 'object') return;
    if (Array.isArray(x)) return x.forEach(walk);
    if (x.type === 'column_ref') {
      const name = columnName(x);
      if (left.lookup(x.table ?? null, name).length) out.add('L');
      if (right.lookup(x.table ?? null, name).length) out.add('R');
      return;
    }
    Object.values(x).forEach(walk);
  };
  walk(n);
  return out;
}

/** `col [± INTERVAL]` where col is a side's event-time column: which side, and the offset in ms. */
function timeTerm(n: AstNode, ctx: CompileContext, l: Relation, r: Relation): { side: 'L' | 'R'; offset: number } | undefined {
  const col = (x: AstNode): 'L' | 'R' | undefined => {
    if (x?.type !== 'column_ref') return undefined;
    const name = columnName(x);
    const a = l.scope.lookup(x.table ?? null, name);
    const b = r.scope.lookup(x.table ?? null, name);
    if (a.length === 1 && !b.length && l.rowtime && a[0]!.id === l.rowtime.id) return 'L';
    if (b.length === 1 && !a.length && r.rowtime && b[0]!.id === r.rowtime.id) return 'R';
    return undefined;
  };
  const s = col(n);
  if (s) return { side: s, offset: 0 };
  if (n?.type === 'binary_expr' && (n.operator === '+' || n.operator === '-')) {
    const side = col(n.left);
    const ms = intervalMs(n.right, ctx);
    if (side && ms !== undefined) return { side, offset: n.operator === '+' ? ms : -ms };
  }
  return undefined;
}

/**
 * A bound between the two event times, as R.ts - L.ts ∈ [lower, upper] (either end may be open);
 * undefined when the conjunct is not one.
 */
function timeBound(n: AstNode, ctx: CompileContext, l: Relation, r: Relation): { lower?: number; upper?: number } | undefined {
  if (n?.type !== 'binary_expr') return undefined;
  const op = String(n.operator).toUpperCase();
  if (op === 'BETWEEN') {
    const x = timeTerm(n.left, ctx, l, r);
    const [lo, hi] = n.right.value as AstNode[];
    const a = timeTerm(lo, ctx, l, r);
    const b = timeTerm(hi, ctx, l, r);
    if (!x || !a || !b || a.side !== b.side || a.side === x.side) return undefined;
    // x.ts ∈ [y.ts + a, y.ts + b]
    return x.side === 'R' ? { lower: a.offset - x.offset, upper: b.offset - x.offset } : { lower: x.offset - b.offset, upper: x.offset - a.offset };
  }
  if (!['<', '<=', '>', '>=', '='].includes(op)) return undefined;
  const a = timeTerm(n.left, ctx, l, r);
  const b = timeTerm(n.right, ctx, l, r);
  if (!a || !b || a.side === b.side) return undefined;
  // a.ts + a.off OP b.ts + b.off  ⇒  d = R.ts - L.ts compared with a constant
  const [rr, ll] = a.side === 'R' ? [a, b] : [b, a];
  const k = ll.offset - rr.offset; // R.ts OP' L.ts + k, where OP' is op seen from R's side
  const fromR = a.side === 'R' ? op : ({ '<': '>', '<=': '>=', '>': '<', '>=': '<=', '=': '=' } as Record<string, string>)[op]!;
  switch (fromR) {
    case '=':
      return { lower: k, upper: k };
    case '>=':
      return { lower: k };
    case '>':
      return { lower: k + 1 };
    case '<=':
      return { upper: k };
    case '<':
      return { upper: k - 1 };
  }
  return undefined;
}

export function compileJoin(
  ctx: CompileContext,
  left: Relation,
  right: Relation,
  condition: AstNode,
  parallelism: number | undefined,
): { relation: Relation; residual: AstNode } {
  for (const rel of [left, right]) {
    if (rel.updating) throw ctx.error(condition, `${rel.label} is an updating result (a GROUP BY without a window); joins over it are not supported yet`, 'SQL_UNSUPPORTED', rel.label);
  }
  const lq = new Set(left.scope.qualifiers().map((q) => q.toLowerCase()));
  for (const q of right.scope.qualifiers()) {
    if (lq.has(q.toLowerCase())) throw ctx.error(condition, `both inputs of the join are named "${q}": give one an alias`, 'SQL_INVALID', q);
  }
  const keysL: AstNode[] = [];
  const keysR: AstNode[] = [];
  const onlyL: AstNode[] = [];
  const onlyR: AstNode[] = [];
  const rest: AstNode[] = [];
  let lower: number | undefined;
  let upper: number | undefined;
  for (const c of conjuncts(condition)) {
    const bound = timeBound(c, ctx, left, right);
    if (bound) {
      if (bound.lower !== undefined) lower = lower === undefined ? bound.lower : Math.max(lower, bound.lower);
      if (bound.upper !== undefined) upper = upper === undefined ? bound.upper : Math.min(upper, bound.upper);
      continue;
    }
    const s = sides(c, left.scope, right.scope);
    if (c?.type === 'binary_expr' && c.operator === '=' && s.size === 2) {
      const a = sides(c.left, left.scope, right.scope);
      const b = sides(c.right, left.scope, right.scope);
      if (a.size === 1 && b.size === 1 && !a.has([...b][0]!)) {
        if (a.has('L')) {
          keysL.push(c.left);
          keysR.push(c.right);
        } else {
          keysL.push(c.right);
          keysR.push(c.left);
        }
        continue;
      }
    }
    if (s.size === 1 && s.has('L')) onlyL.push(c);
    else if (s.size === 1 && s.has('R')) onlyR.push(c);
    else rest.push(c);
  }
  if (!keysL.length) {
    throw ctx.error(condition ?? {}, `a join needs an equality between a column of ${left.label} and one of ${right.label} (e.g. ON a.id = b.a_id): both streams are keyed by it`, 'SQL_UNSUPPORTED', 'JOIN');
  }
  const side = (rel: Relation, filters: AstNode[]): DataStream<Row> => {
    if (!filters.length) return rel.stream;
    const f = compileExpr(and(filters), rel.scope, ctx).fn;
    return rel.stream.filter((r) => f(r) === true, { name: `where ${rel.label}` });
  };
  const kl = keysL.map((k) => compileExpr(k, left.scope, ctx).fn);
  const kr = keysR.map((k) => compileExpr(k, right.scope, ctx).fn);
  const p = parallelism ?? Math.max(left.shards, right.shards);
  const keyedL = side(left, onlyL).keyBy(rowKeyOf(kl), { parallelism: p });
  const keyedR = side(right, onlyR).keyBy(rowKeyOf(kr), { parallelism: p });

  let joined: DataStream<Row>;
  if (lower !== undefined || upper !== undefined) {
    if (lower === undefined || upper === undefined) {
      throw ctx.error(condition, 'an interval join needs both a lower and an upper bound between the event times (e.g. b.ts BETWEEN a.ts AND a.ts + INTERVAL \'10\' SECOND); one side is open', 'SQL_INVALID', 'BETWEEN');
    }
    if (lower > upper) throw ctx.error(condition, `the join's time bounds are empty (${lower} ms > ${upper} ms)`, 'SQL_INVALID', 'BETWEEN');
    const api = keyedL as unknown as Partial<IntervalJoinApi>;
    if (typeof api.intervalJoin !== 'function') {
      throw ctx.error(condition, 'interval joins need KeyedStream.intervalJoin, which this build of the job API does not have yet', 'SQL_UNSUPPORTED', 'JOIN');
    }
    joined = api.intervalJoin(keyedR, { lowerMs: lower, upperMs: upper }).process((l, r, _ctx, out) => out.collect([l, r]), { name: 'interval join' });
  } else {
    const api = keyedL as unknown as Partial<ConnectApi>;
    if (typeof api.connect !== 'function') {
      throw ctx.error(condition, 'regular joins need KeyedStream.connect, which this build of the job API does not have yet; bound the event times for an interval join', 'SQL_UNSUPPORTED', 'JOIN');
    }
    const ls = listState<Row>('left');
    const rs = listState<Row>('right');
    joined = api.connect(keyedR).process(
      {
        state: [ls, rs],
        processElement1(v, c, out) {
          c.getListState(ls).add(v);
          for (const r of c.getListState(rs).get()) out.collect([v, r]);
        },
        processElement2(v, c, out) {
          c.getListState(rs).add(v);
          for (const l of c.getListState(ls).get()) out.collect([l, v]);
        },
      },
      { name: 'join' },
    );
  }
  const cols: ScopeColumn[] = [
    ...left.scope.columns.map((c) => ({ ...c, get: (r: Row) => c.get(r[0]) })),
    ...right.scope.columns.map((c) => ({ ...c, get: (r: Row) => c.get(r[1]) })),
  ];
  return {
    relation: { stream: joined, scope: new Scope(cols), rowtime: undefined, shards: p, label: `${left.label} ⋈ ${right.label}` },
    residual: rest.length ? and(rest) : undefined,
  };
}
