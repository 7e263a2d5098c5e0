/**
 * Sink operators compiled for the chain: an upsert sink writes (version-conditioned) through the
 * outbox at once; transactional sinks stage their outputs per epoch, published when the checkpoint
 * after them commits.
 */
import type { SinkNode } from '../api/graph.js';
import type { ResourceNames } from '../plan/resources.js';
import type { Push } from './operator-context.js';
import type { Outbox } from './outbox.js';
import { UsageError } from '../util/errors.js';
import { upsertProblem } from './upsert-values.js';
import { MAX_KINESIS_VALUE_BYTES, stagedValueProblem } from './staged-values.js';

export function compileSink(node: SinkNode, names: ResourceNames, outbox: Outbox): Push {
  const spec = node.spec;
  switch (spec.kind) {
    case 'dynamodb-upsert': {
      const table = names.sinkTable(spec);
      const keyOf = node.sink.key!;
      const itemOf = node.sink.item;
      const keyAttribute = spec.keyAttribute ?? 'pk';
      return (v) => {
        const item = itemOf ? itemOf(v) : (v as Record<string, unknown>);
        if (!item || typeof item !== 'object') throw new UsageError(`sink "${spec.name}"`, 'value', `must be an object, got ${typeof item}`);
        const key = keyOf(v);
        // refused here, the record is a dead letter; buffered, it would fail every flush of its batch
        const problem = upsertProblem(keyAttribute, key, item);
        if (problem) throw new UsageError(`sink "${spec.name}"`, problem.path, problem.reason);
        outbox.upsert(spec.name, table, keyAttribute, key, item);
      };
    }
    case 's3-file':
    case 'kinesis': {
      const maxBytes = spec.kind === 'kinesis' ? MAX_KINESIS_VALUE_BYTES : undefined;
      return (v) => {
        // refused here, the record is a dead letter; staged, it would fail every try of the checkpoint or the publish
        const problem = stagedValueProblem(v, maxBytes);
        if (problem) throw new UsageError(`sink "${spec.name}"`, 'value', problem);
        outbox.collect(spec.name, v);
      };
    }
    case 'collect':
      return (v) => outbox.collect(spec.name, v);
  }
}
