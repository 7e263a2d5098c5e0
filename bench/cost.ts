/**
 * AWS requests per 1 M events, service by service, and what they cost at list prices
 * (prices.ts), from a metered in-process run of a whole job (pipeline.ts).
 */
import { ASSUMPTIONS, FLINK_FLOOR_PER_MONTH, PRICES, SECONDS_PER_MONTH } from './prices.js';
import type { PipelineResult } from './pipeline.js';

export interface AslState {
  readonly Type: string;
  readonly Next?: string;
  readonly Default?: string;
  readonly Choices?: ReadonlyArray<{ readonly Next: string }>;
}

/**
 * State transitions of one checkpoint on the happy path of the coordinator workflow: from Allocate
 * back to Allocate, following Next, and at a Choice the branch that loops (Default).
 */
export function transitionsPerCheckpoint(states: Record<string, AslState>, start = 'Allocate'): { count: number; path: string[] } {
  const path: string[] = [];
  let at: string | undefined = start;
  while (at && path.length < 50) {
    path.push(at);
    const s: AslState | undefined = states[at];
    if (!s) break;
    const next: string | undefined = s.Type === 'Choice' ? s.Default : s.Next;
    if (next === start) return { count: path.length, path };
    at = next;
  }
  throw new Error(`no loop back to ${start} from the workflow's states: ${path.join(' → ')}`);
}

export interface CostLine {
  readonly service: string;
  readonly item: string;
  /** per 1 M events */
  readonly quantity: number;
  readonly unit: string;
  readonly usdPerMillion: number;
}

export interface CostScenario {
  readonly eventsPerSecond: number;
  readonly checkpointIntervalS: number;
  readonly shards: Record<string, number>;
  readonly lines: CostLine[];
  readonly usdPerMillion: number;
  readonly usdPerMonth: number;
  readonly flinkFloorPerMonth: number;
  readonly lambda: { invocationsPerMillion: number; msPerInvocation: number; cpuMsPerInvocation: number; ioMsPerInvocation: number };
}

