/**
 * GROUP BY and aggregates. The group expressions become the key (keyBy), each distinct aggregate call
 * of SELECT and HAVING one accumulator slot. With a window (TUMBLE/HOP/SESSION in GROUP BY) the
 * result is append-only: each window's row once, when it closes. Without one it is an updating
 * result: the accumulators live in keyed state and the group's new row follows every input; over an
 * updating input, each change is first a retraction of the replaced row and an addition of the new.
 */
import type { DataStream } from '../api/job.js';
import { valueState } from '../api/state.js';
import type { KeyedProcessFunction } from '../api/types.js';
import { EventTimeSessionWindows, SlidingEventTimeWindows, TumblingEventTimeWindows, type WindowAssigner } from '../api/windows.js';
import { AGGREGATES, multiAggregate, resultType, retractingAggregate, type AggKind, type AggSlot } from './aggregates.js';
import type { CompileContext } from './context.js';
import {
  canonical,
  columnName,
  compileExpr,
  functionArgs,
  functionName,
  intervalMs,
  WINDOW_FUNCTIONS,
  WINDOW_PROPERTIES,
  type AstNode,
  type Compiled,
  type ExprType,
  type Row,
} from './expressions.js';
import { checkColumnNames, outputRow, selectItems } from './projection.js';
import { whereRows, type Change, type QueryOutput, type Relation } from './relation.js';
import { rowKeyOf } from './row-key.js';
import { structuralKey, type AggregatedRow, type SubPlans } from './sub-plans.js';

/** Whether `n` (an expression, or a list of them) calls an aggregate outside any subquery. */
export function containsAggregate(n: AstNode): boolean {
  if (!n || typeof n !== 'object') return false;
  if (Array.isArray(n)) return n.some(containsAggregate);
  if (n.type === 'aggr_func') return true;
  if (n.ast) return false; // a subquery has its own aggregates
  return Object.values(n).some(containsAggregate);
}

/**
 * The output of a query with GROUP BY, aggregates or HAVING over `rel` filtered by `where`;
 * `configuredParallelism` overrides the input's shard count. A windowed aggregate that `subPlans`
 * already holds (same input, WHERE, GROUP BY and window) is read, not planned again.
 */
