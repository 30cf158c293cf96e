import Foundation

/// An option of a command, as `--name <value>` or a flag `--name`.
package struct OptionSpec {
  package var name: String
  package var short: Character?
  /// The value's placeholder; nil for a flag.
  package var valueName: String?
  package var help: String
  package var defaultDescription: String?
  package var isRequired = false
  /// The values a shell completes after the option (an enum's cases, `today`…).
  package var completions: [String] = []
  /// Whether a shell completes a file name after the option.
  package var completesFiles = false

  package var isFlag: Bool { valueName == nil }

  package var label: String {
    var text = short.map { "-\($0), " } ?? ""
    text += "--\(name)"
    if let valueName { text += " <\(valueName)>" }
    return text
  }

  package var usage: String {
    let text = "--\(name)" + (valueName.map { " <\($0)>" } ?? "")
    return isRequired ? text : "[\(text)]"
  }

  package init(
    name: String, short: Character? = nil, valueName: String?, help: String,
    defaultDescription: String? = nil, isRequired: Bool = false
  ) {
    self.name = name
    self.short = short
    self.valueName = valueName
    self.help = help
    self.defaultDescription = defaultDescription
    self.isRequired = isRequired
  }
}

/// A positional argument.
package struct ArgumentSpec {
  package var name: String
  package var help: String
  package var isOptional = false
  package var isRepeating = false

  package init(name: String, help: String, isOptional: Bool = false, isRepeating: Bool = false) {
    self.name = name
    self.help = help
    self.isOptional = isOptional
    self.isRepeating = isRepeating
  }

  package var usage: String {
    var text = "<\(name)>"
    if isRepeating { text += " ..." }
    return isOptional ? "[\(text)]" : text
  }
}

/// A command: its help text, options, arguments and subcommands.
package struct CommandSpec {
  package var name: String
  package var abstract: String
  package var discussion: String?
  package var options: [OptionSpec] = []
  package var arguments: [ArgumentSpec] = []
  package var subcommands: [CommandSpec] = []
  /// Options this command no longer has, each with what to use instead.
  package var renamed: [String: String] = [:]

  package var allOptions: [OptionSpec] { options + [Flag.help.spec] }

  package init(
    name: String, abstract: String, discussion: String? = nil,
    options: [any OptionDescriptor] = [], arguments: [ArgumentSpec] = [],
    subcommands: [CommandSpec] = []
  ) {
    self.name = name
    self.abstract = abstract
    self.discussion = discussion
    self.options = options.map(\.spec)
    self.arguments = arguments
    self.subcommands = subcommands
  }
}

/// Something a command declares on its command line: what help and the parser need.
package protocol OptionDescriptor: Sendable {
  /// Its name, placeholder, help and default, for the parser and for help.
  var spec: OptionSpec { get }
}

/// An option with a value of type `Value`, declared once (its name, help, placeholder, default
/// text, and how its text becomes a value) and read typed: `try arguments[Self.port]`. A text
/// that does not parse is a usage error naming the option and what it expects.
package struct Option<Value>: OptionDescriptor {
  package private(set) var spec: OptionSpec
  package let parse: @Sendable (String) throws -> Value

  package init(
    name: String, short: Character? = nil, valueName: String, help: String,
    defaultDescription: String? = nil, isRequired: Bool = false,
    parse: @escaping @Sendable (String) throws -> Value
  ) {
    spec = OptionSpec(
      name: name, short: short, valueName: valueName, help: help,
      defaultDescription: defaultDescription, isRequired: isRequired)
    self.parse = parse
  }

  /// The same option, with the values a shell should offer after it.
  package func completing(_ values: [String]) -> Option {
    var copy = self
    copy.spec.completions = values
    return copy
  }

  /// The same option, completed with file names by shells.
  package var completingFiles: Option {
    var copy = self
    copy.spec.completesFiles = true
    return copy
  }

  /// The same option, required: the parser refuses a command line without it.
  package var required: Option {
    var copy = self
    copy.spec.isRequired = true
    return copy
  }
}

extension Option where Value == String {
  /// An option whose value is its text.
  package init(
    name: String, short: Character? = nil, valueName: String, help: String,
    defaultDescription: String? = nil, isRequired: Bool = false
  ) {
    self.init(
      name: name, short: short, valueName: valueName, help: help,
      defaultDescription: defaultDescription, isRequired: isRequired, parse: { $0 })
  }
}

