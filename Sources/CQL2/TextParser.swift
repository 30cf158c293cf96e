import Foundation

extension CQL2Expression {
  /// Parses a CQL2 Text filter (OGC 21-065r2, the `cql2-text` encoding): keywords in any
  /// letter case, properties by name or in double quotes, character literals in single quotes
  /// (`''` or `\'` for a quote), `DATE('…')`, `TIMESTAMP('…')`, `INTERVAL(…)` whose ends are
  /// instants (or `'..'`), properties or literals, WKT geometries and `BBOX(…)`, the
  /// comparison, `LIKE`, `BETWEEN`, `IN`, `IS [NOT] NULL` predicates, arithmetic
  /// (`+ - * / % div ^`, with `^` binding tightest and to the right), and function calls.
  ///
  /// Throws ``CQL2Error`` naming the character where the text stops making sense. Cost:
  /// O(length of the text); nesting deeper than 100 levels (parentheses, `NOT`s, signs, powers,
  /// function calls within one another, each one level) is refused (a stack bound).
  public init(text: String) throws {
    var parser = CQL2TextParser(text)
    self = try parser.parseFilter()
  }
}

/// A token of CQL2 Text.
enum CQL2Token: Equatable {
  /// A bare word: a keyword, a function's or a property's name.
  case word(String)
  /// A name in double quotes.
  case quoted(String)
  /// A character literal.
  case string(String)
  /// An unsigned number as written.
  case number(Double)
  /// Punctuation or an operator.
  case symbol(String)
  /// The end of the text.
  case end

  var display: String {
    switch self {
    case .word(let word): "'\(word)'"
    case .quoted(let name): "\"\(name)\""
    case .string(let text): "the text '\(text)'"
    case .number(let number): "the number \(number)"
    case .symbol(let symbol): "'\(symbol)'"
    case .end: "the end of the filter"
    }
  }
}

/// A recursive-descent parser of CQL2 Text: one token of lookahead, positions in Unicode
/// scalars from 1.
struct CQL2TextParser {
  private let scalars: [Unicode.Scalar]
  private var index = 0
  private var token: CQL2Token = .end
  private var tokenStart = 0
  /// How many levels the parser is within: the filter itself is level 0, each parenthesis,
  /// `NOT`, sign, power or function call one more.
  private var depth = -1
  static let maximumDepth = 100

  init(_ text: String) {
    scalars = Array(text.unicodeScalars)
  }

  private var location: CQL2Location { .character(tokenStart + 1) }

  private func error(_ reason: String) -> CQL2Error { CQL2Error(reason, at: location) }

  mutating func parseFilter() throws -> CQL2Expression {
    try advance()
    guard token != .end else { throw error("The filter is empty.") }
    let expression = try parseOr()
    guard token == .end else {
      throw error("Expected AND, OR or the end of the filter, found \(token.display).")
    }
    return expression
  }

  // MARK: Tokens

  private mutating func advance() throws {
    while index < scalars.count, scalars[index].properties.isWhitespace { index += 1 }
    tokenStart = index
    guard index < scalars.count else {
      token = .end
      return
    }
    let first = scalars[index]
    if first == "'" {
      token = .string(try readQuoted(quote: "'", what: "character literal"))
    } else if first == "\"" {
      let name = try readQuoted(quote: "\"", what: "property name")
      guard !name.isEmpty else { throw error("A property name in double quotes is empty.") }
      token = .quoted(name)
    } else if first.properties.isAlphabetic || first == "_" {
      var word = String.UnicodeScalarView()
      while index < scalars.count {
        let scalar = scalars[index]
        guard
          scalar.properties.isAlphabetic || scalar == "_" || scalar == ":" || scalar == "."
            || ("0"..."9").contains(scalar)
        else { break }
        word.append(scalar)
        index += 1
      }
      token = .word(String(word))
    } else if ("0"..."9").contains(first) || (first == "." && isDigit(at: index + 1)) {
      token = .number(try readNumber())
    } else {
      index += 1
      let two = index < scalars.count ? String(first) + String(scalars[index]) : ""
      if ["<>", "<=", ">="].contains(two) {
        index += 1
        token = .symbol(two)
      } else if "(),=<>+-*/%^".unicodeScalars.contains(first) {
        token = .symbol(String(first))
      } else {
        throw error("Unexpected character '\(first.escaped(asASCII: true))'.")
      }
    }
  }

