// swift-tools-version:6.2
import CompilerPluginSupport
import Foundation
import PackageDescription

/// Where the toolchain keeps the SwiftSyntax modules of its own plugin server
/// (`<toolchain>/usr/lib/swift/host`), which the macros are built against: the directory
/// `SWIFT_HOST_LIBRARIES` names, else the one beside the `swift` found on `PATH`.
func swiftHostLibraries() -> String {
  let environment = ProcessInfo.processInfo.environment
  let manager = FileManager.default
  func holdsSwiftSyntax(_ directory: String) -> Bool {
    manager.fileExists(atPath: directory + "/SwiftSyntax.swiftmodule")
  }
  if let given = environment["SWIFT_HOST_LIBRARIES"] {
    guard holdsSwiftSyntax(given) else {
      fatalError(
        "SWIFT_HOST_LIBRARIES is \(given), which holds no SwiftSyntax.swiftmodule: set it to <toolchain>/usr/lib/swift/host."
      )
    }
    return given
  }
  for directory in (environment["PATH"] ?? "").split(separator: ":") {
    let swift = URL(fileURLWithPath: String(directory)).appendingPathComponent("swift")
    guard manager.isExecutableFile(atPath: swift.path) else { continue }
    let host = swift.resolvingSymlinksInPath().deletingLastPathComponent()
      .deletingLastPathComponent().appendingPathComponent("lib/swift/host").path
    if holdsSwiftSyntax(host) { return host }
  }
  fatalError(
    "The persistence macros are built against the SwiftSyntax modules of the toolchain (<toolchain>/usr/lib/swift/host), and none was found beside a swift on PATH: put the toolchain's usr/bin on PATH, or set SWIFT_HOST_LIBRARIES to that directory."
  )
}

let swiftHost = swiftHostLibraries()

/// The toolchain's own SwiftSyntax libraries, as the macro plugin and its in-process tests link
/// them (from `swiftHost`, found again at run time through the rpath).
let hostSwiftSyntax: [LinkerSetting] =
  [.unsafeFlags(["-L", swiftHost, "-Xlinker", "-rpath", "-Xlinker", swiftHost])]
  + [
    "SwiftSyntax", "SwiftSyntaxMacros", "SwiftSyntaxBuilder", "SwiftDiagnostics", "SwiftParser",
    "SwiftBasicFormat", "SwiftOperators", "SwiftSyntaxMacroExpansion",
  ].map { .linkedLibrary($0) }

let swiftSettings: [SwiftSetting] = [
  .swiftLanguageMode(.v6)
]

