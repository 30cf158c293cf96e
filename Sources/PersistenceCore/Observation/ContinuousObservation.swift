import Dispatch
import Observation
import Synchronization

/// When ``withContinuousObservation(options:_:)`` runs its closure again.
public struct ContinuousObservationOptions: OptionSet, Sendable {
  /// The raw bits.
  public let rawValue: Int
  /// Creates options.
  public init(rawValue: Int) { self.rawValue = rawValue }
  /// Run again after the change is made, seeing the new values (the default).
  public static let didSet = ContinuousObservationOptions(rawValue: 1)
  /// Run again as soon as a change is announced, before it is made (the closure sees the old
  /// values; use it to react early, not to read).
  public static let willSet = ContinuousObservationOptions(rawValue: 2)
}

/// The lifetime of a continuous observation: it runs while the token lives (or until
/// ``cancel()``). Keep it in a property of the object that reacts.
public final class ObservationTrackingToken: Sendable {
  private let body: @Sendable () -> Void
  private let options: ContinuousObservationOptions
  private let queue: DispatchQueue
  private let isCancelled = Atomic<Bool>(false)

  init(options: ContinuousObservationOptions, body: @escaping @Sendable () -> Void) {
    self.body = body
    self.options = options
    self.queue = DispatchQueue(label: "persistence.observation")
  }

  /// Stops the observation; the closure is not run again.
  public func cancel() { isCancelled.store(true, ordering: .sequentiallyConsistent) }

  /// Whether ``cancel()`` was called (or the token was released).
  public var cancelled: Bool { isCancelled.load(ordering: .sequentiallyConsistent) }

  deinit { cancel() }

  /// Runs the body under observation tracking; schedules the next run on change.
  ///
  /// Observation installs its tracking only after the body returns, so a change made between
  /// the body's read and that moment would go unseen. The body therefore runs once more right
  /// after the tracking is in place: a change in that window is then read, and any later one
  /// triggers the next run.
  func track() {
    guard !cancelled else { return }
    withObservationTracking {
      body()
    } onChange: { [weak self] in
      guard let self, !self.cancelled else { return }
      if self.options.contains(.willSet) && !self.options.contains(.didSet) {
        // Announced before the change: run now (old values), then track again after it.
        self.body()
      }
      // The mutation completes on the changing thread; running on our queue afterwards sees it.
      self.queue.async { [weak self] in self?.track() }
    }
    guard !cancelled else { return }
    body()
  }

  func start() {
    queue.async { [weak self] in self?.track() }
  }
}

/// Runs `body` now and again after every change to the observable properties it read, until
/// the returned token is released or cancelled: the toolchain's Observation made continuous,
/// like SwiftData's `withContinuousObservation`.
///
/// ```swift
/// token = withContinuousObservation(options: .didSet) { [weak self] in
///   _ = historyObserver.eventCounter   // read what to follow
///   self?.processChanges()
/// }
/// ```
///
/// The closure runs on a serial queue of the token's, first asynchronously right after this
/// call, then after each change; changes made while it runs are coalesced into one more run.
/// It may also run when nothing changed (see the tracking note in the source), so make it
/// idempotent: read the current state and act on what is new, as the seed's pattern does.
///
/// - Returns: The token whose lifetime is the subscription.
public func withContinuousObservation(
  options: ContinuousObservationOptions = .didSet, _ body: @escaping @Sendable () -> Void
) -> ObservationTrackingToken {
  let token = ObservationTrackingToken(options: options, body: body)
  token.start()
  return token
}
