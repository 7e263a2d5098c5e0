/**
 * Human views of a plan: a text description (stages, streams, shards, state, sink guarantees), a
 * Mermaid diagram and a standalone SVG picture of the job graph.
 */
import type { Plan, PlanStage } from './plan.js';
import { resourceNames } from './resources.js';
import { fileSinkPrefix, kinesisSinkStream } from './sink-names.js';

export function describePlan(plan: Plan, prefix?: string): string {
  const names = resourceNames(plan, prefix);
  const out: string[] = [];
  out.push(`job ${plan.job}  (plan ${plan.hash}, ${plan.mode}, poison records: ${plan.poisonPolicy}, ${plan.maxParallelism} key groups)`);
  out.push(
    `checkpoints every ${plan.checkpoint.intervalMs} ms, timeout ${plan.checkpoint.timeoutMs} ms, min pause ${plan.checkpoint.minPauseMs} ms, ${plan.checkpoint.retained} retained`,
  );
  for (const s of plan.stages) {
    out.push('');
    out.push(`stage ${s.id}: ${s.name}`);
    out.push(`  input  ${names.streamOf(s)} (${s.parallelism} shard${s.parallelism === 1 ? '' : 's'})${s.input.kind === 'exchange' ? ` ← ${s.input.fromStages.join(', ')}${s.input.keyed ? ' by key' : ''}` : ' ← producers'}`);
    out.push(`  lambda ${names.functionOf(s)}`);
    for (const op of s.operators) {
      const state = op.state.length ? `  state: ${op.state.map((d) => `${d.name} (${d.kind})`).join(', ')}` : '';
      const exit = op.exchange ? `  → ${op.exchange.toStage} (${op.exchange.partitioning})` : op.sink ? `  → ${op.sink.kind} "${op.sink.name}"` : '';
      out.push(`    ${op.id.padEnd(16)} ${op.kind.padEnd(8)} ${op.name}${state}${exit}`);
    }
  }
  if (plan.sinks.length) {
    out.push('');
    out.push('sinks');
    for (const k of plan.sinks) {
      const where =
        k.kind === 'dynamodb-upsert'
          ? `, table ${names.sinkTable(k)}`
          : k.kind === 's3-file'
            ? `, s3://${names.bucket}/${fileSinkPrefix(k)}/epoch=<e>/ (${k.format ?? 'jsonl'})`
            : k.kind === 'kinesis'
              ? `, stream ${kinesisSinkStream(names, k)}`
              : '';
      out.push(`  ${k.name} (${k.kind}${where}): ${k.guarantee}`);
      if (k.latency) out.push(`    latency: ${k.latency}`);
    }
    out.push('');
    out.push(
      `checkpoints in flight: at most 1; ${plan.checkpoint.retained} completed checkpoints retained (older deltas and published staging objects are deleted at commit)`,
    );
  }
  return out.join('\n');
}