  private func isDigit(at position: Int) -> Bool {
    position < scalars.count && ("0"..."9").contains(scalars[position])
  }

  private mutating func readQuoted(quote: Unicode.Scalar, what: String) throws -> String {
    index += 1
    var text = String.UnicodeScalarView()
    while true {
      guard index < scalars.count else {
        throw error("The \(what) is not closed: a \(quote) is missing.")
      }
      let scalar = scalars[index]
      if scalar == quote {
        if index + 1 < scalars.count, scalars[index + 1] == quote {
          text.append(quote)
          index += 2
          continue
        }
        index += 1
        return String(text)
      }
      if scalar == "\\", quote == "'", index + 1 < scalars.count, scalars[index + 1] == "'" {
        text.append("'")
        index += 2
        continue
      }
      text.append(scalar)
      index += 1
    }
  }

  private mutating func readNumber() throws -> Double {
    let start = index
    while isDigit(at: index) { index += 1 }
    if index < scalars.count, scalars[index] == "." {
      index += 1
      while isDigit(at: index) { index += 1 }
    }
    if index < scalars.count, scalars[index] == "e" || scalars[index] == "E" {
      var next = index + 1
      if next < scalars.count, scalars[next] == "+" || scalars[next] == "-" { next += 1 }
      if isDigit(at: next) {
        index = next
        while isDigit(at: index) { index += 1 }
      }
    }
    var text = String.UnicodeScalarView()
    text.append(contentsOf: scalars[start..<index])
    guard let value = Double(String(text)), value.isFinite else {
      throw error("'\(String(text))' is not a number.")
    }
    return value
  }

  private func isKeyword(_ keyword: String) -> Bool {
    if case .word(let word) = token { return word.caseInsensitiveCompare(keyword) == .orderedSame }
    return false
  }

  private mutating func expect(symbol: String) throws {
    guard token == .symbol(symbol) else {
      throw error("Expected '\(symbol)', found \(token.display).")
    }
    try advance()
  }

  private mutating func expect(keyword: String) throws {
    guard isKeyword(keyword) else {
      throw error("Expected \(keyword), found \(token.display).")
    }
    try advance()
  }

  private mutating func nested<T>(_ body: (inout CQL2TextParser) throws -> T) throws -> T {
    depth += 1
    defer { depth -= 1 }
    guard depth <= Self.maximumDepth else {
      throw error("The filter nests deeper than \(Self.maximumDepth) levels.")
    }
    return try body(&self)
  }

  // MARK: Boolean expressions

  private mutating func parseOr() throws -> CQL2Expression {
    try nested { parser in
      let start = parser.location
      var terms = [try parser.parseAnd()]
      while parser.isKeyword("OR") {
        try parser.advance()
        terms.append(try parser.parseAnd())
      }
      return terms.count == 1 ? terms[0] : CQL2Expression(.or(terms), at: start)
    }
  }

  private mutating func parseAnd() throws -> CQL2Expression {
    let start = location
    var factors = [try parseNot()]
    while isKeyword("AND") {
      try advance()
      factors.append(try parseNot())
    }
    return factors.count == 1 ? factors[0] : CQL2Expression(.and(factors), at: start)
  }

  private mutating func parseNot() throws -> CQL2Expression {
    guard isKeyword("NOT") else { return try parsePredicate() }
    let start = location
    try advance()
    return CQL2Expression(.not(try nested { try $0.parseNot() }), at: start)
  }

