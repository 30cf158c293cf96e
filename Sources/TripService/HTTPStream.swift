import CMicroHTTPD
import Foundation
import Synchronization

/// A response that stays open and sends bytes as they come: Server-Sent Events.
///
/// Bytes wait in a bounded queue (``limit``); a client that reads so slowly that the queue
/// would pass it is dropped (its connection closed), so a slow reader never grows the
/// server's memory without limit. While the queue is empty the connection is suspended in
/// libmicrohttpd (no thread waits, nothing polls) and resumed by the next ``send(_:)``.
///
/// Cost: O(bytes) per send; O(1) memory per idle client beyond its connection.
public final class HTTPStream: Sendable {
  /// The most bytes waiting for one client before it is dropped.
  public let limit: Int

  struct State {
    var pending: [UInt8] = []
    var sentOffset = 0
    var closed = false
    var suspended = false
    var connection: HTTPServer.ConnectionHandle?
  }
  private let state = Mutex(State())
  /// Called once when the client is gone (closed, dropped, or disconnected).
  let onFinish = Mutex<(@Sendable () -> Void)?>(nil)

  /// A stream whose queue holds at most `limit` bytes.
  public init(limit: Int = 256 * 1024) { self.limit = limit }

  /// Queues `text` for the client; false when the client is gone or was dropped for reading
  /// too slowly (the stream is then closed).
  @discardableResult
  public func send(_ text: String) -> Bool {
    let bytes = Array(text.utf8)
    return state.withLock { state -> Bool in
      guard !state.closed else { return false }
      if state.pending.count - state.sentOffset + bytes.count > limit {
        state.closed = true
        state.pending = []
        state.sentOffset = 0
        Self.resume(&state)
        return false
      }
      state.pending += bytes
      Self.resume(&state)
      return true
    }
  }

  /// Ends the stream: what is queued is sent, then the connection closes.
  public func close() {
    state.withLock { state in
      state.closed = true
      Self.resume(&state)
    }
  }

  /// Whether the stream is still open.
  public var isOpen: Bool { state.withLock { !$0.closed } }

  /// Resumes a suspended connection (under the lock, so that it can never come before the
  /// suspension it undoes).
  private static func resume(_ state: inout State) {
    if state.suspended, let connection = state.connection {
      state.suspended = false
      MHD_resume_connection(connection.pointer)
    }
  }

  func attach(_ connection: HTTPServer.ConnectionHandle) {
    state.withLock { $0.connection = connection }
  }

  /// libmicrohttpd asks for bytes: some, or none for now (the connection is suspended until
  /// the next send), or the end.
  func read(into buffer: UnsafeMutablePointer<CChar>, max: Int) -> Int {
    state.withLock { state -> Int in
      let available = state.pending.count - state.sentOffset
      if available > 0 {
        let count = min(available, max)
        state.pending.withUnsafeBufferPointer { bytes in
          UnsafeMutableRawPointer(buffer).copyMemory(
            from: bytes.baseAddress! + state.sentOffset, byteCount: count)
        }
        state.sentOffset += count
        if state.sentOffset == state.pending.count {
          state.pending.removeAll(keepingCapacity: true)
          state.sentOffset = 0
        }
        return count
      }
      if state.closed { return -1 }  // MHD_CONTENT_READER_END_OF_STREAM
      guard let connection = state.connection else { return -1 }
      state.suspended = true
      MHD_suspend_connection(connection.pointer)
      return 0
    }
  }

  /// libmicrohttpd is done with the response: the client is gone.
  func finished() {
    state.withLock {
      $0.closed = true
      $0.connection = nil
      $0.suspended = false
    }
    let action = onFinish.withLock { action -> (@Sendable () -> Void)? in
      defer { action = nil }
      return action
    }
    action?()
  }
}
