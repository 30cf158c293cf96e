// SAFETY: the compiler cannot check what a wrapper carries, so each use keeps one of two rules:
// the value is immutable and safe to share (a key path), or it is handed to exactly one other
// owner and used by one thread at a time after that (a connection given back to the idle list,
// a context moved to the thread or queue that alone uses it, an observer's loader and key index
// touched only on its serial queue). A new use states which rule it keeps.
/// Carries a value that is not declared `Sendable` across a concurrency boundary, where the code
/// around it guarantees it is never used by two threads at once (see the rules above).
@usableFromInline
struct UncheckedSendable<Value>: @unchecked Sendable {
  @usableFromInline let value: Value
  @usableFromInline init(_ value: Value) { self.value = value }
}
