import CommandLineKit
import Foundation
import Persistence
import TripPlanner

/// The options a model's declared fields give a command, so that a field declared on the
/// model is an option of the commands that set it with no other change: `--notes <text>` for
/// a field `notes`, its help the first paragraph of the field's documentation comment, its
/// value read as the field's type reads text (``FormatValue/init(text:)``: `''` is none for
/// an optional field). A command leaves out the fields it spells its own way (`bucket add`'s
/// `--reservation` flag, its 1-based `--at`) and may rename one (`--place-id`).
///
/// Cost: O(fields) to make and to apply.
struct FieldOptions<Model: PersistentModel> where Model.SchemaModel == Model {
  /// Each option with the field it sets.
  let entries: [(field: String, option: Option<JSONValue>)]

  /// The options of `Model`'s fields but its identity and those in `leaving`; `renamed` gives
  /// a field's option another name than its own in kebab case, `required` the fields a
  /// command line must give (with `requiringEveryField`, every field that is not optional).
  init(
    leaving: Set<PartialKeyPath<Model>> = [], renamed: [PartialKeyPath<Model>: String] = [:],
    required: Set<PartialKeyPath<Model>> = [], requiringEveryField: Bool = false
  ) {
    entries = Model.schema.fields.compactMap { field in
      guard !field.isUnique, !leaving.contains(field.keyPath),
        let type = formatType(of: field)
      else { return nil }
      let name = renamed[field.keyPath] ?? Self.kebabCase(field.name)
      let optional = field.isOptional
      let expected = optional ? type.textExpectation + " or '' for none" : type.textExpectation
      var option = Option<JSONValue>(
        name: name, valueName: type.placeholder,
        help: field.documentation.isEmpty ? "The \(field.name)." : field.documentation
      ) { text in
        guard let json = type.json(text: text, optional: optional) else {
          throw CLIError.usage(
            "Invalid value '\(terminalSafe(text))' for '--\(name)': expected \(expected).")
        }
        return json
      }
      if required.contains(field.keyPath) || (requiringEveryField && !field.isOptional) {
        option = option.required
      }
      return (field.name, option)
    }
  }

  /// The options, in the fields' declaration order.
  var options: [any OptionDescriptor] { entries.map(\.option) }

  /// Sets in `values` each field whose option the command line gives; returns whether any was.
  @discardableResult
  func apply(_ arguments: ParsedArguments, to values: inout FieldValues<Model>) throws -> Bool {
    try apply(arguments) { try values.set($0, $1) }
  }

  /// Calls `set` with each field whose option the command line gives and its value; returns
  /// whether any was.
  @discardableResult
  func apply(_ arguments: ParsedArguments, _ set: (String, JSONValue) throws -> Void) throws
    -> Bool
  {
    var any = false
    for (field, option) in entries {
      guard let json = try arguments[option] else { continue }
      try set(field, json)
      any = true
    }
    return any
  }

  /// Whether the command line gives any of the options.
  func anyGiven(in arguments: ParsedArguments) -> Bool {
    entries.contains { arguments.contains($0.option) }
  }

  /// `placeIdentifier` → `place-identifier`.
  static func kebabCase(_ name: String) -> String {
    var text = ""
    for character in name {
      if character.isUppercase {
        text += "-" + character.lowercased()
      } else {
        text.append(character)
      }
    }
    return text
  }
}
