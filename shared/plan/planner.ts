/**
 * The one planner: job → stages. Operators between two exchanges (keyBy, rebalance) are chained
 * into one stage, as Flink chains tasks; each stage becomes one Lambda function reading one Kinesis
 * stream whose shard count is the stage's parallelism. Everything about a job that can be wrong is
 * found here, at plan time, with the path of the bad operator or field.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { LogicalNode } from '../api/graph.js';
import type { Job, JobOptions } from '../api/job.js';
import { PlanError } from '../util/errors.js';
import { MAX_MATERIALIZE_EVERY, type CheckpointSettings, type Plan, type PlanOperator, type PlanSink, type PlanSource, type PlanStage } from './plan.js';
import { sanitizeName } from './resources.js';

const MAX_KEY_GROUPS = 32_768;

const jobOptionsSchema = z
  .object({
    maxParallelism: z.number().int().min(1).max(MAX_KEY_GROUPS).optional(),
    mode: z.enum(['exactly-once', 'at-least-once']).optional(),
    poisonPolicy: z.enum(['fail', 'dead-letter']).optional(),
    checkpoint: z
      .object({
        intervalMs: z.number().int().min(100).optional(),
        timeoutMs: z.number().int().min(1000).optional(),
        minPauseMs: z.number().int().min(0).optional(),
        retained: z.number().int().min(1).max(100).optional(),
        maxConcurrent: z.number().int().min(1).max(8).optional(),
        maxInFlightRecords: z.number().int().min(1).optional(),
        materializeEvery: z.number().int().min(1).max(MAX_MATERIALIZE_EVERY).optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

function validateOptions(job: Job, options: JobOptions): void {
  const parsed = jobOptionsSchema.safeParse(options);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const path = ['options', ...issue.path.map(String)].join('.');
    throw new PlanError(`job "${job.name}" › ${path}`, issue.message);
  }
  if (!/^[A-Za-z][A-Za-z0-9-_]{0,39}$/.test(job.name)) {
    throw new PlanError(
      `job "${job.name}" › name`,
      'must start with a letter and hold at most 40 letters, digits, "-" or "_" (it prefixes AWS resource names)',
    );
  }
}

const where = (job: Job, node: LogicalNode) => `job "${job.name}" › ${node.id} (${node.kind} "${node.name}")`;

/**
 * The job's plan. `options`: the job's own, or others it is planned under (a local run that
 * replaces some of them, `sluice dev`'s state table written at every checkpoint).
 */
