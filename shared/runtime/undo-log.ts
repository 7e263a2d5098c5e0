/**
 * What a record changes, saved before its first change, so that a record that throws can be undone
 * whole (the stores of operator and broadcast state use one each).
 */
export class UndoLog<T, S> {
  private recording = false;
  private readonly saved = new Map<T, S>();

  constructor(
    private readonly save: (target: T) => S,
    private readonly restore: (target: T, saved: S) => void,
  ) {}

  begin(): void {
    this.recording = true;
  }

  commit(): void {
    this.recording = false;
    if (this.saved.size) this.saved.clear();
  }

  /** The record failed: every target it changed gets its saved contents back. */
  rollback(): void {
    this.recording = false;
    for (const [target, saved] of this.saved) this.restore(target, saved);
    this.saved.clear();
  }

  /** Called before each change: saves the target the first time a record changes it. */
  touch<U extends T>(target: U): U {
    if (this.recording && !this.saved.has(target)) this.saved.set(target, this.save(target));
    return target;
  }
}