extension Option
where Value: RawRepresentable & CaseIterable & SendableMetatype, Value.RawValue == String {
  /// An option whose values are an enum's cases (or some of them), named in help and in the
  /// error for any other text.
  /// The help reads `help` followed by the values: "Order by start, end, name or
  /// destination.", then `detail`.
  package init(
    name: String, valueName: String, help: String, allowed: [Value] = Array(Value.allCases),
    detail: String? = nil, defaultDescription: String? = nil
  ) {
    let names = allowed.map(\.rawValue)
    let expected =
      names.count > 1
      ? names.dropLast().joined(separator: ", ") + " or " + names.last! : names.joined()
    var spec = OptionSpec(
      name: name, valueName: valueName,
      help: "\(help) \(expected)." + (detail.map { " " + $0 } ?? ""),
      defaultDescription: defaultDescription)
    spec.completions = names
    self.spec = spec
    let allowedNames = Set(names)
    let optionName = name
    parse = { given in
      // Case does not matter: `--format JSON` is `--format json`.
      let text = given.lowercased()
      guard allowedNames.contains(text), let value = Value(rawValue: text) else {
        throw CLIError.usage(
          "Invalid value '\(terminalSafe(given))' for '--\(optionName)': expected \(expected).")
      }
      return value
    }
  }
}

/// A flag: present or not.
package struct Flag: OptionDescriptor {
  package let spec: OptionSpec

  package init(name: String, short: Character? = nil, help: String) {
    spec = OptionSpec(name: name, short: short, valueName: nil, help: help)
  }

  /// `-h`, `--help`: every command has it.
  package static let help = Flag(name: "help", short: "h", help: "Show help information.")
  /// `--version`, on the root command.
  package static let version = Flag(name: "version", help: "Show the version.")
}

/// What the command line said, read through the options' typed descriptors.
package struct ParsedArguments {
  fileprivate var values: [String: [String]] = [:]
  fileprivate var flags: Set<String> = []
  package var positionals: [String] = []

  /// The option's last value, parsed; nil when it was not given.
  package subscript<Value>(option: Option<Value>) -> Value? {
    get throws { try values[option.spec.name]?.last.map(option.parse) }
  }

  /// Whether the flag was given.
  package subscript(flag: Flag) -> Bool { flags.contains(flag.spec.name) }

  /// Whether the option or flag was given at all.
  package func contains(_ descriptor: any OptionDescriptor) -> Bool {
    values[descriptor.spec.name] != nil || flags.contains(descriptor.spec.name)
  }
}

/// A failure with the exit code it maps to (sysexits).
package struct CLIError: Error {
  package enum Kind {
    case usage  // 64
    case data  // 65
    case noInput  // 66
    case failure  // 1
  }
  package var kind: Kind
  package var message: String
  /// The command whose usage to show after a usage error.
  package var command: [String] = []

  package init(kind: Kind, message: String, command: [String] = []) {
    self.kind = kind
    self.message = message
    self.command = command
  }

  package var exitCode: Int32 {
    switch kind {
    case .usage: 64
    case .data: 65
    case .noInput: 66
    case .failure: 1
    }
  }

  package static func usage(_ message: String) -> CLIError {
    CLIError(kind: .usage, message: message)
  }
}