  private mutating func parsePredicate() throws -> CQL2Expression {
    let start = location
    let left = try parseAdditive()
    func at(_ node: CQL2Expression.Node) -> CQL2Expression { CQL2Expression(node, at: start) }
    if case .symbol(let symbol) = token,
      let comparison = CQL2Expression.ComparisonOperator(rawValue: symbol)
    {
      try advance()
      return at(.comparison(comparison, left, try parseAdditive()))
    }
    var negated = false
    let notLocation = location
    if isKeyword("NOT") {
      negated = true
      try advance()
      guard isKeyword("LIKE") || isKeyword("BETWEEN") || isKeyword("IN") else {
        throw error("Expected LIKE, BETWEEN or IN after NOT, found \(token.display).")
      }
    }
    var predicate: CQL2Expression
    if isKeyword("LIKE") {
      try advance()
      predicate = at(.like(left, try parseAdditive()))
    } else if isKeyword("BETWEEN") {
      try advance()
      let low = try parseAdditive()
      try expect(keyword: "AND")
      predicate = at(.between(left, low, try parseAdditive()))
    } else if isKeyword("IN") {
      try advance()
      try expect(symbol: "(")
      var items = [try parseAdditive()]
      while token == .symbol(",") {
        try advance()
        items.append(try parseAdditive())
      }
      try expect(symbol: ")")
      predicate = at(.in(left, items))
    } else if isKeyword("IS") {
      try advance()
      if isKeyword("NOT") {
        negated = true
        try advance()
      }
      try expect(keyword: "NULL")
      predicate = at(.isNull(left))
    } else {
      return left
    }
    if negated { predicate = CQL2Expression(.not(predicate), at: notLocation) }
    return predicate
  }

  // MARK: Scalar expressions

  private mutating func parseAdditive() throws -> CQL2Expression {
    var left = try parseMultiplicative()
    while case .symbol(let symbol) = token, symbol == "+" || symbol == "-" {
      let start = location
      try advance()
      let right = try parseMultiplicative()
      left = CQL2Expression(.arithmetic(symbol == "+" ? .add : .subtract, left, right), at: start)
    }
    return left
  }

  private mutating func parseMultiplicative() throws -> CQL2Expression {
    var left = try parsePower()
    while true {
      let start = location
      let operation: CQL2Expression.ArithmeticOperator
      switch token {
      case .symbol("*"): operation = .multiply
      case .symbol("/"): operation = .divide
      case .symbol("%"): operation = .remainder
      case .word(let word) where word.lowercased() == "div": operation = .integerDivide
      default: return left
      }
      try advance()
      left = CQL2Expression(.arithmetic(operation, left, try parsePower()), at: start)
    }
  }

  private mutating func parsePower() throws -> CQL2Expression {
    let base = try parseUnary()
    guard token == .symbol("^") else { return base }
    let start = location
    try advance()
    let exponent = try nested { try $0.parsePower() }
    return CQL2Expression(.arithmetic(.power, base, exponent), at: start)
  }

  private mutating func parseUnary() throws -> CQL2Expression {
    guard token == .symbol("-") || token == .symbol("+") else { return try parsePrimary() }
    let start = location
    let minus = token == .symbol("-")
    try advance()
    let operand = try nested { try $0.parseUnary() }
    guard minus else { return operand }
    if case .number(let value) = operand.node { return CQL2Expression(.number(-value), at: start) }
    return CQL2Expression(.negation(operand), at: start)
  }

  private mutating func parsePrimary() throws -> CQL2Expression {
    let start = location
    switch token {
    case .number(let value):
      try advance()
      return CQL2Expression(.number(value), at: start)
    case .string(let text):
      try advance()
      return CQL2Expression(.string(text), at: start)
    case .quoted(let name):
      try advance()
      return CQL2Expression(.property(name), at: start)
    case .symbol("("):
      try advance()
      let inner = try parseOr()
      try expect(symbol: ")")
      return inner
    case .word(let word):
      try advance()
      return try parseWord(word, at: start)
    default:
      throw CQL2Error(
        "Expected a property, a literal or a function, found \(token.display).", at: start)
    }
  }