export function compileGroupedQuery(
  node: AstNode,
  rel: Relation,
  where: { readonly node: AstNode; readonly fn: (r: Row) => unknown } | undefined,
  c: CompileContext,
  configuredParallelism: number | undefined,
  subPlans: SubPlans,
): QueryOutput {
  const scope = rel.scope;
  // GROUP BY: plain expressions and at most one window
  let window: { kind: string; node: AstNode; assigner: WindowAssigner; argsKey: string } | undefined;
  const groups: Array<{ key: string; compiled: Compiled; node: AstNode }> = [];
  for (const g of node.groupby?.columns ?? []) {
    const fname = g?.type === 'function' ? functionName(g) : '';
    if (WINDOW_FUNCTIONS.includes(fname)) {
      if (window) throw c.error(g, `GROUP BY has two windows (${window.kind} and ${fname}); group by one`, 'SQL_INVALID', fname);
      window = { kind: fname, node: g, assigner: windowAssigner(g, fname, rel, c), argsKey: canonical(functionArgs(g), scope) };
      continue;
    }
    if (g?.type === 'number') throw c.error(g, 'GROUP BY by position is not supported: name the column', 'SQL_UNSUPPORTED', String(g.value));
    if (containsAggregate(g)) throw c.error(g, 'aggregates are not allowed in GROUP BY', 'SQL_INVALID');
    groups.push({ key: canonical(g, scope), compiled: compileExpr(g, scope, c), node: g });
  }
  // aggregate calls of SELECT and HAVING, each computed once
  const slots: AggSlot[] = [];
  const slotKeys: string[] = [];
  // where each slot's value sits in the aggregated rows (elsewhere when they come from a reused aggregate)
  const slotAt: number[] = [];
  const slotNodes: AstNode[] = [];
  const slotOf = (a: AstNode): number => {
    const k = canonical(a, scope);
    const known = slotKeys.indexOf(k);
    if (known >= 0) return known;
    const fname = String(a.name).toUpperCase();
    if (!AGGREGATES.includes(fname)) throw c.error(a, `unsupported aggregate ${fname} (supported: ${AGGREGATES.join(', ')}, COUNT(DISTINCT …))`, 'SQL_UNSUPPORTED', fname);
    const argNode = a.args?.expr;
    const distinct = /DISTINCT/i.test(String(a.args?.distinct ?? ''));
    if (distinct && fname !== 'COUNT') throw c.error(a, `${fname}(DISTINCT …) is not supported (COUNT(DISTINCT …) is)`, 'SQL_UNSUPPORTED', fname);
    const star = !argNode || argNode.type === 'star';
    if (star && fname !== 'COUNT') throw c.error(a, `${fname}(*) is not valid: name a column`, 'SQL_INVALID', fname);
    if (star && distinct) throw c.error(a, 'COUNT(DISTINCT *) is not valid: name a column', 'SQL_INVALID', fname);
    if (!star && containsAggregate(argNode)) throw c.error(a, 'aggregates cannot be nested: compute the inner one in a subquery', 'SQL_INVALID', fname);
    const arg = star ? undefined : compileExpr(argNode, scope, c);
    if (arg && (fname === 'SUM' || fname === 'AVG') && !['BIGINT', 'DOUBLE', 'ANY', 'NULL'].includes(arg.type)) {
      throw c.error(a, `${fname} needs a number, got ${arg.type}${arg.name ? ` (column ${arg.name})` : ''}`, 'SQL_INVALID', fname);
    }
    const kind: AggKind = distinct ? 'COUNT_DISTINCT' : (fname as AggKind);
    slots.push({ kind, arg: arg?.fn, type: arg?.type ?? 'BIGINT' });
    slotKeys.push(k);
    slotNodes.push(a);
    slotAt.push(slots.length - 1);
    return slots.length - 1;
  };
  // post-aggregation rows: { g: group values, a: aggregate results, w: window bounds }
  const hook = (n: AstNode): Compiled | undefined => {
    if (!n || typeof n !== 'object' || Array.isArray(n)) return undefined;
    if (n.type === 'aggr_func') {
      const i = slotOf(n);
      return { fn: (r: Row) => r.a[slotAt[i]!], type: resultType(slots[i]!) };
    }
    if (n.type === 'function') {
      const fname = functionName(n);
      const m = WINDOW_PROPERTIES.exec(fname);
      if (m) {
        if (!window) throw c.error(n, `${fname}(...) needs GROUP BY ${m[1]}(...)`, 'SQL_INVALID', fname);
        if (m[1] !== window.kind) throw c.error(n, `${fname}(...) does not match the GROUP BY window ${window.kind}(...): use ${window.kind}_${m[2]}`, 'SQL_INVALID', fname);
        if (canonical(functionArgs(n), scope) !== window.argsKey) throw c.error(n, `${fname}(...) must repeat the arguments of the GROUP BY's ${window.kind}(...)`, 'SQL_INVALID', fname);
        const part = m[2];
        return { fn: part === 'START' ? (r: Row) => r.w.start : part === 'END' ? (r: Row) => r.w.end : (r: Row) => r.w.end - 1, type: 'TIMESTAMP', name: `${m[1]!.toLowerCase()}_${part!.toLowerCase()}` };
      }
    }
    if (n.type === 'column_ref' || n.type === 'function' || n.type === 'binary_expr' || n.type === 'unary_expr' || n.type === 'cast' || n.type === 'case') {
      const k = canonical(n, scope);
      const gi = groups.findIndex((g) => g.key === k);
      if (gi >= 0) {
        const g = groups[gi]!;
        return { fn: (r: Row) => r.g[gi], type: g.compiled.type, ...(g.compiled.name ? { name: g.compiled.name } : {}), ...(g.compiled.column ? { column: g.compiled.column } : {}) };
      }
      if (n.type === 'column_ref' && columnName(n) !== '*') {
        const name = columnName(n);
        compileExpr(n, scope, c); // unknown or ambiguous columns fail first, with their own message
        throw c.error(n, `column "${n.table ? `${n.table}.` : ''}${name}" must appear in GROUP BY or be inside an aggregate (COUNT, SUM, MIN, MAX, AVG)`, 'SQL_INVALID', n.table ? `${n.table}.${name}` : name);
      }
    }
    return undefined;
  };
  const fields: Array<{ name: string; fn: (r: Row) => unknown; type: ExprType; rowtime: boolean; group?: number }> = [];
  let i = 0;
  for (const item of selectItems(node, scope, c)) {
    if ('star' in item) throw c.error(node, 'SELECT * is not allowed in a grouped query: list the grouped columns and aggregates', 'SQL_INVALID', '*');
    const e = compileExpr(item.expr, scope, c, hook);
    const isRowtime = item.expr?.type === 'function' && /_ROWTIME$/.test(functionName(item.expr));
    const gi = groups.findIndex((g) => g.key === canonical(item.expr, scope));
    fields.push({ name: item.as ?? e.name ?? `EXPR$${i}`, fn: e.fn, type: e.type, rowtime: isRowtime, ...(gi >= 0 ? { group: gi } : {}) });
    i++;
  }
  checkColumnNames(node, fields.map((f) => f.name), c);
  const having = node.having ? compileExpr(node.having, scope, c, hook) : undefined;

  const groupFns = groups.map((g) => g.compiled.fn);
  const keyOf = rowKeyOf(groupFns);
  const parallelism = groups.length === 0 ? 1 : (configuredParallelism ?? rel.shards);
  const retracting = rel.updating === true;
  if (retracting && window) throw c.error(window.node, `${rel.label} is an updating result (a GROUP BY without a window): it has no event time to window by`, 'SQL_UNSUPPORTED', window.kind);
  // built only when this query plans its own aggregate: one reusing another's adds no operator
  const keyed = () => {
    const input = where ? whereRows(rel, where.fn) : rel.stream;
    // over an updating input, every change becomes a retraction of the replaced row and an addition of the new one
    return retracting
      ? input
          .flatMap((u: Change) => [...(u.old ? [{ r: -1, row: u.old }] : []), ...(u.v ? [{ r: 1, row: u.v }] : [])], { name: 'retract' })
          .keyBy((m: { row: Row }) => keyOf(m.row), { parallelism })
      : input.keyBy(keyOf, { parallelism });
  };
  const agg = retracting ? retractingAggregate(slots) : multiAggregate(slots);
  const toRow = outputRow(fields);
  const havingFn = having?.fn;
  const label = window ? `${window.kind.toLowerCase()} window` : 'group';
  /** The window's aggregated rows: planned here, or those of the same aggregate planned by another subquery. */
  const windowAggregate = (): DataStream<AggregatedRow> => {
    const shape = (n: AstNode) => structuralKey(n, scope);
    const key = subPlans.key(rel, {
      where: where ? shape(where.node) : undefined,
      groups: groups.map((g) => shape(g.node)),
      window: `${window!.kind}:${shape(functionArgs(window!.node))}`,
      parallelism,
    });
    const aggregates = slotNodes.map(shape);
    const reused = subPlans.find(key, aggregates);
    if (reused) {
      reused.positions.forEach((at, i) => (slotAt[i] = at));
      return reused.stream;
    }
    const stream = keyed()
      .window(window!.assigner)
      .aggregate(agg, {
        name: `${label} aggregate`,
        result: (k, w, values): AggregatedRow => ({ g: JSON.parse(String(k)) as unknown[], a: values, w: { start: w.start, end: w.end } }),
      });
    subPlans.add(key, stream, aggregates);
    return stream;
  };
  if (window) {
    let post = windowAggregate();
    if (havingFn) post = post.filter((r) => havingFn(r) === true, { name: 'having' });
    const stream = post.map(toRow, { name: 'select' });
    const rowtime = fields.find((f) => f.rowtime)?.name;
    return { stream, columns: fields.map((f) => ({ name: f.name, type: f.type })), rowtime, shards: parallelism, updating: false };
  }
  // non-windowed: an updating result, one row per group, re-emitted after every input
  const accState = valueState<unknown[]>('acc');
  const fn: KeyedProcessFunction<string, Row, Row> = {
    state: [accState],
    processElement(row, ctx, out) {
      const s = ctx.getState(accState);
      const before = s.value();
      const acc = agg.add(row, before ?? agg.createAccumulator());
      s.update(acc);
      const g = JSON.parse(ctx.key) as unknown[];
      const rowOf = (a: unknown[] | undefined): Row | null => {
        if (!a || (retracting && agg.isEmpty(a))) return null; // a group whose every row was retracted is gone
        const post = { g, a: agg.getResult(a), w: null };
        return havingFn && havingFn(post) !== true ? null : toRow(post);
      };
      const v = rowOf(acc);
      const old = rowOf(before);
      if (JSON.stringify(v) === JSON.stringify(old)) return; // nothing visible changed
      const change: Change = { k: ctx.key, v, old };
      out.collect(change);
    },
  };
  const stream = keyed().process(fn, { name: `${label} aggregate` });
  // the key columns, when every GROUP BY expression is selected
  const keyColumns = groups.map((_, gi) => fields.find((f) => f.group === gi)?.name);
  return {
    stream,
    columns: fields.map((f) => ({ name: f.name, type: f.type })),
    rowtime: undefined,
    shards: parallelism,
    updating: true,
    ...(keyColumns.length && keyColumns.every((k) => k !== undefined) ? { keyColumns: keyColumns as string[] } : {}),
  };
}