let package = Package(
  name: "TripPlanner",
  platforms: [.macOS(.v15)],
  products: [
    .library(name: "Persistence", targets: ["Persistence"]),
    .library(name: "PersistenceCore", targets: ["PersistenceCore"]),
    .library(name: "PersistencePostgreSQL", targets: ["PersistencePostgreSQL"]),
    .library(name: "Geo", targets: ["Geo"]),
    .library(name: "CQL2", targets: ["CQL2"]),
    .library(name: "TripPlanner", targets: ["TripPlanner"]),
    .library(name: "TripService", targets: ["TripService"]),
    .executable(name: "trips", targets: ["trips"]),
  ],
  targets: [
    .systemLibrary(
      name: "CSQLite",
      pkgConfig: "sqlite3",
      providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]
    ),
    .systemLibrary(
      name: "CLibPQ",
      pkgConfig: "libpq",
      providers: [.apt(["libpq-dev"]), .brew(["libpq"])]
    ),
    .systemLibrary(
      name: "CProj",
      pkgConfig: "proj",
      providers: [.apt(["libproj-dev"]), .brew(["proj"])]
    ),
    .systemLibrary(
      name: "CMicroHTTPD",
      pkgConfig: "libmicrohttpd",
      providers: [.apt(["libmicrohttpd-dev"]), .brew(["libmicrohttpd"])]
    ),
    // The engine-neutral persistence core (schema, contexts, history, observers, the SQL
    // builder, the StoreEngine protocol), the SQLite engine, and `Persistence`, which is both
    // with SQLite as the default engine (as swift-nio's NIOCore, NIOPosix and NIO).
    // The compiler plugin behind `@Model`, `@Transient` and the property macro `@Model`
    // writes, on the toolchain's own SwiftSyntax (the swift-syntax package cannot be fetched
    // here, and the toolchain's modules are the ones its compiler speaks to).
    // The store's native value types by name: one list for the macro and the store.
    .target(name: "PersistenceNativeTypes", swiftSettings: swiftSettings),
    .macro(
      name: "PersistenceMacros",
      dependencies: ["PersistenceNativeTypes"],
      swiftSettings: swiftSettings + [.unsafeFlags(["-I", swiftHost])],
      linkerSettings: hostSwiftSyntax + [.linkedLibrary("SwiftCompilerPluginMessageHandling")]
    ),
    .target(
      name: "PersistenceCore",
      dependencies: ["PersistenceMacros", "PersistenceNativeTypes"],
      swiftSettings: swiftSettings
    ),
    .target(
      name: "PersistenceSQLite",
      dependencies: ["PersistenceCore", "CSQLite"],
      swiftSettings: swiftSettings
    ),
    // The PostgreSQL engine (libpq), for stores several processes on several machines share.
    .target(
      name: "PersistencePostgreSQL",
      dependencies: ["PersistenceCore", "CLibPQ"],
      swiftSettings: swiftSettings
    ),
    .target(
      name: "Persistence",
      dependencies: ["PersistenceCore", "PersistenceSQLite", "PersistencePostgreSQL"],
      swiftSettings: swiftSettings
    ),
    .target(
      name: "Geo",
      dependencies: ["CProj"],
      swiftSettings: swiftSettings
    ),
    // OGC's Common Query Language (CQL2 Text and JSON) parsed to one tree; no store, no model.
    .target(
      name: "CQL2",
      swiftSettings: swiftSettings
    ),
    .target(
      name: "TripPlanner",
      dependencies: ["Persistence", "Geo", "CQL2"],
      swiftSettings: swiftSettings
    ),
    .target(
      name: "TripService",
      dependencies: ["TripPlanner", "Geo", "Persistence", "CQL2", "CMicroHTTPD"],
      swiftSettings: swiftSettings
    ),
    // The command-line parser and help of `trips`, `trips-generate` and `trips-bench`
    // (swift-argument-parser's conventions; that package cannot be fetched here).
    .target(
      name: "CommandLineKit",
      swiftSettings: swiftSettings
    ),
    .target(
      name: "TripsCLI",
      dependencies: ["CommandLineKit", "TripService", "TripPlanner", "Geo", "Persistence"],
      swiftSettings: swiftSettings
    ),
    .executableTarget(
      name: "trips",
      dependencies: ["TripsCLI"],
      swiftSettings: swiftSettings
    ),
    .target(
      name: "TripsSynthetic",
      dependencies: ["TripPlanner"],
      path: "Tools/TripsSynthetic",
      swiftSettings: swiftSettings
    ),
    .executableTarget(
      name: "trips-generate",
      dependencies: ["CommandLineKit", "TripPlanner", "TripsSynthetic"],
      path: "Tools/TripsGenerator",
      swiftSettings: swiftSettings
    ),
    .target(
      name: "TripsBaseline",
      path: "Tools/CBaseline",
      linkerSettings: [.linkedLibrary("sqlite3"), .linkedLibrary("pq"), .linkedLibrary("m")]
    ),
    .executableTarget(
      name: "trips-bench",
      dependencies: [
        "CommandLineKit", "TripPlanner", "TripService", "TripsSynthetic", "TripsBaseline",
        "Persistence", "Geo",
      ],
      path: "Tools/Benchmarks/Sources",
      swiftSettings: swiftSettings
    ),
    .target(
      name: "TestSupport",
      dependencies: ["PersistenceCore"],
      path: "Tests/TestSupport",
      swiftSettings: swiftSettings
    ),
    .testTarget(
      name: "PersistenceTests",
      dependencies: [
        "Persistence", "PersistenceCore", "PersistenceSQLite", "PersistencePostgreSQL",
        "TestSupport", "CLibPQ",
      ],
      swiftSettings: swiftSettings
    ),
    // The macros expanded in process (SwiftSyntaxMacroExpansion, from the toolchain's host
    // folder as the plugin's own modules): golden expansions and each diagnostic by its id.
    .testTarget(
      name: "PersistenceMacrosTests",
      dependencies: ["PersistenceMacros"],
      resources: [.copy("Expansions")],
      swiftSettings: swiftSettings + [.unsafeFlags(["-I", swiftHost])],
      // SwiftIDEUtils' FixItApplier applies the macros' fix-its.
      linkerSettings: hostSwiftSyntax + [.linkedLibrary("SwiftIDEUtils")]
    ),
    .testTarget(
      name: "GeoTests",
      dependencies: ["Geo", "TestSupport"],
      swiftSettings: swiftSettings
    ),
    .testTarget(
      name: "TripPlannerTests",
      dependencies: ["TripPlanner", "TestSupport", "PersistenceSQLite", "CQL2"],
      swiftSettings: swiftSettings
    ),
    // Every ```swift block of README.md and the DocC articles, made by Tools/examples.sh:
    // compiled by `swift test`, so no example can drift from the API.
    .testTarget(
      name: "ExamplesTests",
      dependencies: ["TripPlanner", "TripService", "Persistence", "Geo", "CQL2"],
      swiftSettings: swiftSettings
    ),
    .testTarget(
      name: "TripsCLITests",
      dependencies: [
        "TripsCLI", "TripService", "TripPlanner", "Persistence", "PersistenceCore",
        "PersistenceSQLite",
        "Geo", "TestSupport", "trips",
        "trips-generate", "trips-bench",
      ],
      swiftSettings: swiftSettings
    ),
  ]
)
