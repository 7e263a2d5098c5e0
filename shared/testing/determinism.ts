/**
 * Checks that a job's functions are deterministic, as exactly-once recovery needs (a replay must
 * re-emit the same records under the same ids). The job runs over the input with every batch landing
 * in a fresh environment, so each batch restores the last snapshot and replays the shard up to
 * itself: a function that reads the clock, draws unseeded random numbers or depends on the order of
 * something unordered then emits other content under ids it used before, and that is reported.
 * (Two separate runs may legitimately differ: records of one key from two producers interleave as
 * they arrive. Replay within a run may not.)
 *
 * The report names the functions at fault: record-at-a-time functions are called twice per record
 * (see function-probe.ts); a process function is named by the state rows it wrote twice with other
 * values, or, when only its outputs differed on replay, as a suspect of the sink they reach.
 */
import type { LogicalNode } from '../api/graph.js';
import type { Job } from '../api/job.js';
import { canonicalJson, operatorLabel, probedJob, type NondeterministicFunction } from './function-probe.js';
import { MemoryJobRunner } from './memory-job-runner.js';

export type { NondeterministicFunction } from './function-probe.js';

export interface DeterminismReport {
  readonly deterministic: boolean;
  /** what differed, readable */
  readonly differences: string[];
  /** the user functions found (or, marked as suspects, thought) to be at fault */
  readonly functions: NondeterministicFunction[];
}

/** `inputs`: records per source name (values, or raw bytes as a producer would send them), produced in this order. */
export async function checkDeterminism(job: Job, inputs: Record<string, readonly unknown[]>, options: { checkpoints?: number } = {}): Promise<DeterminismReport> {
  const functions: NondeterministicFunction[] = [];
  const probed = probedJob(job, (f) => functions.push(f));
  const run = async (seed: number, batchSize: number, recycle: number) => {
    const r = new MemoryJobRunner(probed, { seed, batchSize, environments: 2, recycleProbability: recycle });
    const rounds = options.checkpoints ?? 4;
    for (let i = 0; i < rounds; i++) {
      for (const [source, records] of Object.entries(inputs)) {
        const per = Math.ceil(records.length / rounds);
        r.produce(source, records.slice(i * per, (i + 1) * per));
      }
      await r.runUntilIdle();
      await r.checkpoint();
    }
    r.endOfInput();
    await r.drain();
    return r;
  };
  // every batch in a fresh environment: each restores its shard's last snapshot and replays it,
  // re-emitting earlier outputs under their ids — which must come out byte for byte the same
  const b = await run(1, 3, 1);
  const differences: string[] = [];
  if (b.collect.conflicts) differences.push(`${b.collect.conflicts} outputs were emitted again under the same id with other content during replay`);
  if (b.mem.state.conflicts) differences.push(`${b.mem.state.conflicts} state rows of one checkpoint were written twice with other values`);
  if (b.mem.control.deltaConflicts) differences.push(`${b.mem.control.deltaConflicts} snapshots were made twice with other content`);
  for (const f of functions) differences.push(`${f.operator}: its ${f.function} is not deterministic: ${f.example}`);
  const byId = new Map(job.nodes.map((n) => [n.id, n]));
  // state rows of one checkpoint written twice with other values name their operator
  const firstWrite = new Map<string, string>();
  const stateCulprits = new Set<string>();
  for (const w of b.mem.state.history) {
    const tag = `${w.checkpointId}\u0000${`${w.row.operatorId}#${w.row.keyGroup}\u0000${w.row.key}`}`;
    const values = canonicalJson(Object.fromEntries(Object.entries(w.row.values).map(([k, v]) => [k, Buffer.from(v).toString('base64')])));
    const first = firstWrite.get(tag);
    if (first === undefined) firstWrite.set(tag, values);
    else if (first !== values && !stateCulprits.has(w.row.operatorId)) {
      stateCulprits.add(w.row.operatorId);
      const node = byId.get(w.row.operatorId);
      functions.push({ operator: node ? operatorLabel(node) : w.row.operatorId, function: 'state', example: `state of key ${JSON.stringify(w.row.key)} written twice in checkpoint ${w.checkpointId} with other values` });
    }
  }
  // outputs that differed on replay while no probed function did: the stateful functions upstream of the sink
  if (!functions.length) {
    for (const sink of b.collect.conflictedSinks) {
      const node = job.nodes.find((n) => n.kind === 'sink' && n.spec.name === sink);
      for (const s of node ? unprobedUpstream(node) : []) {
        functions.push({ operator: operatorLabel(s), function: 'process function (suspect)', example: `outputs reaching sink "${sink}" came out different when replayed` });
      }
    }
  }
  return { deterministic: differences.length === 0, differences, functions };
}

/** Operators upstream of `node` whose functions the probe cannot call twice (process functions, window functions). */
function unprobedUpstream(node: LogicalNode): LogicalNode[] {
  const out: LogicalNode[] = [];
  const seen = new Set<string>();
  const walk = (n: LogicalNode) => {
    if (seen.has(n.id)) return;
    seen.add(n.id);
    if (['process', 'coProcess', 'broadcastProcess', 'operatorProcess', 'window'].includes(n.kind)) out.push(n);
    for (const i of n.inputs) walk(i);
  };
  walk(node);
  return out;
}