export function planJob(job: Job, options: JobOptions = job.options): Plan {
  validateOptions(job, options);
  const opts = options;
  const maxParallelism = opts.maxParallelism ?? 128;
  const nodes = job.nodes;
  if (!nodes.some((n) => n.kind === 'source')) throw new PlanError(`job "${job.name}"`, 'has no source');
  if (!nodes.some((n) => n.kind === 'sink')) {
    throw new PlanError(`job "${job.name}"`, 'has no sink: every stream must end in sinkTo(...)');
  }

  const consumers = new Map<string, LogicalNode[]>();
  for (const n of nodes) for (const i of n.inputs) consumers.set(i.id, [...(consumers.get(i.id) ?? []), n]);

  // Assign each node to a stage. A source starts a stage; an exchange ends its stage and starts
  // the next one, whose entry operators are the exchange's consumers.
  const stageOf = new Map<string, number>();
  const stageInfo: Array<{
    parallelism: number;
    input: PlanStage['input'];
    members: LogicalNode[];
  }> = [];
  const exchangeTarget = new Map<string, number>();
  const exchangeInput = new Map<string, number>();
  const sources: PlanSource[] = [];
  const sinks: PlanSink[] = [];

  for (const node of nodes) {
    if (node.kind === 'source') {
      const s = node.spec;
      if (!Number.isInteger(s.shards) || s.shards < 1 || s.shards > maxParallelism) {
        throw new PlanError(`${where(job, node)} › shards`, `must be an integer in [1, ${maxParallelism}], got ${s.shards}`);
      }
      if (!sanitizeName(s.name)) throw new PlanError(`${where(job, node)} › name`, `must hold a letter or digit, got "${s.name}"`);
      if (sources.some((x) => sanitizeName(x.name) === sanitizeName(s.name))) {
        throw new PlanError(`${where(job, node)} › name`, `another source is already named "${s.name}"`);
      }
      sources.push(s);
      stageOf.set(node.id, stageInfo.length);
      stageInfo.push({ parallelism: s.shards, input: { kind: 'source', sourceId: s.id }, members: [node] });
      continue;
    }
    const multiInput = node.kind === 'union' || node.kind === 'coProcess' || node.kind === 'broadcastProcess';
    if (!multiInput && node.inputs.length !== 1) throw new PlanError(where(job, node), `expects one input, got ${node.inputs.length}`);
    if ((node.kind === 'coProcess' || node.kind === 'broadcastProcess') && node.inputs.length !== 2) {
      throw new PlanError(where(job, node), `expects two inputs, got ${node.inputs.length}`);
    }
    const input = node.inputs[0]!;
    const shuffled = node.inputs.filter((i) => i.kind === 'exchange');
    let stage: number;
    if (shuffled.length) {
      // every shuffle into one operator lands in the same stage; each feeds one input of it
      if (shuffled.length !== node.inputs.length) {
        throw new PlanError(where(job, node), 'cannot mix shuffled and unshuffled inputs: keyBy (or rebalance) every input, or none');
      }
      const targets = new Set(shuffled.map((e) => exchangeTarget.get(e.id)).filter((t): t is number => t !== undefined));
      if (targets.size > 1) throw new PlanError(where(job, node), 'its inputs already feed different stages');
      const from = [...new Set(shuffled.map((e) => `s${stageOf.get(e.id)!}`))];
      if (targets.size === 1) {
        stage = [...targets][0]!;
      } else {
        const parallelisms = shuffled.map((e) => (e.kind === 'exchange' ? (e.parallelism ?? stageInfo[stageOf.get(e.id)!]!.parallelism) : 1));
        const declared = shuffled.map((e) => (e.kind === 'exchange' ? e.parallelism : undefined)).filter((p): p is number => p !== undefined);
        if (new Set(declared).size > 1) throw new PlanError(`${where(job, node)} › parallelism`, `its inputs ask for different parallelisms (${declared.join(', ')})`);
        stage = stageInfo.length;
        stageInfo.push({
          parallelism: declared[0] ?? Math.max(...parallelisms),
          input: { kind: 'exchange', fromStages: from, keyed: shuffled.some((e) => e.kind === 'exchange' && e.partitioning === 'key') },
          members: [],
        });
      }
      const info = stageInfo[stage]!;
      if (info.input.kind === 'exchange') {
        const all = [...new Set([...info.input.fromStages, ...from])];
        info.input = { ...info.input, fromStages: all, keyed: info.input.keyed || shuffled.some((e) => e.kind === 'exchange' && e.partitioning === 'key') };
      }
      node.inputs.forEach((e, side) => {
        const prev = exchangeInput.get(e.id);
        if (prev !== undefined && prev !== side) throw new PlanError(where(job, e), 'feeds different inputs of its consumers; split it into two keyBy calls');
        exchangeInput.set(e.id, side);
        exchangeTarget.set(e.id, stage);
      });
    } else {
      stage = stageOf.get(input.id)!;
      if (node.kind === 'union' && new Set(node.inputs.map((i) => stageOf.get(i.id))).size > 1) {
        throw new PlanError(where(job, node), 'can only merge streams of the same stage; key each input by the same key and union after keyBy, or union before the shuffle');
      }
    }
    if (node.kind === 'coProcess' && !node.inputs.every((i) => i.kind === 'exchange' && i.partitioning === 'key')) {
      throw new PlanError(where(job, node), 'both inputs of connect/join must be keyed (keyBy)');
    }
    if (node.kind === 'broadcastProcess') {
      const [keyed, rules] = node.inputs as [LogicalNode, LogicalNode];
      if (keyed.kind !== 'exchange' || keyed.partitioning !== 'key') throw new PlanError(where(job, node), 'the first input of a broadcast connection must be keyed (keyBy)');
      if (rules.kind !== 'exchange' || rules.partitioning !== 'broadcast') throw new PlanError(where(job, node), 'the second input of a broadcast connection must be broadcast()');
    }
    if (node.kind === 'sideOutput' && !['process', 'window', 'operatorProcess', 'coProcess', 'broadcastProcess'].includes(input.kind)) {
      throw new PlanError(where(job, node), `side outputs come from process or window operators, not from ${input.kind}`);
    }
    if (node.kind === 'window') {
      if (input.kind !== 'exchange' || input.partitioning !== 'key') throw new PlanError(where(job, node), 'windows must directly follow keyBy(...)');
      if (node.function.type === 'aggregate' && node.assigner.kind === 'session' && typeof node.function.aggregate.merge !== 'function') {
        throw new PlanError(`${where(job, node)} › aggregate.merge`, 'session windows merge, so their aggregate function needs merge(a, b)');
      }
      if (!Number.isInteger(node.allowedLatenessMs) || node.allowedLatenessMs < 0) {
        throw new PlanError(`${where(job, node)} › allowedLatenessMs`, `must be a non-negative integer, got ${node.allowedLatenessMs}`);
      }
    }
    if (node.kind === 'process' || node.kind === 'reduce' || node.kind === 'coProcess' || node.kind === 'broadcastProcess') {
      if ((node.kind === 'process' || node.kind === 'reduce') && (input.kind !== 'exchange' || input.partitioning !== 'key')) {
        throw new PlanError(where(job, node), 'keyed operators must directly follow keyBy(...)');
      }
      const names = new Set<string>();
      for (const d of node.state) {
        if (!d.name) throw new PlanError(`${where(job, node)} › state`, 'a state descriptor has an empty name');
        if (names.has(d.name)) throw new PlanError(`${where(job, node)} › state.${d.name}`, 'declared twice');
        names.add(d.name);
      }
    }
    if (node.kind === 'sink') {
      if (sinks.some((s) => s.name === node.spec.name)) {
        throw new PlanError(`${where(job, node)} › name`, `another sink is already named "${node.spec.name}"`);
      }
      if (node.spec.kind === 'dynamodb-upsert' && typeof node.sink.key !== 'function') {
        throw new PlanError(`${where(job, node)} › key`, 'an upsert sink needs a key function');
      }
      checkStagedSink(job, node);
      sinks.push(node.spec);
    }
    stageOf.set(node.id, stage);
    stageInfo[stage]!.members.push(node);
    if (node.kind === 'exchange') {
      // the stage it feeds is made when its first consumer is planned (joins share one)
      const parallelism = node.parallelism ?? stageInfo[stage]!.parallelism;
      if (!Number.isInteger(parallelism) || parallelism < 1 || parallelism > maxParallelism) {
        throw new PlanError(
          `${where(job, node)} › parallelism`,
          `must be an integer in [1, maxParallelism=${maxParallelism}], got ${parallelism}`,
        );
      }
      if (!consumers.get(node.id)?.length) throw new PlanError(where(job, node), 'has no consumer');
    }
  }

  for (const node of nodes) {
    if (node.kind !== 'sink' && node.kind !== 'exchange' && !consumers.get(node.id)?.length) {
      throw new PlanError(where(job, node), 'its output goes nowhere: add a sink or remove the operator');
    }
  }

  const stages: PlanStage[] = stageInfo.map((info, index) => {
    const inStage = new Set(info.members.map((m) => m.id));
    const operators: PlanOperator[] = info.members.map((m) => toPlanOperator(m, inStage, exchangeTarget, exchangeInput));
    return {
      id: `s${index}`,
      name: info.members.map((m) => m.name).join(' → '),
      parallelism: info.parallelism,
      input: info.input,
      operators,
      stateful: operators.some((o) => o.state.length > 0),
    };
  });

  const c = opts.checkpoint ?? {};
  const checkpoint: CheckpointSettings = {
    intervalMs: c.intervalMs ?? 10_000,
    timeoutMs: c.timeoutMs ?? 60_000,
    minPauseMs: c.minPauseMs ?? 0,
    retained: c.retained ?? 3,
    continueAsNewAfter: 500,
    // only set above 1: the plan (and its hash) of a job that does not ask stays as it was
    ...(c.maxConcurrent !== undefined && c.maxConcurrent > 1 ? { maxConcurrent: c.maxConcurrent } : {}),
    ...(c.maxInFlightRecords !== undefined ? { maxInFlightRecords: c.maxInFlightRecords } : {}),
    ...(c.materializeEvery !== undefined ? { materializeEvery: c.materializeEvery } : {}),
  };
  if (checkpoint.maxInFlightRecords !== undefined && (checkpoint.maxConcurrent ?? 1) > 1) {
    // overlapping checkpoints put barriers at the tail of the source shards: a source holding back
    // its input would never read them, and no checkpoint would free its window
    throw new PlanError(`job "${job.name}" › options.checkpoint.maxInFlightRecords`, 'needs maxConcurrent 1 (barriers at the sources\' read position)');
  }
  if (checkpoint.timeoutMs <= checkpoint.minPauseMs) {
    throw new PlanError(`job "${job.name}" › options.checkpoint.timeoutMs`, 'must exceed minPauseMs');
  }

  const body: Omit<Plan, 'hash'> = {
    formatVersion: 1,
    job: job.name,
    maxParallelism,
    mode: opts.mode ?? 'exactly-once',
    poisonPolicy: opts.poisonPolicy ?? 'dead-letter',
    checkpoint,
    sources,
    sinks,
    stages,
  };
  return { ...body, hash: planHash(body) };
}

