/**
 * dynalite 4.0.0 reads tables (every Query and Scan) through a stream over an abstract-level
 * iterator, and its stream's destroy ends the iterator with `iterator.return()`, a method
 * abstract-level 3 iterators do not have (they have `close()`). So no iterator dynalite opens is
 * ever closed: each stays in its database's open resources, holding the in-memory tree as it was
 * when the read began (memory-level's snapshot), and the in-process DynamoDB grows with every read
 * a long run makes. Giving abstract-level's iterators the `return()` dynalite calls closes them.
 *
 * The modules are found from dynalite's own location, so the patch reaches the copies it loads.
 */
import { createRequire } from 'node:module';

interface IteratorPrototype {
  return?: (this: { close(): Promise<void> }) => Promise<void>;
  close(): Promise<void>;
}

let installed = false;

/** Makes every abstract-level iterator dynalite uses closable through `return()` (idempotent). */
export function closeDynaliteIterators(): void {
  if (installed) return;
  const fromHere = createRequire(import.meta.url);
  const fromDynalite = createRequire(fromHere.resolve('dynalite'));
  const fromMemoryLevel = createRequire(fromDynalite.resolve('memory-level'));
  const abstract = fromMemoryLevel('abstract-level') as { AbstractIterator: { prototype: object } };
  // the common base of abstract-level's entry, key and value iterators
  const common = Object.getPrototypeOf(abstract.AbstractIterator.prototype) as IteratorPrototype;
  if (typeof common.close !== 'function') throw new Error('closeDynaliteIterators: abstract-level iterators have no close()');
  if (common.return === undefined) {
    Object.defineProperty(common, 'return', {
      configurable: true,
      writable: true,
      value: function (this: { close(): Promise<void> }) {
        return this.close();
      },
    });
  }
  installed = true;
}
