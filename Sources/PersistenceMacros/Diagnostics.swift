import SwiftDiagnostics
import SwiftSyntax

/// Every error the persistence macros give, by its stable id: the `MessageID` tools see
/// (domain `PersistenceMacros`), and what the tests name each one by. Each has a test with a
/// declaration that earns it.
enum ModelError: String, CaseIterable {
  // The class.
  case notAClass, generic, table, defaultedInitializer, notRequired
  // A property.
  case lazy, severalBindings, constant, observers, underscore, reservedName
  case transientWithoutValue, unorderedNumber
  // An attribute's options.
  case codableType, codableValue, urlValue, originalName
  // `#Unique` and `#Index`.
  case constraintKeyPath, constraintList, uniqueTwice, indexTwice
  // A relationship.
  case relationshipStored, relationshipAttribute, optionalToMany, relationshipType
  case toManyStart, toOneRule, toOneOrder, toOneStart, relationshipOriginalName
  // `@ModelActor`.
  case notAnActor
}

/// A compile-time error of the persistence macros, shown at the declaration it is about: one
/// of the catalogue's (``ModelError``), with its message.
struct ModelDiagnostic: DiagnosticMessage {
  let error: ModelError
  let message: String
  var id: String { error.rawValue }
  var severity: DiagnosticSeverity { .error }
  var diagnosticID: MessageID { MessageID(domain: "PersistenceMacros", id: id) }

  static func error(_ error: ModelError, _ message: String) -> ModelDiagnostic {
    ModelDiagnostic(error: error, message: message)
  }
}

/// A fix-it's message.
struct ModelFixIt: FixItMessage {
  let message: String
  var fixItID: MessageID { MessageID(domain: "PersistenceMacros", id: message) }
}

/// A note beside an error, at a second place it is about (the other constraint of two).
struct ModelNote: NoteMessage {
  let message: String
  var noteID: MessageID { MessageID(domain: "PersistenceMacros", id: "note") }
}