export function costOf(r: PipelineResult, transitions: number): CostScenario {
  const m = r.meter;
  const perM = 1e6 / r.events;
  const lines: CostLine[] = [];
  const line = (service: string, item: string, quantity: number, unit: string, price: number) =>
    lines.push({ service, item, quantity: quantity * perM, unit, usdPerMillion: quantity * perM * price });

  // Kinesis
  const shardCount = r.stages.reduce((a, s) => a + s.shards, 0);
  line('Kinesis', `shard-hours (${r.stages.map((s) => `${s.stage}: ${s.shards}`).join(', ')})`, (shardCount * r.seconds) / 3600, 'shard-h', PRICES.kinesis.shardHour);
  line('Kinesis', 'PUT payload units: producers → source stream', m.get('kinesis.put.source').units, 'units', PRICES.kinesis.putPayloadUnit);
  line('Kinesis', 'PUT payload units: stage → stage (packed)', m.get('kinesis.put.data').units, 'units', PRICES.kinesis.putPayloadUnit);
  line('Kinesis', 'PUT payload units: barriers', m.get('kinesis.put.control').units, 'units', PRICES.kinesis.putPayloadUnit);

  // Lambda
  const invocations = r.stages.reduce((a, s) => a + s.invocations, 0);
  const cpuMs = r.stages.reduce((a, s) => a + s.cpuMs, 0) * (ASSUMPTIONS.fullVcpuMb / ASSUMPTIONS.stageMemoryMb);
  const d = (k: string) => m.sum(k).requests;
  // requests an invocation waits on, one after another (applyRows runs 32 at a time)
  const ioMs =
    ASSUMPTIONS.dynamoMs * (d('dynamodb.read') + d('dynamodb.write.position') + d('dynamodb.write.pointer') + d('dynamodb.write.ack') + d('dynamodb.write.delta') + d('dynamodb.write.takeover')) +
    ASSUMPTIONS.dynamoMs * Math.ceil(d('dynamodb.write.state') / ASSUMPTIONS.stateWriteConcurrency) +
    ASSUMPTIONS.kinesisPutMs * d('kinesis.put.data') +
    ASSUMPTIONS.s3Ms * (d('s3.put') + d('s3.get'));
  const gbS = ((cpuMs + ioMs) / 1000) * (ASSUMPTIONS.stageMemoryMb / 1024);
  const coordInvocations = m.get('lambda.coordinator').requests;
  const coordGbS = coordInvocations * (ASSUMPTIONS.coordinatorTaskMs / 1000) * (ASSUMPTIONS.coordinatorMemoryMb / 1024);
  line('Lambda', 'stage invocations (ESM batches)', invocations, 'requests', PRICES.lambda.request);
  line('Lambda', `stage GB-s (${ASSUMPTIONS.stageMemoryMb} MB, measured CPU + modelled I/O wait)`, gbS, 'GB-s', PRICES.lambda.gbSecondArm);
  line('Lambda', 'coordinator invocations (4 tasks per checkpoint)', coordInvocations, 'requests', PRICES.lambda.request);
  line('Lambda', `coordinator GB-s (${ASSUMPTIONS.coordinatorMemoryMb} MB)`, coordGbS, 'GB-s', PRICES.lambda.gbSecondArm);

  // DynamoDB
  const w = (k: string) => m.get(`dynamodb.write.${k}`).units;
  line('DynamoDB', 'writes: state items (each packed item holding a dirty key, per checkpoint)', w('state'), 'WRU', PRICES.dynamodb.writeRequestUnit);
  line('DynamoDB', 'writes: checkpoint deltas (inline ≤ 8 KB)', w('delta'), 'WRU', PRICES.dynamodb.writeRequestUnit);
  line('DynamoDB', 'writes: lease position (one per batch)', w('position'), 'WRU', PRICES.dynamodb.writeRequestUnit);
  line('DynamoDB', 'writes: snapshot pointers, acks, takeovers', w('pointer') + w('ack') + w('takeover'), 'WRU', PRICES.dynamodb.writeRequestUnit);
  line('DynamoDB', 'writes: coordinator', w('coordinator'), 'WRU', PRICES.dynamodb.writeRequestUnit);
  line('DynamoDB', 'writes: upsert sink', w('sink'), 'WRU', PRICES.dynamodb.writeRequestUnit);
  line('DynamoDB', 'reads: leases (one per batch)', m.get('dynamodb.read.lease').units, 'RRU', PRICES.dynamodb.readRequestUnit);
  line('DynamoDB', 'reads: state rows (cache misses)', m.get('dynamodb.read.state').units, 'RRU', PRICES.dynamodb.readRequestUnit);
  line('DynamoDB', 'reads: coordinator, deltas', m.get('dynamodb.read.coordinator').units + m.get('dynamodb.read.delta').units, 'RRU', PRICES.dynamodb.readRequestUnit);

  // Step Functions, S3
  line('Step Functions', `state transitions (${transitions} per checkpoint)`, r.checkpoints * transitions, 'transitions', PRICES.stepFunctions.stateTransition);
  line('S3', 'PUT (deltas above 8 KB, dead letters)', m.sum('s3.put').requests, 'requests', PRICES.s3.put);
  line('S3', 'GET (deltas in S3, on restore)', m.sum('s3.get').requests, 'requests', PRICES.s3.get);

  const usdPerMillion = lines.reduce((a, l) => a + l.usdPerMillion, 0);
  const eps = r.events / r.seconds;
  return {
    eventsPerSecond: eps,
    checkpointIntervalS: r.seconds / Math.max(1, r.checkpoints),
    shards: Object.fromEntries(r.stages.map((s) => [s.stage, s.shards])),
    lines,
    usdPerMillion,
    usdPerMonth: (usdPerMillion * eps * SECONDS_PER_MONTH) / 1e6,
    flinkFloorPerMonth: FLINK_FLOOR_PER_MONTH,
    lambda: {
      invocationsPerMillion: invocations * perM,
      msPerInvocation: (cpuMs + ioMs) / invocations,
      cpuMsPerInvocation: cpuMs / invocations,
      ioMsPerInvocation: ioMs / invocations,
    },
  };
}
