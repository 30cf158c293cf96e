import Dispatch
import Foundation
import Synchronization

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// What follows a server's event stream for ``ServerSync``: connects, says when it connects,
/// when an event arrives and when it fails, and reconnects with back-off until stopped.
protocol EventStreamFollower: AnyObject, Sendable {
  func start()
  func stop()
}

extension ItemsStreamClient: EventStreamFollower {}

// SAFETY: its mutable state is in a mutex; URLSession calls the delegate on its own serial queue.
/// Follows a Server-Sent Events stream and says when it connects and when an event arrives;
/// reconnects with back-off (0.25 s doubling to 5 s) when the connection ends or fails. Only
/// the fact that something changed is used: the caller reads what changed from history.
final class ItemsStreamClient: NSObject, URLSessionDataDelegate, @unchecked Sendable {
  enum Event {
    case connected
    case changed
    case failed(any Error)
  }

  private let url: URL
  private let handler: @Sendable (Event) -> Void
  private let queue = DispatchQueue(label: "trips.sync.stream")
  private struct State {
    var session: URLSession?
    var stopped = false
    var delay = 0.25
    var blocks = EventBlocks()
    var connected = false
  }
  private let state = Mutex(State())

  init(url: URL, handler: @escaping @Sendable (Event) -> Void) {
    self.url = url
    self.handler = handler
  }

  func start() { connect() }

  func stop() {
    let session = state.withLock { state -> URLSession? in
      state.stopped = true
      defer { state.session = nil }
      return state.session
    }
    session?.invalidateAndCancel()
  }

  private func connect() {
    let configuration = URLSessionConfiguration.default
    // The server sends a comment every 15 s: a longer silence is a dead connection.
    configuration.timeoutIntervalForRequest = 40
    let operations = OperationQueue()
    operations.maxConcurrentOperationCount = 1
    let session = URLSession(
      configuration: configuration, delegate: self, delegateQueue: operations)
    let proceed = state.withLock { state -> Bool in
      guard !state.stopped else { return false }
      state.session = session
      state.blocks = EventBlocks()
      state.connected = false
      return true
    }
    guard proceed else {
      session.invalidateAndCancel()
      return
    }
    var request = URLRequest(url: url)
    request.setValue("text/event-stream", forHTTPHeaderField: "Accept")
    session.dataTask(with: request).resume()
  }

  func urlSession(
    _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
  ) {
    let status = (response as? HTTPURLResponse)?.statusCode ?? 0
    guard status == 200 else {
      handler(
        .failed(
          ServerSyncError(status: status, message: "\(url.absoluteString) answered \(status).")))
      completionHandler(.cancel)
      return
    }
    state.withLock {
      $0.connected = true
      $0.delay = 0.25
    }
    completionHandler(.allow)
    handler(.connected)
  }

  func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
    // An event ends with a blank line; one `changed` per chunk that completes any event.
    let events = state.withLock { $0.blocks.feed([UInt8](data)) }
    if events > 0 { handler(.changed) }
  }

  func urlSession(
    _ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?
  ) {
    let delay = state.withLock { state -> Double? in
      guard !state.stopped, state.session === session else { return nil }
      let delay = state.delay
      state.delay = min(state.delay * 2, 5)
      return delay
    }
    session.finishTasksAndInvalidate()
    guard let delay else { return }
    handler(
      .failed(
        ServerSyncError(
          status: nil,
          message:
            "The stream \(url.absoluteString) ended (\(error?.localizedDescription ?? "closed by the server")); reconnecting."
        )))
    queue.asyncAfter(deadline: .now() + delay) { [weak self] in self?.connect() }
  }
}
