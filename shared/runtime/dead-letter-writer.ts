/**
 * An instance's dead letters: a record that cannot be decoded or whose function threw goes to the
 * dead-letter store with its position and reason (or fails the batch, under `poisonPolicy: 'fail'`),
 * counted by the DeadLetters metric (alarmed).
 */
import type { Plan, PlanStage } from '../plan/plan.js';
import { errorMessage, PoisonRecordError } from '../util/errors.js';
import type { RuntimePorts } from './ports.js';
import type { Timer } from './timers.js';

export class DeadLetterWriter {
  /** failed timers dead-lettered at the current record (their letters' sub-sequences) */
  private timerLetters: { at: string; n: number } = { at: '', n: 0 };

  constructor(
    private readonly instanceId: string,
    private readonly plan: Plan,
    private readonly stage: PlanStage,
    private readonly shardId: string,
    private readonly ports: Pick<RuntimePorts, 'deadLetters' | 'telemetry'>,
    /** the instance's counters */
    private readonly stats: { deadLetters: number },
  ) {}

  async record(sequenceNumber: string, subSequence: number, data: Uint8Array, reason: string): Promise<void> {
    if (this.plan.poisonPolicy === 'fail') {
      throw new PoisonRecordError(`${this.instanceId} record ${sequenceNumber}#${subSequence}: ${reason}`);
    }
    this.stats.deadLetters++;
    this.ports.telemetry.count('DeadLetters');
    this.ports.telemetry.log('warn', 'record sent to the dead letters', { instance: this.instanceId, sequenceNumber, subSequence, reason });
    await this.ports.deadLetters.put({
      job: this.plan.job,
      stage: this.stage.id,
      shardId: this.shardId,
      sequenceNumber,
      subSequence,
      reason,
      data,
    });
  }

  /**
   * A timer whose callback threw (dead-letter policy) goes to the dead letters like a record: its
   * operator, key, key group, domain and time, filed under the position of the record that made it
   * due (`at`: a replay fires it at the same record, so it rewrites the same letter) with a negative
   * sub-sequence (records use theirs from 0 on).
   */
  async timer(t: Timer, err: unknown, at: string): Promise<void> {
    this.timerLetters = this.timerLetters.at === at ? { at, n: this.timerLetters.n + 1 } : { at, n: 1 };
    const data = new TextEncoder().encode(JSON.stringify({ timer: { domain: t.domain, operatorId: t.operatorId, key: t.key, keyGroup: t.keyGroup, time: t.time } }));
    await this.record(at, -this.timerLetters.n, data, `timer callback failed (operator ${t.operatorId}, key ${JSON.stringify(t.key)}, ${t.domain} timer at ${t.time}): ${errorMessage(err)}`);
  }
}