const esc = (s: string) => s.replace(/"/g, '#quot;');

export function planToMermaid(plan: Plan, prefix?: string): string {
  const names = resourceNames(plan, prefix);
  const lines = ['flowchart LR'];
  for (const src of plan.sources) lines.push(`  ${src.id}[("${esc(`${src.name} — ${names.sourceStream(src)}, ${src.shards} shards`)}")]`);
  for (const s of plan.stages) {
    lines.push(`  subgraph ${s.id}["${esc(`${s.id} · λ ${names.functionOf(s)} · ×${s.parallelism}`)}"]`);
    for (const op of s.operators) {
      if (op.kind === 'source') continue;
      const state = op.state.length ? `<br/>state: ${op.state.map((d) => d.name).join(', ')}` : '';
      lines.push(`    ${op.id}["${esc(op.name)}${state}"]`);
    }
    lines.push('  end');
  }
  for (const s of plan.stages) {
    for (const op of s.operators) {
      if (op.kind === 'source') continue;
      for (const i of op.inputs) lines.push(`  ${i} --> ${op.id}`);
      if (op.exchange) {
        const target = plan.stages.find((t) => t.id === op.exchange!.toStage)!;
        for (const entry of target.operators.filter((o) => o.inputs.length === 0)) {
          lines.push(`  ${op.id} == "${esc(`${names.streamOf(target)} (${target.parallelism} shards, ${op.exchange.partitioning})`)}" ==> ${entry.id}`);
        }
      }
      if (op.sink) lines.push(`  ${op.id} --> ${op.sink.id}[("${esc(`${op.sink.name} (${op.sink.kind})`)}")]`);
    }
  }
  return lines.join('\n') + '\n';
}

/** A left-to-right picture: one column per stage, a box per operator, streams on the arrows. */
export function planToSvg(plan: Plan, prefix?: string): string {
  const names = resourceNames(plan, prefix);
  const colW = 260;
  const boxW = 200;
  const boxH = 44;
  const gap = 18;
  const top = 70;
  const x0 = 40;
  const columns: Array<{ stage: PlanStage; ops: PlanStage['operators'] }> = plan.stages.map((s) => ({ stage: s, ops: s.operators }));
  const height = top + Math.max(...columns.map((c) => c.ops.length)) * (boxH + gap) + 80;
  const width = x0 * 2 + columns.length * colW + 180;
  const pos = new Map<string, { x: number; y: number }>();
  const parts: string[] = [];
  const text = (x: number, y: number, s: string, cls = '') =>
    `<text x="${x}" y="${y}" class="${cls}">${s.replace(/&/g, '&amp;').replace(/</g, '&lt;')}</text>`;
  columns.forEach((c, ci) => {
    const x = x0 + ci * colW;
    parts.push(`<rect x="${x - 10}" y="30" width="${boxW + 20}" height="${height - 50}" rx="10" class="stage"/>`);
    parts.push(text(x, 50, `${c.stage.id} · λ ×${c.stage.parallelism}`, 'title'));
    c.ops.forEach((op, oi) => {
      const y = top + oi * (boxH + gap);
      pos.set(op.id, { x, y });
      parts.push(`<rect x="${x}" y="${y}" width="${boxW}" height="${boxH}" rx="6" class="op ${op.kind}"/>`);
      parts.push(text(x + 8, y + 18, `${op.kind}: ${op.name}`.slice(0, 30), 'label'));
      const sub = op.state.length ? `state: ${op.state.map((d) => d.name).join(', ')}` : op.exchange ? `${op.exchange.partitioning} → ${op.exchange.toStage}` : op.sink ? op.sink.kind : '';
      if (sub) parts.push(text(x + 8, y + 34, sub.slice(0, 32), 'sub'));
    });
  });
  for (const c of columns) {
    for (const op of c.ops) {
      const p = pos.get(op.id)!;
      for (const i of op.inputs) {
        const q = pos.get(i)!;
        parts.push(`<line x1="${q.x + boxW / 2}" y1="${q.y + boxH}" x2="${p.x + boxW / 2}" y2="${p.y}" class="edge"/>`);
      }
      if (op.exchange) {
        const target = plan.stages.find((t) => t.id === op.exchange!.toStage)!;
        for (const entry of target.operators.filter((o) => o.inputs.length === 0)) {
          const q = pos.get(entry.id)!;
          parts.push(`<path d="M${p.x + boxW} ${p.y + boxH / 2} C${p.x + boxW + 40} ${p.y + boxH / 2}, ${q.x - 40} ${q.y + boxH / 2}, ${q.x} ${q.y + boxH / 2}" class="stream"/>`);
          parts.push(text(p.x + boxW + 4, Math.min(p.y, q.y) + boxH / 2 - 6, `${names.streamOf(target)} (${target.parallelism})`.slice(0, 34), 'streamlabel'));
        }
      }
      if (op.sink) {
        parts.push(`<line x1="${p.x + boxW}" y1="${p.y + boxH / 2}" x2="${p.x + boxW + 40}" y2="${p.y + boxH / 2}" class="edge"/>`);
        parts.push(text(p.x + boxW + 44, p.y + boxH / 2 + 4, `${op.sink.name}`, 'sink'));
      }
    }
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif">
<style>
.stage{fill:#f4f6fb;stroke:#9aa7c7}.op{fill:#fff;stroke:#3d5a99}.op.process,.op.reduce{fill:#fff4e0;stroke:#c27c0e}.op.sink{fill:#e8f6ec;stroke:#2f8a4c}.op.exchange{fill:#eef;stroke:#55a}
.title{font-size:14px;font-weight:bold}.label{font-size:12px}.sub{font-size:10px;fill:#555}.edge{stroke:#333;stroke-width:1.2}
.stream{fill:none;stroke:#55a;stroke-width:2.5;stroke-dasharray:6 3}.streamlabel{font-size:10px;fill:#55a}.sink{font-size:12px;fill:#2f8a4c}
</style>
${text(x0, 20, `Sluice job ${plan.job} — plan ${plan.hash}`, 'title')}
${parts.join('\n')}
</svg>
`;
}
