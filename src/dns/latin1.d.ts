// Node's Buffer has had latin1Slice since v0.x; it skips toString's argument handling,
// which matters on the per-query name path. Declared here because @types/node omits it.
declare global {
  interface Buffer {
    latin1Slice(start: number, end: number): string;
  }
}
export {};
