import Foundation

/// The model types a container stores, and the version of their declarations: SwiftData's
/// `Schema`, as Xcode's template writes it.
///
/// ```swift
/// let schema = Schema([Trip.self])
/// let configuration = ModelConfiguration(schema: schema, isStoredInMemoryOnly: false)
/// let container = try ModelContainer(for: schema, configurations: [configuration])
/// ```
///
/// A container for a schema stores its types and every type their relationships reach
/// (``ModelContainer/schema`` lists them all). Two schemas are equal when they list the same
/// types, in any order, at the same version. ``entities`` describes each model as SwiftData's
/// `Schema.Entity` does: its attributes (``Attribute``), relationships (``Relationship``),
/// unique constraints and indexes.
public final class Schema: Sendable, Hashable, CustomStringConvertible {
  /// A schema's version: major, minor and patch, compared in that order.
  public struct Version: Codable, Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The major version.
    public let major: Int
    /// The minor version.
    public let minor: Int
    /// The patch version.
    public let patch: Int

    /// The version `major.minor.patch`.
    public init(_ major: Int, _ minor: Int, _ patch: Int) {
      self.major = major
      self.minor = minor
      self.patch = patch
    }

    /// Whether `lhs` comes before `rhs`: by major, then minor, then patch.
    public static func < (lhs: Version, rhs: Version) -> Bool {
      (lhs.major, lhs.minor, lhs.patch) < (rhs.major, rhs.minor, rhs.patch)
    }

    /// `1.0.0`.
    public var description: String { "\(major).\(minor).\(patch)" }
  }

  /// The version of the declarations.
  public let version: Version
  /// The model types, in the order given, each once.
  let types: [any PersistentModel.Type]

  /// A schema of `types` at `version`.
  public init(_ types: [any PersistentModel.Type], version: Version = Version(1, 0, 0)) {
    var seen = Set<ObjectIdentifier>()
    self.types = types.filter { seen.insert(ObjectIdentifier($0)).inserted }
    self.version = version
  }

  /// A schema of the models `entities` describe, at `version`: SwiftData's
  /// `init(_ entities:version:)`. An entity here is always one of a model type (taken from
  /// another schema's ``entities``), so the schema lists those types; entities are not built
  /// by hand, as SwiftData's `Schema.Entity(_ name:)` builds them for Core Data's stores.
  public convenience init(_ entities: Entity..., version: Version = Version(1, 0, 0)) {
    self.init(entities.map(\.modelType), version: version)
  }

  /// A schema of no types, at version 1.0.0.
  public convenience init() { self.init([]) }

  /// The names of the schema's tables (a root model's, which its subclasses share), sorted,
  /// each once.
  public var entityNames: [String] {
    func name<Model: PersistentModel>(_: Model.Type) -> String { Model.modelSchema.name }
    return Set(types.map { name($0) }).sorted()
  }

  /// `Schema(1.0.0: Trip, BucketListItem)`.
  public var description: String {
    "Schema(\(version): \(types.map { "\($0)" }.joined(separator: ", ")))"
  }

  /// Whether both list the same types (in any order) at the same version.
  public static func == (lhs: Schema, rhs: Schema) -> Bool {
    lhs.version == rhs.version && lhs.typeSet == rhs.typeSet
  }

  /// Hashes the version and the set of types.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(version)
    hasher.combine(typeSet)
  }

  private var typeSet: Set<ObjectIdentifier> { Set(types.map { ObjectIdentifier($0) }) }
}
