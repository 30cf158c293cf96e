import Foundation

/// Which history to fetch: SwiftData's `HistoryDescriptor`, with a predicate, sort and limit,
/// and the fields this store adds (after a token, by authors, for some model types).
///
/// ```swift
/// var descriptor = HistoryDescriptor<DefaultHistoryTransaction>(
///   predicate: #Predicate { $0.token > lastToken })
/// descriptor.sortBy = [SortDescriptor(\.token, order: .reverse)]
/// descriptor.fetchLimit = 1
/// let latest = try context.fetchHistory(descriptor)
/// ```
///
/// Cost: the parts of the predicate that compare ``DefaultHistoryTransaction/token`` or
/// ``DefaultHistoryTransaction/timestamp`` with a value, or ``DefaultHistoryTransaction/author``
/// with `==`, joined by `&&`, run in SQL, as a sort by the token does; any other part of the
/// predicate is evaluated on each transaction the SQL selects (with its changes read), and
/// any other sort reads every such transaction before the limit applies.
public struct HistoryDescriptor<TransactionType: HistoryTransaction>: Sendable {
  /// Only transactions for which this is true; nil for all.
  public var predicate: Predicate<TransactionType>?
  /// The order of the transactions: oldest first when empty.
  public var sortBy: [SortDescriptor<TransactionType>]
  /// At most this many transactions.
  public var fetchLimit: Int?
  /// Only transactions after this token; nil for all that are kept.
  public var token: DefaultHistoryToken?
  /// Only transactions by these authors; nil for any author.
  public var authors: Set<String>?
  /// Leave out transactions by these authors (for example changes a sync applied, so that they
  /// are not sent back where they came from).
  public var excludedAuthors: Set<String> = []
  /// Only changes to these entities (table names); nil for all. Transactions left with no
  /// change are left out.
  public var entityNames: Set<String>?
  /// For a table of ``entityNames`` whose model types given were subclasses: the paths their
  /// rows carry in `"_entity"` (``ModelInheritance``), so that only their changes, and their
  /// own subclasses', are selected. A table without an entry, or with the empty path (its root
  /// model given), is selected whole.
  var subentityPaths: [String: Set<String>] = [:]

  /// Creates a descriptor, as SwiftData's.
  public init(
    predicate: Predicate<TransactionType>? = nil, sortBy: [SortDescriptor<TransactionType>] = []
  ) {
    self.predicate = predicate
    self.sortBy = sortBy
  }
}

extension HistoryDescriptor where TransactionType == DefaultHistoryTransaction {
  /// Creates a descriptor of the transactions after `token`, by `authors`, changing
  /// `modelTypes`' rows: a root model's type selects its table's rows, a subclass's its own
  /// rows and its subclasses' (as a fetch of it does).
  public init(
    after token: DefaultHistoryToken? = nil, authors: Set<String>? = nil,
    modelTypes: [any PersistentModel.Type]? = nil, fetchLimit: Int? = nil
  ) {
    self.init()
    self.token = token
    self.authors = authors
    self.entityNames = modelTypes.map { Set($0.map { $0.entityName }) }
    for type in modelTypes ?? [] {
      subentityPaths[type.entityName, default: []].insert(inheritancePath(of: type))
    }
    self.fetchLimit = fetchLimit
  }
}

/// The path a model's rows carry in `"_entity"`: empty for a root model.
private func inheritancePath<Model: PersistentModel>(of _: Model.Type) -> String {
  Model.modelSchema.inheritance?.path ?? ""
}

extension HistoryDescriptor {
  /// Whether a change of a row of the table `entity`, of the subclass at the path
  /// `subentity` (nil for a root's row), is of the model types the descriptor selects.
  /// O(model types given).
  func selects(entity: String, subentity: String?) -> Bool {
    guard let entityNames else { return true }
    guard entityNames.contains(entity) else { return false }
    guard let paths = subentityPaths[entity], !paths.contains("") else { return true }
    let own = subentity ?? ""
    return paths.contains { own.hasPrefix($0) }
  }

  /// The condition on `_history_changes` that selects the model types' changes (with its
  /// bindings), as `selects(entity:subentity:)` does; empty when it selects every change.
  var changeCondition: (sql: String, bindings: [SQLValue]) {
    guard let entityNames else { return ("", []) }
    var parts: [String] = []
    var bindings: [SQLValue] = []
    for table in entityNames.sorted() {
      if let paths = subentityPaths[table], !paths.contains("") {
        for path in paths.sorted() {
          parts.append(
            "(entity = ? AND substr(coalesce(subentity, ''), 1, \(path.unicodeScalars.count)) = ?)")
          bindings += [.text(table), .text(path)]
        }
      } else {
        parts.append("entity = ?")
        bindings.append(.text(table))
      }
    }
    // No table at all selects nothing.
    return (" AND (\(parts.isEmpty ? "1 = 0" : parts.joined(separator: " OR ")))", bindings)
  }
}

