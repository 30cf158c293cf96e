@_spi(PluginMessage) import SwiftCompilerPluginMessageHandling
import SwiftSyntax
import SwiftSyntaxMacros

/// The compiler plugin that expands the persistence layer's macros (`@Model`, `@Transient`,
/// the property macro `@Model` puts on each persisted property, and `@ModelActor`). Built against the SwiftSyntax
/// modules the toolchain ships for its own plugin server, it speaks the compiler's plugin
/// protocol on standard input and output.
@main
struct PersistenceMacrosPlugin {
  static func main() throws {
    let listener = CompilerPluginMessageListener(
      connection: try StandardIOMessageConnection(), provider: Provider())
    try listener.main()
  }
}

/// The macros by the type names their declarations give.
struct Provider: PluginProvider {
  func resolveMacro(moduleName: String, typeName: String) throws -> any Macro.Type {
    switch typeName {
    case "ModelMacro": ModelMacro.self
    case "PersistedPropertyMacro": PersistedPropertyMacro.self
    case "MarkerMacro": MarkerMacro.self
    case "SchemaDeclarationMacro": SchemaDeclarationMacro.self
    case "ModelActorMacro": ModelActorMacro.self
    default: throw PluginError("The plugin PersistenceMacros has no macro named \(typeName).")
    }
  }

  var features: [PluginFeature] { [] }

  func loadPluginLibrary(libraryPath: String, moduleName: String) throws {
    throw PluginError("The plugin PersistenceMacros loads no libraries (asked for \(libraryPath)).")
  }
}

/// An error the plugin reports to the compiler.
struct PluginError: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}