/** The window of a GROUP BY TUMBLE/HOP/SESSION(...) call, over the relation's event-time column. */
function windowAssigner(g: AstNode, kind: string, rel: Relation, c: CompileContext): WindowAssigner {
  const args = functionArgs(g);
  const want = kind === 'HOP' ? 3 : 2;
  const usage = kind === 'TUMBLE' ? 'TUMBLE(time_col, size)' : kind === 'HOP' ? 'HOP(time_col, slide, size)' : 'SESSION(time_col, gap)';
  if (args.length !== want) throw c.error(g, `${kind} takes ${want} arguments: ${usage}`, 'SQL_INVALID', kind);
  const time = compileExpr(args[0], rel.scope, c);
  if (!rel.rowtime) {
    throw c.error(g, `${rel.label} has no event time: declare its event-time column with 'event_time' = '<column>' in CREATE TABLE … WITH (…)${rel.label ? '' : ''}, or select a *_ROWTIME(...) column in the subquery`, 'SQL_INVALID', kind);
  }
  if (!time.column || time.column.id !== rel.rowtime.id) {
    throw c.error(args[0], `${kind} needs the event-time column of ${rel.label} (${rel.rowtime.name}), got ${time.name ?? 'an expression'}`, 'SQL_INVALID', time.name ?? kind);
  }
  const ms = args.slice(1).map((a: AstNode) => {
    const v = intervalMs(a, c);
    if (v === undefined || !Number.isInteger(v) || v <= 0) throw c.error(a, `${kind}: ${usage} needs positive INTERVAL literals, e.g. INTERVAL '10' SECOND`, 'SQL_INVALID', kind);
    return v;
  });
  if (kind === 'TUMBLE') return TumblingEventTimeWindows.of(ms[0]!);
  if (kind === 'HOP') return SlidingEventTimeWindows.of(ms[1]!, ms[0]!);
  return EventTimeSessionWindows.withGap(ms[0]!);
}