/** Checks of transactional sinks: names usable in S3 keys, prefixes the functions may write. */
function checkStagedSink(job: Job, node: LogicalNode & { kind: 'sink' }): void {
  const spec = node.spec;
  if (spec.kind === 'dynamodb-upsert') return;
  if (!sanitizeName(spec.name)) throw new PlanError(`${where(job, node)} › name`, `must hold a letter or digit, got "${spec.name}"`);
  if (spec.kind === 's3-file') {
    const prefix = spec.prefix ?? '';
    if (!prefix.startsWith('sinks/') || prefix.length <= 'sinks/'.length) {
      throw new PlanError(`${where(job, node)} › prefix`, `must start with "sinks/" (the functions may write only there), got "${prefix}"`);
    }
    if (prefix.startsWith('sinks/_staged')) throw new PlanError(`${where(job, node)} › prefix`, '"sinks/_staged" holds staged outputs; pick another prefix');
    if (/(^|\/)\.\.?(\/|$)|\/\/|[\\{}^%`\[\]"<>~#|]/.test(prefix)) {
      throw new PlanError(`${where(job, node)} › prefix`, `must be a plain S3 key prefix (no "..", "//" or special characters), got "${prefix}"`);
    }
    if (spec.format !== 'jsonl') throw new PlanError(`${where(job, node)} › format`, `must be "jsonl", got "${String(spec.format)}"`);
  }
  // an existing stream's name is checked where the sink is declared (checkSinkSpec)
}

function toPlanOperator(node: LogicalNode, inStage: Set<string>, exchangeTarget: Map<string, number>, exchangeInput: Map<string, number>): PlanOperator {
  const base = {
    id: node.id,
    kind: node.kind,
    name: node.name,
    inputs: node.inputs.filter((i) => inStage.has(i.id)).map((i) => i.id),
    keyed: KEYED_KINDS.has(node.kind),
    state: [
      ...('state' in node ? node.state.map((d) => ({ name: d.name, kind: d.kind, scope: 'keyed' as const })) : []),
      ...(node.kind === 'broadcastProcess'
        ? broadcastDescriptors(node).map((d) => ({ name: d.name, kind: d.kind, scope: 'broadcast' as const }))
        : []),
      ...(node.kind === 'operatorProcess'
        ? node.operatorState.map((d) => ({ name: d.name, kind: d.kind, scope: d.mode === 'union' ? ('union' as const) : ('operator' as const) }))
        : []),
    ],
  };
  switch (node.kind) {
    case 'exchange':
      return { ...base, exchange: { toStage: `s${exchangeTarget.get(node.id)}`, partitioning: node.partitioning, input: exchangeInput.get(node.id) ?? 0 } };
    case 'sink':
      return { ...base, sink: node.spec };
    case 'source':
      return { ...base, source: node.spec };
    default:
      return base;
  }
}

const KEYED_KINDS = new Set(['process', 'reduce', 'window', 'coProcess', 'broadcastProcess']);

/** The broadcast state a broadcast-connected operator keeps: declared on its broadcast input. */
export function broadcastDescriptors(node: LogicalNode) {
  const rules = node.inputs[1];
  return rules?.kind === 'exchange' ? (rules.broadcastState ?? []) : [];
}

/** Canonical JSON (sorted keys) hashed with sha-256. */
export function planHash(body: unknown): string {
  const canon = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(canon)
      : v && typeof v === 'object'
        ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b)).map(([k, x]) => [k, canon(x)]))
        : v;
  return createHash('sha256').update(JSON.stringify(canon(body))).digest('hex').slice(0, 16);
}

/** Finds a stage by id or fails with the ids that exist. */
export function stageById(plan: Plan, id: string): PlanStage {
  const stage = plan.stages.find((s) => s.id === id);
  if (!stage) throw new PlanError(`job "${plan.job}"`, `has no stage "${id}" (stages: ${plan.stages.map((s) => s.id).join(', ')})`);
  return stage;
}