extension PersistentModel {
  /// The table name from the schema.
  static var entityName: String { schema.name }
}

/// What of a history predicate and sort runs in SQL.
struct HistoryQueryPlan {
  /// The conditions on `_history_transactions` (aliased `t`), with their bindings.
  var conditions: [String] = []
  var bindings: [SQLValue] = []
  /// Every token the predicate holds, wherever: each is checked to be of this store.
  var tokens: [DefaultHistoryToken] = []
  /// The positions the transactions must come after by the predicate (a `>` bound as it is,
  /// a `>=` or `==` bound one less), wherever it compares the token, SQL's parts or Swift's:
  /// checked as a descriptor's token is (not expired, not newer than any issued), unless the
  /// SQL starts after the expired history anyway.
  var lowerBounds: [Int64] = []
  /// The position the SQL conditions start after (0 when they set no lower bound).
  var sqlStart: Int64 = 0
  /// Whether SQL decides the whole predicate (else it is evaluated on each transaction).
  var predicateInSQL = true
  /// Whether SQL gives the whole order.
  var sortInSQL = true
  /// Whether the SQL order is newest first.
  var newestFirst = false

  init(_ descriptor: HistoryDescriptor<DefaultHistoryTransaction>) {
    if let predicate = descriptor.predicate {
      if let expression = predicate.expression as? any HistorySQLExpression {
        predicateInSQL = expression.addSQL(to: &self)
      } else {
        predicateInSQL = false
      }
      var walk = HistoryTokenWalk()
      walk.visit(predicate.expression, negated: false)
      tokens = walk.tokens
      lowerBounds = walk.lowerBounds
    }
    // Only the first sort can decide: the token is unique, so none after it ever does.
    if let sort = descriptor.sortBy.first {
      let byToken =
        sort.keyPath == \DefaultHistoryTransaction.token
        || sort.keyPath == \DefaultHistoryTransaction.transactionIdentifier
        || sort.keyPath == \DefaultHistoryTransaction.id
      sortInSQL = byToken
      newestFirst = byToken && sort.order == .reverse
    }
  }
}

/// A predicate expression whose meaning, or part of it, is a condition on
/// `_history_transactions`.
protocol HistorySQLExpression {
  /// Adds the condition to `plan`; true when it is the expression's whole meaning (false when
  /// the predicate must also be evaluated in Swift).
  func addSQL(to plan: inout HistoryQueryPlan) -> Bool
}

extension PredicateExpressions.Conjunction: HistorySQLExpression {
  func addSQL(to plan: inout HistoryQueryPlan) -> Bool {
    // Each side narrows on its own: a side SQL cannot read leaves the other's condition sound.
    let left = (lhs as? any HistorySQLExpression)?.addSQL(to: &plan) ?? false
    let right = (rhs as? any HistorySQLExpression)?.addSQL(to: &plan) ?? false
    return left && right
  }
}

extension PredicateExpressions.Comparison: HistorySQLExpression {
  func addSQL(to plan: inout HistoryQueryPlan) -> Bool {
    let operators: [PredicateExpressions.ComparisonOperator: String] = [
      .lessThan: "<", .lessThanOrEqual: "<=", .greaterThan: ">", .greaterThanOrEqual: ">=",
    ]
    let mirrored: [PredicateExpressions.ComparisonOperator: String] = [
      .lessThan: ">", .lessThanOrEqual: ">=", .greaterThan: "<", .greaterThanOrEqual: "<=",
    ]
    if let column = historyColumn(lhs), let value = historyValue(rhs, for: column),
      let sql = operators[op]
    {
      plan.add(column, sql, value)
      return true
    }
    if let column = historyColumn(rhs), let value = historyValue(lhs, for: column),
      let sql = mirrored[op]
    {
      plan.add(column, sql, value)
      return true
    }
    return false
  }
}

extension PredicateExpressions.Equal: HistorySQLExpression {
  func addSQL(to plan: inout HistoryQueryPlan) -> Bool {
    if let column = historyColumn(lhs), let value = historyValue(rhs, for: column) {
      plan.add(column, "=", value)
      return true
    }
    if let column = historyColumn(rhs), let value = historyValue(lhs, for: column) {
      plan.add(column, "=", value)
      return true
    }
    return false
  }
}

/// A column of `_history_transactions` a predicate may compare.
enum HistoryColumn {
  case token, timestamp, author
}

/// A value a history predicate compares a column with.
enum HistoryValue {
  case token(DefaultHistoryToken)
  case date(Date)
  case author(String?)
}

