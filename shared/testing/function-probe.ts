/**
 * Finds the user functions that are not deterministic. A copy of the job runs each record-at-a-time
 * function twice on the same input — once on a copy of its arguments with the clock moved forward
 * (Date.now, new Date()), once for real — and compares what the two calls return. A function that
 * reads the clock, draws random numbers or counts its calls is named with its operator.
 *
 * Probed: source parse and timestamp, map, filter, flatMap, key selectors, reduce, window results,
 * upsert sinks' key and item. Keyed and operator process functions change state as they run and
 * cannot be called twice; their nondeterminism shows as state rows of one checkpoint written twice
 * with other values (see checkDeterminism).
 */
import type { LogicalNode } from '../api/graph.js';
import type { Job } from '../api/job.js';

/** A user function that returned different results for the same input. */
export interface NondeterministicFunction {
  /** the operator as plans and logs name it: `map "page-type" (op2-map)` */
  readonly operator: string;
  /** which of the operator's functions */
  readonly function: string;
  /** the input and the two results that differed (or, for state, the row) */
  readonly example: string;
}

export function operatorLabel(node: LogicalNode): string {
  return `${node.kind} "${node.name}" (${node.id})`;
}

/** The clock of the first call runs this much ahead (a year and a bit: any clock reader sees it). */
const CLOCK_SHIFT_MS = 400 * 86_400_000 + 12_345;

/** Runs `f` with Date.now and `new Date()` moved forward; `f` is synchronous, so nothing else sees it. */
function withShiftedClock<T>(f: () => T): T {
  const RealDate = globalThis.Date;
  function ShiftedDate(this: unknown, ...args: unknown[]): unknown {
    if (!new.target) return new RealDate(RealDate.now() + CLOCK_SHIFT_MS).toString();
    return args.length === 0 ? new RealDate(RealDate.now() + CLOCK_SHIFT_MS) : Reflect.construct(RealDate, args);
  }
  ShiftedDate.prototype = RealDate.prototype;
  ShiftedDate.now = () => RealDate.now() + CLOCK_SHIFT_MS;
  ShiftedDate.parse = RealDate.parse;
  ShiftedDate.UTC = RealDate.UTC;
  globalThis.Date = ShiftedDate as unknown as DateConstructor;
  try {
    return f();
  } finally {
    globalThis.Date = RealDate;
  }
}

/** Stable text of a value: object keys sorted, so that two equal results compare equal. */
export function canonicalJson(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => {
    if (typeof x === 'bigint') return `${x}n`;
    if (x === undefined) return '(undefined)';
    if (x instanceof Map) return { '(map)': [...x.entries()] };
    if (x instanceof Set) return { '(set)': [...x.values()] };
    if (x && typeof x === 'object' && !Array.isArray(x) && !(x instanceof Uint8Array)) {
      return Object.fromEntries(Object.keys(x).sort().map((k) => [k, (x as Record<string, unknown>)[k]]));
    }
    return x;
  }) ?? '(undefined)';
}

function copyOf(v: unknown): unknown {
  try {
    return structuredClone(v);
  } catch {
    return v; // functions or class instances with private fields: the original it is
  }
}

const short = (s: string) => (s.length > 160 ? `${s.slice(0, 157)}…` : s);

type Fn = (...args: never[]) => unknown;

/** A copy of `job` whose record-at-a-time functions are probed; `found` hears of each culprit once. */
export function probedJob(job: Job, found: (f: NondeterministicFunction) => void): Job {
  const reported = new Set<string>();
  const probe = <F extends Fn | undefined>(node: LogicalNode, role: string, fn: F, copied: number, iterable = false): F => {
    if (!fn) return fn;
    const call = fn as unknown as (...args: unknown[]) => unknown;
    const run = (args: unknown[]) => {
      const out = call(...args);
      return iterable ? Array.from(out as Iterable<unknown>) : out;
    };
    return ((...args: unknown[]) => {
      let first: string | undefined;
      try {
        first = canonicalJson(withShiftedClock(() => run(args.map((a, i) => (i < copied ? copyOf(a) : a)))));
      } catch {
        first = undefined; // a throwing call is judged by the real one
      }
      const out = run(args);
      const tag = `${node.id}/${role}`;
      if (first !== undefined && !reported.has(tag)) {
        const second = canonicalJson(out);
        if (second !== first) {
          reported.add(tag);
          found({ operator: operatorLabel(node), function: role, example: `on ${short(canonicalJson(args[0]))} it returned ${short(first)}, then ${short(second)}` });
        }
      }
      return out;
    }) as unknown as F;
  };
  const copies = new Map<string, LogicalNode>();
  const nodes = job.nodes.map((n): LogicalNode => {
    const inputs = n.inputs.map((i) => copies.get(i.id) ?? i);
    let c: LogicalNode;
    switch (n.kind) {
      case 'source':
        c = { ...n, inputs, ...(n.parse ? { parse: probe(n, 'parse', n.parse, 1) } : {}), ...(n.timestamp ? { timestamp: probe(n, 'timestamp', n.timestamp, 1) } : {}) };
        break;
      case 'map':
        c = { ...n, inputs, fn: probe(n, 'map function', n.fn, 1) };
        break;
      case 'filter':
        c = { ...n, inputs, fn: probe(n, 'filter predicate', n.fn, 1) };
        break;
      case 'flatMap':
        c = { ...n, inputs, fn: probe(n, 'flatMap function', n.fn, 1, true) };
        break;
      case 'exchange':
        c = { ...n, inputs, ...(n.keySelector ? { keySelector: probe(n, 'key selector', n.keySelector, 1) } : {}) };
        break;
      case 'reduce':
        c = { ...n, inputs, fn: probe(n, 'reduce function', n.fn, 2) };
        break;
      case 'window':
        c = { ...n, inputs, ...(n.result ? { result: probe(n, 'window result', n.result, 3) } : {}) };
        break;
      case 'sink':
        c = { ...n, inputs, sink: { ...n.sink, ...(n.sink.key ? { key: probe(n, 'sink key', n.sink.key, 1) } : {}), ...(n.sink.item ? { item: probe(n, 'sink item', n.sink.item, 1) } : {}) } };
        break;
      default:
        c = { ...n, inputs } as LogicalNode;
    }
    copies.set(n.id, c);
    return c;
  });
  return Object.assign(Object.create(Object.getPrototypeOf(job) as object) as Job, job, { nodes });
}
