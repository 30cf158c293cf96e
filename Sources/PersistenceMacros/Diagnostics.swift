import SwiftDiagnostics
import SwiftSyntax

/// A compile-time error of the persistence macros, shown at the declaration it is about.
struct ModelDiagnostic: DiagnosticMessage {
  let message: String
  let id: String
  var severity: DiagnosticSeverity { .error }
  var diagnosticID: MessageID { MessageID(domain: "PersistenceMacros", id: id) }

  static func error(_ id: String, _ message: String) -> ModelDiagnostic {
    ModelDiagnostic(message: message, id: id)
  }
}

/// A fix-it's message.
struct ModelFixIt: FixItMessage {
  let message: String
  var fixItID: MessageID { MessageID(domain: "PersistenceMacros", id: message) }
}