extension HistoryQueryPlan {
  mutating func add(_ column: HistoryColumn, _ sql: String, _ value: HistoryValue) {
    switch (column, value) {
    case (.token, .token(let token)):
      conditions.append("t.token \(sql) ?")
      bindings.append(.integer(token.value))
      switch sql {
      case ">": sqlStart = max(sqlStart, token.value)
      case ">=", "=": sqlStart = max(sqlStart, token.value - 1)
      default: break
      }
    case (.timestamp, .date(let date)):
      conditions.append("t.timestamp \(sql) ?")
      bindings.append(.real(date.timeIntervalSinceReferenceDate))
    case (.author, .author(let author?)):
      // Authors are recorded NFC: compared as Swift compares strings (canonical equivalence).
      conditions.append("t.author = ?")
      bindings.append(.text(author.nfc))
    case (.author, .author(nil)):
      conditions.append("t.author IS NULL")
    default:
      predicateInSQL = false
    }
  }
}

/// The column `expression` reads, when it is a key path of the transaction that is one.
private func historyColumn(_ expression: Any) -> HistoryColumn? {
  typealias Variable = PredicateExpressions.Variable<DefaultHistoryTransaction>
  if let path = expression as? PredicateExpressions.KeyPath<Variable, DefaultHistoryToken>,
    path.keyPath == \DefaultHistoryTransaction.token
  {
    return .token
  }
  if let path = expression as? PredicateExpressions.KeyPath<Variable, Date>,
    path.keyPath == \DefaultHistoryTransaction.timestamp
  {
    return .timestamp
  }
  if let path = expression as? PredicateExpressions.KeyPath<Variable, String?>,
    path.keyPath == \DefaultHistoryTransaction.author
  {
    return .author
  }
  return nil
}

/// The value `expression` is, when it is a constant of `column`'s type.
private func historyValue(_ expression: Any, for column: HistoryColumn) -> HistoryValue? {
  switch column {
  case .token:
    (expression as? PredicateExpressions.Value<DefaultHistoryToken>).map { .token($0.value) }
  case .timestamp:
    (expression as? PredicateExpressions.Value<Date>).map { .date($0.value) }
  case .author:
    (expression as? PredicateExpressions.Value<String?>).map { .author($0.value) }
      ?? (expression as? PredicateExpressions.Value<String>).map { .author($0.value) }
      ?? (expression is PredicateExpressions.NilLiteral<String> ? .author(nil) : nil)
  }
}

/// A walk of a history predicate's whole tree for the tokens it holds and the lower bounds it
/// sets on the token (through `!`, `&&`, `||` and any other node), so that no token escapes
/// the checks because Swift, not SQL, evaluates its comparison. O(nodes), by reflection.
struct HistoryTokenWalk {
  var tokens: [DefaultHistoryToken] = []
  var lowerBounds: [Int64] = []

  mutating func visit(_ node: Any, negated: Bool) {
    if let value = node as? PredicateExpressions.Value<DefaultHistoryToken> {
      tokens.append(value.value)
      return
    }
    if let bound = node as? any HistoryTokenBound, let found = bound.lowerBound(negated: negated) {
      lowerBounds.append(found)
    }
    let flips = node is any HistoryNegation
    for child in Mirror(reflecting: node).children {
      visit(child.value, negated: flips ? !negated : negated)
    }
  }
}

/// A `!` node: the bounds below it point the other way.
protocol HistoryNegation {}
extension PredicateExpressions.Negation: HistoryNegation {}

/// A node that may bound the token from below.
protocol HistoryTokenBound {
  /// The position the token must come after, as the node bounds it (a `>=` bound one less),
  /// under `negated` `!`s; nil when it sets no lower bound.
  func lowerBound(negated: Bool) -> Int64?
}

extension PredicateExpressions.Comparison: HistoryTokenBound {
  func lowerBound(negated: Bool) -> Int64? {
    // Normalized to `token OP value`.
    var op = op
    var value: DefaultHistoryToken
    if historyColumn(lhs) == .token, case .token(let token)? = historyValue(rhs, for: .token) {
      value = token
    } else if historyColumn(rhs) == .token,
      case .token(let token)? = historyValue(lhs, for: .token)
    {
      value = token
      op =
        switch op {
        case .lessThan: .greaterThan
        case .lessThanOrEqual: .greaterThanOrEqual
        case .greaterThan: .lessThan
        case .greaterThanOrEqual: .lessThanOrEqual
        @unknown default: op
        }
    } else {
      return nil
    }
    if negated {
      op =
        switch op {
        case .lessThan: .greaterThanOrEqual
        case .lessThanOrEqual: .greaterThan
        case .greaterThan: .lessThanOrEqual
        case .greaterThanOrEqual: .lessThan
        @unknown default: op
        }
    }
    switch op {
    case .greaterThan: return value.value
    case .greaterThanOrEqual: return value.value - 1
    default: return nil
    }
  }
}

extension PredicateExpressions.Equal: HistoryTokenBound {
  func lowerBound(negated: Bool) -> Int64? {
    guard !negated else { return nil }
    if historyColumn(lhs) == .token, case .token(let token)? = historyValue(rhs, for: .token) {
      return token.value - 1
    }
    if historyColumn(rhs) == .token, case .token(let token)? = historyValue(lhs, for: .token) {
      return token.value - 1
    }
    return nil
  }
}