  private mutating func parseWord(_ word: String, at start: CQL2Location) throws -> CQL2Expression {
    let upper = word.uppercased()
    func at(_ node: CQL2Expression.Node) -> CQL2Expression { CQL2Expression(node, at: start) }
    switch upper {
    case "TRUE": return at(.boolean(true))
    case "FALSE": return at(.boolean(false))
    case "AND", "OR", "NOT", "LIKE", "BETWEEN", "IN", "IS", "NULL", "DIV":
      throw CQL2Error("Expected a property, a literal or a function, found '\(word)'.", at: start)
    default: break
    }
    guard token == .symbol("(") else { return at(.property(word)) }
    try advance()
    switch upper {
    case "DATE":
      let text = try stringArgument("DATE")
      guard CQL2Instant.day(text) != nil else {
        throw CQL2Error("'\(text)' is not a date (yyyy-mm-dd).", at: start)
      }
      return at(.date(text))
    case "TIMESTAMP":
      let text = try stringArgument("TIMESTAMP")
      guard let date = CQL2Instant.timestamp(text) else {
        throw CQL2Error(
          "'\(text)' is not a timestamp (RFC 3339 in UTC, such as 2024-05-01T10:00:00Z).",
          at: start)
      }
      return at(.timestamp(date))
    case "INTERVAL":
      let from = try intervalEnd()
      try expect(symbol: ",")
      let to = try intervalEnd()
      try expect(symbol: ")")
      return at(.interval(from, to))
    case "BBOX":
      var numbers: [Double] = []
      repeat {
        if !numbers.isEmpty { try advance() }
        numbers.append(try signedNumber())
      } while token == .symbol(",")
      try expect(symbol: ")")
      return at(.geometry(try CQL2Geometry.box(numbers, at: start)))
    case "POINT", "MULTIPOINT", "LINESTRING", "MULTILINESTRING", "POLYGON", "MULTIPOLYGON",
      "GEOMETRYCOLLECTION":
      return at(.geometry(try geometryBody(upper, at: start)))
    default:
      var arguments: [CQL2Expression] = []
      if token != .symbol(")") {
        arguments.append(try parseOr())
        while token == .symbol(",") {
          try advance()
          arguments.append(try parseOr())
        }
      }
      try expect(symbol: ")")
      let lower = word.lowercased()
      func two() throws -> (CQL2Expression, CQL2Expression) {
        guard arguments.count == 2 else {
          throw CQL2Error("\(upper) takes 2 arguments, not \(arguments.count).", at: start)
        }
        return (arguments[0], arguments[1])
      }
      if let function = CQL2Expression.SpatialFunction(rawValue: lower) {
        let (a, b) = try two()
        return at(.spatial(function, a, b))
      }
      if let function = CQL2Expression.TemporalFunction(rawValue: lower) {
        let (a, b) = try two()
        return at(.temporal(function, a, b))
      }
      if upper == "CASEI" || upper == "ACCENTI" {
        guard arguments.count == 1 else {
          throw CQL2Error("\(upper) takes 1 argument, not \(arguments.count).", at: start)
        }
        return at(
          upper == "CASEI" ? .caseInsensitive(arguments[0]) : .accentInsensitive(arguments[0]))
      }
      return at(.function(word, arguments))
    }
  }

  private mutating func stringArgument(_ function: String) throws -> String {
    guard case .string(let text) = token else {
      throw error("\(function) takes a character literal, found \(token.display).")
    }
    try advance()
    try expect(symbol: ")")
    return text
  }

