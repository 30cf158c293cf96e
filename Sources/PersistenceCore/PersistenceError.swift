/// The one error type the persistence layer throws.
///
/// Like swift-nio's `FileSystemError`, it carries a stable ``code`` to switch over, a
/// ``message`` for people that says what went wrong and what to do, and the underlying
/// ``cause`` (for example the engine's result code and message) when there is one.
public struct PersistenceError: Error, Sendable, CustomStringConvertible {
  /// What kind of failure this is. New codes may be added; switch with a `default`.
  public struct Code: Hashable, Sendable, CustomStringConvertible {
    private let name: String
    private init(_ name: String) { self.name = name }

    /// The file exists but is not a store of this library (not SQLite, or foreign tables).
    public static let notAStore = Code("notAStore")
    /// The file was written by a newer version of the library or of the model schema.
    public static let newerStore = Code("newerStore")
    /// The store's tables do not match the models in a way that cannot be migrated in place.
    public static let schemaMismatch = Code("schemaMismatch")
    /// The store could not be opened or created.
    public static let cannotOpen = Code("cannotOpen")
    /// The store's engine reported an error while running a statement (its own error is the
    /// ``PersistenceError/cause``).
    public static let engine = Code("engine")
    /// The former name of ``engine``.
    @available(*, deprecated, renamed: "engine")
    public static var sqlite: Code { engine }
    /// A predicate or sort descriptor uses something that cannot be translated to SQL.
    public static let unsupportedPredicate = Code("unsupportedPredicate")
    /// A value cannot be stored (for example NaN) or a stored value cannot be read back.
    public static let invalidValue = Code("invalidValue")
    /// A `.unique` attribute would be violated in a way an upsert cannot resolve.
    public static let uniqueConstraint = Code("uniqueConstraint")
    /// A relationship would be broken: a ``DeleteRule/deny`` rule refused a delete, a row
    /// would point to a row that does not exist (deleted in the same save, or by another
    /// writer), or a related model belongs to another context.
    public static let relationshipConstraint = Code("relationshipConstraint")
    /// The store is busy (locked by another writer) for longer than the busy timeout.
    public static let busy = Code("busy")
    /// A history token is older than the history the store keeps.
    public static let historyTokenExpired = Code("historyTokenExpired")
    /// A history token belongs to another store.
    public static let historyTokenForeign = Code("historyTokenForeign")
    /// A history token is newer than any this store issued (a store restored from a backup).
    public static let historyTokenUnknown = Code("historyTokenUnknown")
    /// The model type was not registered with the container.
    public static let unknownModel = Code("unknownModel")
    /// A model inserted in a context belongs to another context, or to a row of the store it
    /// was loaded from: inserting it again would write its row twice.
    public static let modelInAnotherContext = Code("modelInAnotherContext")
    /// A changed model's row was deleted from the store (by another context, process or
    /// server) after the model was loaded: its changes cannot be saved; nothing was written.
    public static let rowDeleted = Code("rowDeleted")
    /// The disk, or the store's size limit, is full; nothing was written.
    public static let storeFull = Code("storeFull")
    /// The store is read-only.
    public static let readOnly = Code("readOnly")
    /// A value the query computes is out of the engine's range (PostgreSQL's double precision
    /// overflowing, where SQLite gives infinity).
    public static let outOfRange = Code("outOfRange")
    /// The work passed its ``WorkDeadline``'s limit and was stopped; nothing was written.
    public static let timedOut = Code("timedOut")
    /// The work was stopped because no one waits for its answer (``WorkDeadline``).
    public static let abandoned = Code("abandoned")
    /// A stage of a ``SchemaMigrationPlan`` failed, or the plan cannot take the store to the
    /// program's version; the store was left as it was (``PersistenceError/cause`` says why).
    public static let migrationFailed = Code("migrationFailed")

    /// The code's name, such as `notAStore`.
    public var description: String { name }

    /// Every code this version of the layer throws.
    public static let known: [Code] = [
      .notAStore, .newerStore, .schemaMismatch, .cannotOpen, .engine, .unsupportedPredicate,
      .invalidValue, .uniqueConstraint, .relationshipConstraint, .busy, .historyTokenExpired,
      .historyTokenForeign, .historyTokenUnknown, .unknownModel, .modelInAnotherContext,
      .storeFull, .readOnly, .outOfRange, .timedOut, .abandoned, .migrationFailed, .rowDeleted,
    ]

    /// What kind of failure the code is: whose fault, and whether trying again may help. The
    /// one classification of the layer's codes, which an exit status or an HTTP status is
    /// chosen by.
    public var kind: FailureKind {
      switch self {
      case .notAStore, .newerStore, .schemaMismatch, .invalidValue, .outOfRange,
        .historyTokenExpired, .historyTokenForeign, .historyTokenUnknown, .migrationFailed:
        .data
      case .uniqueConstraint, .relationshipConstraint, .rowDeleted: .conflict
      case .unsupportedPredicate, .unknownModel, .modelInAnotherContext, .readOnly: .misuse
      default: .transient
      }
    }
  }

  /// The kind of failure.
  public var code: Code
  /// What went wrong and, where possible, what to do about it.
  public var message: String
  /// The underlying error, if any (such as the engine's result code and message).
  public var cause: (any Error & Sendable)?

  /// Creates an error.
  public init(code: Code, message: String, cause: (any Error & Sendable)? = nil) {
    self.code = code
    self.message = message
    self.cause = cause
  }

  /// The stored attribute (column) whose value could not be read, when known.
  public var attribute: String?

  /// The row the error is about (`trips id 1b4e…, row 17`), when it concerns one stored row.
  public var row: String?

  /// The same error, naming the stored row it concerns, and the column when it is known
  /// (``attribute``): `… (trips id 1b4e…, row 17, column latitude)`.
  public func naming(row: String) -> PersistenceError {
    guard self.row == nil else { return self }
    var error = self
    error.row = row
    error.message += " (\(row)\(attribute.map { ", column \($0)" } ?? ""))"
    return error
  }

  /// The message, followed by the cause when there is one.
  public var description: String {
    if let cause { return "\(message) (\(cause))" }
    return message
  }
}

/// What kind of failure an error is, for whoever reports it (an exit status, an HTTP status, a
/// retry): whose fault it is, and whether trying again may help.
public enum FailureKind: String, Sendable, CaseIterable {
  /// The data at hand is at fault: an input, a value, a stored row, a store file, a history
  /// token. Trying again with the same data fails the same way.
  case data
  /// Trying again later may succeed: the store was busy, full or unreachable, its engine
  /// failed, or the work ran out of time.
  case transient
  /// The calling code is at fault: a predicate the layer cannot run, a model not registered,
  /// a write to a read-only store.
  case misuse
  /// What was asked for does not exist.
  case notFound
  /// The change conflicts with what the store holds: a unique value taken, a relationship's
  /// rule.
  case conflict
}