package enum ArgumentParser {
  /// Parses `arguments` for `spec`: `--name value`, `--name=value`, `-h`, flags, `--` ends
  /// options. Unknown options get a suggestion.
  package static func parse(_ arguments: [String], for spec: CommandSpec) throws -> ParsedArguments
  {
    var parsed = ParsedArguments()
    var index = 0
    var optionsEnded = false
    let options = spec.allOptions
    while index < arguments.count {
      let argument = arguments[index]
      index += 1
      if optionsEnded || argument == "-" || !argument.hasPrefix("-") {
        parsed.positionals.append(argument)
        continue
      }
      if argument == "--" {
        optionsEnded = true
        continue
      }
      var name: String
      var inlineValue: String?
      if argument.hasPrefix("--") {
        name = String(argument.dropFirst(2))
        if let equals = name.firstIndex(of: "=") {
          inlineValue = String(name[name.index(after: equals)...])
          name = String(name[..<equals])
        }
      } else {
        guard argument.count == 2, let option = options.first(where: { $0.short == argument.last })
        else {
          // A negative number is a value, not an option.
          if Double(argument) != nil {
            parsed.positionals.append(argument)
            continue
          }
          throw CLIError.usage("Unknown option '\(argument)'.\(suggestion(argument, options))")
        }
        name = option.name
      }
      guard let option = options.first(where: { $0.name == name }) else {
        if let instead = spec.renamed[name] { throw CLIError.usage(instead) }
        throw CLIError.usage("Unknown option '--\(name)'.\(suggestion("--" + name, options))")
      }
      if option.isFlag {
        guard inlineValue == nil else {
          throw CLIError.usage("The flag '--\(name)' does not take a value.")
        }
        parsed.flags.insert(name)
      } else {
        if let inlineValue {
          parsed.values[name, default: []].append(inlineValue)
        } else if index < arguments.count {
          parsed.values[name, default: []].append(arguments[index])
          index += 1
        } else {
          throw CLIError.usage("Missing value for '--\(name) <\(option.valueName!)>'.")
        }
      }
    }
    if parsed[Flag.help] { return parsed }
    for option in spec.options where option.isRequired && parsed.values[option.name] == nil {
      throw CLIError.usage(
        "Missing expected argument '--\(option.name) <\(option.valueName ?? "")>'.")
    }
    let required = spec.arguments.filter { !$0.isOptional }.count
    if parsed.positionals.count < required {
      let missing = spec.arguments[parsed.positionals.count]
      throw CLIError.usage("Missing expected argument '<\(missing.name)>'.")
    }
    if !spec.arguments.contains(where: \.isRepeating)
      && parsed.positionals.count > spec.arguments.count
    {
      throw CLIError.usage("Unexpected argument '\(parsed.positionals[spec.arguments.count])'.")
    }
    return parsed
  }

  /// " Did you mean '--x'?" for the closest option within a small edit distance.
  package static func suggestion(_ argument: String, _ options: [OptionSpec]) -> String {
    let candidates = options.map { "--\($0.name)" }
    guard
      let best = candidates.min(by: { editDistance($0, argument) < editDistance($1, argument) }),
      editDistance(best, argument) <= max(2, argument.count / 3)
    else { return "" }
    return " Did you mean '\(best)'?"
  }

  package static func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a)
    let b = Array(b)
    guard !a.isEmpty else { return b.count }
    guard !b.isEmpty else { return a.count }
    var previous = Array(0...b.count)
    for i in 1...a.count {
      var current = [i] + Array(repeating: 0, count: b.count)
      for j in 1...b.count {
        current[j] = min(
          previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
      }
      previous = current
    }
    return previous[b.count]
  }
}

/// Help text in swift-argument-parser's layout.
package enum HelpFormatter {
  package static let labelWidth = 26
  package static let width = 80

  package static func usage(_ spec: CommandSpec, path: [String]) -> String {
    if !spec.subcommands.isEmpty && spec.options.isEmpty {
      return "\(path.joined(separator: " ")) <subcommand>"
    }
    let parts =
      spec.arguments.map(\.usage)
      + spec.options.map(\.usage)
    return ([path.joined(separator: " ")] + parts).joined(separator: " ")
  }

  package static func help(_ spec: CommandSpec, path: [String]) -> String {
    var text = "OVERVIEW: \(spec.abstract)\n\n"
    if let discussion = spec.discussion { text += discussion + "\n\n" }
    text += "USAGE: \(usage(spec, path: path))\n\n"
    if !spec.arguments.isEmpty {
      text += "ARGUMENTS:\n"
      for argument in spec.arguments { text += row("<\(argument.name)>", argument.help) }
      text += "\n"
    }
    text += "OPTIONS:\n"
    var options = spec.allOptions
    if path.count == 1 && !spec.subcommands.isEmpty {
      options.insert(Flag.version.spec, at: 0)
    }
    for option in options {
      var help = option.help
      if let defaultDescription = option.defaultDescription {
        help += " (default: \(defaultDescription))"
      }
      text += row(option.label, help)
    }
    if !spec.subcommands.isEmpty {
      text += "\nSUBCOMMANDS:\n"
      for command in spec.subcommands { text += row(command.name, command.abstract) }
      let nested = path.dropFirst().map { $0 + " " }.joined()
      text += "\n  See '\(path[0]) help \(nested)<subcommand>' for detailed help.\n"
    }
    return text
  }

  /// One `label  help` row, help wrapped at 80 columns and indented to the help column.
  package static func row(_ label: String, _ help: String) -> String {
    var text = "  " + label
    let helpLines = wrap(help, width: width - labelWidth)
    if label.count + 2 > labelWidth - 2 {
      text += "\n" + String(repeating: " ", count: labelWidth)
    } else {
      text += String(repeating: " ", count: labelWidth - label.count - 2)
    }
    text += helpLines.joined(separator: "\n" + String(repeating: " ", count: labelWidth))
    return text + "\n"
  }

  package static func wrap(_ text: String, width: Int) -> [String] {
    var lines: [String] = []
    var current = ""
    for word in text.split(separator: " ") {
      if !current.isEmpty && current.count + 1 + word.count > width {
        lines.append(current)
        current = String(word)
      } else {
        current += (current.isEmpty ? "" : " ") + word
      }
    }
    if !current.isEmpty { lines.append(current) }
    return lines.isEmpty ? [""] : lines
  }
}
