/**
 * State descriptors: a name, a kind and a serializer. User code declares descriptors; the runtime's
 * state backend interprets them and hands out handles. The user API never sees a backend.
 */
import type { PlanStateDecl } from '../plan/plan.js';
import type { Serializer } from './types.js';
import { jsonSerializer } from './serializers.js';

export interface StateDescriptor<T> {
  readonly name: string;
  readonly kind: PlanStateDecl['kind'];
  readonly serializer: Serializer<T>;
}

export interface ValueStateDescriptor<T> extends StateDescriptor<T> {
  readonly kind: 'value';
  /** returned by `value()` when the key has no value yet */
  readonly defaultValue?: T;
}

export function valueState<T>(
  name: string,
  options: { serializer?: Serializer<T>; defaultValue?: T } = {},
): ValueStateDescriptor<T> {
  return {
    name,
    kind: 'value',
    serializer: options.serializer ?? jsonSerializer<T>(),
    ...(options.defaultValue !== undefined ? { defaultValue: options.defaultValue } : {}),
  };
}
