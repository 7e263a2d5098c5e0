/** Bounded input (objects under an S3 prefix) for the same jobs that read streams. See docs/bounded.md. */
export { BoundedReader, endInput, HOLD_UNTIL_END, recordsOfObject } from './bounded-reader.js';
export type { BoundedFormat, BoundedReadOptions, BoundedReadStats, ObjectStore, SourceWriter } from './bounded-reader.js';
