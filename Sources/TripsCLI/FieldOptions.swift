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
  /// command line must give.
  init(leaving: Set<String> = [], renamed: [String: String] = [:], required: Set<String> = []) {
    entries = Model.schema.fields.compactMap { field in
      guard !field.isUnique, !leaving.contains(field.name),
        let type = formatType(of: field)
      else { return nil }
      let name = renamed[field.name] ?? Self.kebabCase(field.name)
      let optional = field.isOptional
      let expected = optional ? type.expectation + " or '' for none" : type.expectation
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
      if required.contains(field.name) { option = option.required }
      return (field.name, option)
    }
  }

  /// The options, in the fields' declaration order.
  var options: [any OptionDescriptor] { entries.map(\.option) }

  /// Sets in `values` each field whose option the command line gives; returns whether any was.
  @discardableResult
  func apply(_ arguments: ParsedArguments, to values: inout FieldValues<Model>) throws -> Bool {
    var any = false
    for (field, option) in entries {
      guard let json = try arguments[option] else { continue }
      try values.set(field, json)
      any = true
    }
    return any
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
