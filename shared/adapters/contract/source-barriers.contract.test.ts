/**
 * Contract of barriers at the source's read position as the control table keeps them: the
 * coordinator's announcement (CheckpointStore.announceBarrier) and each source instance's fenced
 * placements (SourceBarrierStore), next to its lease. One set of tests run against the in-memory twin
 * and against the DynamoDB emulator (started here, on a free port, stopped by PID).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type LocalEmulators } from '../../../local/emulators.js';
import { createTable } from '../../../local/provision.js';
import { ANNOUNCED_KEPT, type CheckpointStore } from '../../coordinator/ports.js';
import type { AnnouncedBarrier, ControlStore, SourceBarrierStore } from '../../runtime/ports.js';
import { FencedError } from '../../util/errors.js';
import { createAwsClients } from '../aws/clients.js';
import { DynamoCheckpointStore } from '../aws/dynamo-checkpoint-store.js';
import { DynamoControlStore } from '../aws/dynamo-control-store.js';
import { DynamoSourceBarrierStore } from '../aws/source-barriers.js';
import { MemoryCheckpointStore } from '../memory/checkpoint-store.js';
import { MemoryControlStore } from '../memory/memory-ports.js';
import { MemorySourceBarrierStore } from '../memory/source-barriers.js';

interface Table {
  readonly store: CheckpointStore;
  readonly control: ControlStore;
  readonly sources: SourceBarrierStore;
}

interface Target {
  table(): Promise<Table>;
  stop(): Promise<void>;
}

const targets: Array<{ name: string; start(): Promise<Target> }> = [
  {
    name: 'in-memory twin',
    async start() {
      return {
        async table() {
          const control = new MemoryControlStore();
          return { store: new MemoryCheckpointStore(control), control, sources: new MemorySourceBarrierStore(control) };
        },
        stop: async () => {},
      };
    },
  },
  {
    name: 'DynamoDB emulator',
    async start() {
      const emulators: LocalEmulators = await startEmulators({ services: ['dynamodb'] });
      const clients = createAwsClients({ region: emulators.region, credentials: emulators.credentials, endpoints: { dynamodb: emulators.endpoints.dynamodb } });
      let n = 0;
      return {
        async table() {
          const name = `contract-control-${++n}`;
          await createTable(clients, name, 'pk', 'sk');
          return { store: new DynamoCheckpointStore(clients, name), control: new DynamoControlStore(clients, name, 'unused'), sources: new DynamoSourceBarrierStore(clients, name) };
        },
        stop: async () => {
          clients.dynamodb.destroy();
          await emulators.stop();
        },
      };
    },
  },
];

const announcement = (n: number, instances = ['s0:shardId-000000000000']): AnnouncedBarrier => ({
  barrier: { kind: 'barrier', checkpointId: n, topology: [1, 1], savepoint: false, time: 1000 * n },
  instances,
});
const ids = (a: readonly AnnouncedBarrier[]) => a.map((x) => x.barrier.checkpointId);

describe.each(targets)('source barriers contract: $name', (target) => {
  let t: Target;
  beforeAll(async () => {
    t = await target.start();
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('announces checkpoints oldest first, keeps the last few, and a repeated announcement replaces its own', async () => {
    const { store, sources } = await t.table();
    expect(await sources.announced()).toEqual([]);
    await store.announceBarrier(announcement(2));
    await store.announceBarrier(announcement(1));
    expect(await sources.announced()).toEqual([announcement(1), announcement(2)]);
    await store.announceBarrier(announcement(2, ['a', 'b']));
    expect((await sources.announced()).at(-1)).toEqual(announcement(2, ['a', 'b']));
    for (let n = 3; n <= ANNOUNCED_KEPT + 3; n++) await store.announceBarrier(announcement(n));
    expect(ids(await sources.announced())).toEqual(Array.from({ length: ANNOUNCED_KEPT }, (_, i) => i + 4));
  });

  it('concurrent announcements lose none', async () => {
    const { store, sources } = await t.table();
    await Promise.all([1, 2, 3, 4].map((n) => store.announceBarrier(announcement(n))));
    expect(ids(await sources.announced())).toEqual([1, 2, 3, 4]);
  });

  it('records placements only under the fence that holds the lease, next to the lease and without disturbing it', async () => {
    const { control, sources } = await t.table();
    const id = 's0:shardId-000000000001';
    const owned = await control.takeOver(id, 0);
    await control.commitPosition(id, owned.fence, '100', '1');
    expect(await sources.recorded(id)).toEqual({ placed: [], readThrough: undefined, fence: owned.fence });
    await sources.record(id, owned.fence, { placed: [], readThrough: '120' });
    const placed = [{ after: '110', barrier: announcement(3).barrier }];
    // a placement written without a read-through keeps the recorded one
    await sources.record(id, owned.fence, { placed, readThrough: undefined });
    expect(await sources.recorded(id)).toEqual({ placed, readThrough: '120', fence: owned.fence });
    const lease = await control.readLease(id);
    expect([lease.fence, lease.lastPosition, lease.firstPosition]).toEqual([owned.fence, '100', '1']);
    // a takeover keeps what earlier owners recorded and shuts the old owner out; the record is read
    // with the fence that holds the lease, so the old owner can tell it is no longer its own
    const next = await control.takeOver(id, owned.fence);
    expect(await sources.recorded(id)).toEqual({ placed, readThrough: '120', fence: next.fence });
    await expect(sources.record(id, owned.fence, { placed: [], readThrough: '999' })).rejects.toThrow(FencedError);
    await sources.record(id, next.fence, { placed: [], readThrough: '130' });
    expect(await sources.recorded(id)).toEqual({ placed: [], readThrough: '130', fence: next.fence });
  });

  it('reads no fence for an instance that was never taken over', async () => {
    const { sources } = await t.table();
    expect(await sources.recorded('s0:shardId-000000000009')).toEqual({ placed: [], readThrough: undefined, fence: 0 });
  });

  it('a checkpoint crossed once every instance it expects acked it (or it committed); an aborted or unknown one never', async () => {
    const { store, control, sources } = await t.table();
    const members = ['s0:a', 's1:b'];
    const open = (n: number) => store.createCheckpoint({ checkpointId: n, members, topology: [1, 1], startedAt: new Date(1000 * n).toISOString(), savepoint: false });
    await open(1);
    expect(await sources.crossed(1)).toBe(false);
    await control.ack(1, 's0:a');
    await control.ack(1, 'x:unexpected');
    expect(await sources.crossed(1)).toBe(false);
    await control.ack(1, 's1:b');
    expect(await sources.crossed(1)).toBe(true);
    await store.finishCheckpoint(1, { status: 'COMPLETED', endedAt: new Date(5000).toISOString(), durationMs: 4000 });
    expect(await sources.crossed(1)).toBe(true);
    await open(2);
    await control.ack(2, 's0:a');
    await control.ack(2, 's1:b');
    await store.finishCheckpoint(2, { status: 'ABORTED', endedAt: new Date(9000).toISOString(), durationMs: 7000, reason: 'test' });
    expect(await sources.crossed(2)).toBe(false);
    expect(await sources.crossed(3)).toBe(false);
  });
});