  /// An end of `INTERVAL(…)`: `'..'`, an instant as a character literal, `DATE(…)` or
  /// `TIMESTAMP(…)`, or a property.
  private mutating func intervalEnd() throws -> CQL2Expression {
    let start = location
    if case .string(let text) = token {
      try advance()
      if text == ".." { return CQL2Expression(.unbounded, at: start) }
      if CQL2Instant.day(text) != nil { return CQL2Expression(.date(text), at: start) }
      if let date = CQL2Instant.timestamp(text) {
        return CQL2Expression(.timestamp(date), at: start)
      }
      throw CQL2Error(
        "'\(text)' is not an instant: give a date (yyyy-mm-dd), a timestamp (RFC 3339) or '..'.",
        at: start)
    }
    return try nested { try $0.parseAdditive() }
  }

  private mutating func signedNumber() throws -> Double {
    var sign = 1.0
    if token == .symbol("-") || token == .symbol("+") {
      if token == .symbol("-") { sign = -1 }
      try advance()
    }
    guard case .number(let value) = token else {
      throw error("Expected a number, found \(token.display).")
    }
    try advance()
    return sign * value
  }

  // MARK: Well-known text

  /// The body of a WKT geometry after its keyword and `(`.
  private mutating func geometryBody(_ kind: String, at start: CQL2Location) throws -> CQL2Geometry
  {
    switch kind {
    case "POINT":
      let point = try position()
      try expect(symbol: ")")
      return .point(point)
    case "MULTIPOINT":
      var points: [CQL2Position] = []
      repeat {
        if !points.isEmpty { try advance() }
        if token == .symbol("(") {
          try advance()
          points.append(try position())
          try expect(symbol: ")")
        } else {
          points.append(try position())
        }
      } while token == .symbol(",")
      try expect(symbol: ")")
      return .multiPoint(points)
    case "LINESTRING":
      let line = try positions(closing: true)
      return .lineString(try CQL2Geometry.checkedLine(line, at: start))
    case "MULTILINESTRING":
      let lines = try list {
        try $0.expect(symbol: "(")
        return try $0.positions(closing: true)
      }
      return .multiLineString(try lines.map { try CQL2Geometry.checkedLine($0, at: start) })
    case "POLYGON":
      let rings = try list {
        try $0.expect(symbol: "(")
        return try $0.positions(closing: true)
      }
      return .polygon(try CQL2Geometry.checkedRings(rings, at: start))
    case "MULTIPOLYGON":
      let polygons = try list { parser in
        try parser.expect(symbol: "(")
        return try parser.list {
          try $0.expect(symbol: "(")
          return try $0.positions(closing: true)
        }
      }
      return .multiPolygon(try polygons.map { try CQL2Geometry.checkedRings($0, at: start) })
    default:
      let members = try list { parser in
        let memberStart = parser.location
        guard case .word(let word) = parser.token else {
          throw parser.error("Expected a geometry, found \(parser.token.display).")
        }
        let upper = word.uppercased()
        guard
          [
            "POINT", "MULTIPOINT", "LINESTRING", "MULTILINESTRING", "POLYGON", "MULTIPOLYGON",
            "GEOMETRYCOLLECTION",
          ].contains(upper)
        else { throw parser.error("Expected a geometry, found \(parser.token.display).") }
        try parser.advance()
        try parser.expect(symbol: "(")
        return try parser.nested { try $0.geometryBody(upper, at: memberStart) }
      }
      return .collection(members)
    }
  }

  /// Items separated by commas up to and including `)`.
  private mutating func list<T>(_ item: (inout CQL2TextParser) throws -> T) throws -> [T] {
    var items = [try item(&self)]
    while token == .symbol(",") {
      try advance()
      items.append(try item(&self))
    }
    try expect(symbol: ")")
    return items
  }

  /// Positions separated by commas, then `)`.
  private mutating func positions(closing: Bool) throws -> [CQL2Position] {
    try list { try $0.position() }
  }

  /// `x y` or `x y z` (z dropped).
  private mutating func position() throws -> CQL2Position {
    let x = try signedNumber()
    let y = try signedNumber()
    if case .number = token {
      _ = try signedNumber()
    } else if token == .symbol("-") {
      _ = try signedNumber()
    }
    return try CQL2Position.checked(x: x, y: y, at: location)
  }
}
