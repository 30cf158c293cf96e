// swift-tools-version:6.0
// A service's package that depends on the trip planner by path, as users do, with related
// models of its own: `Tools/client-package.sh` builds it in debug and in release and runs its
// checks on a SQLite file and on a PostgreSQL server.
import PackageDescription

let package = Package(
  name: "ClientPackage",
  platforms: [.macOS(.v15)],
  dependencies: [.package(name: "TripPlanner", path: "../..")],
  targets: [
    .executableTarget(
      name: "client-checks",
      dependencies: [.product(name: "Persistence", package: "TripPlanner")],
      path: "Sources/ClientChecks",
      swiftSettings: [.swiftLanguageMode(.v6)])
  ]
)
