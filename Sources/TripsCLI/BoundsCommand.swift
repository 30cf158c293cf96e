import Foundation
import Geo
import TripPlanner

/// `trips bounds`: the bounding region of the trips, for map tools.
enum BoundsCommand: Subcommand {
  static let crs = OptionSpec(
    name: "crs", valueName: "crs",
    help: "The projected CRS, as PROJ knows it (EPSG:32633, a PROJ string…).",
    defaultDescription: "EPSG:3857")
  static let viewport = OptionSpec(
    name: "viewport", valueName: "WxH",
    help: "Also fit a map camera to a viewport of this many pixels, such as 800x600.")

  static var spec: CommandSpec {
    CommandSpec(
      name: "bounds",
      abstract: "Reports the smallest box around the trips, its center and projected extent.",
      discussion:
        "The box is the smallest on the globe: it crosses the antimeridian (west > east) when that is smaller.",
      options: CommonOptions.filters + [
        crs, viewport,
        OptionSpec(
          name: "format", valueName: "format", help: "text, json or geojson.",
          defaultDescription: "text"),
        CommonOptions.store,
      ])
  }

  static func options(_ arguments: ParsedArguments) throws -> (Projection, Viewport?) {
    var viewport: Viewport?
    if let text = arguments.value("viewport") {
      guard let parsed = Viewport(text) else {
        throw CLIError.usage(
          "Invalid value '\(terminalSafe(text))' for '--viewport': expected WIDTHxHEIGHT in whole pixels from 1 to \(Viewport.maximumSide) each, such as 800x600."
        )
      }
      viewport = parsed
    }
    let crs = arguments.value("crs") ?? "EPSG:3857"
    do {
      return (try Projection(to: crs), viewport)
    } catch let error as GeoError {
      throw CLIError.usage(error.message)
    }
  }

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let query = try CommonOptions.query(arguments, io)
    let format = arguments.value("format") ?? "text"
    guard ["text", "json", "geojson"].contains(format) else {
      throw CLIError.usage(
        "Invalid value '\(format)' for '--format': expected text, json or geojson.")
    }
    let (projection, viewport) = try options(arguments)
    let store = try CommonOptions.openForReading(arguments, io)
    if format == "geojson" {
      let records = try store.trips(query).map(\.record)
      try io.out(String(decoding: TripGeoJSON.encode(records), as: UTF8.self))
      return
    }
    // Only the coordinates are read: no trip is made (about 20 times faster at a million).
    let coordinates = try store.coordinates(query)
    // Outside Web Mercator, the extent also holds every trip's own projection (one PROJ call
    // per trip), which densified box edges can miss.
    let report = try BoundsReport(
      count: coordinates.count, box: GeographicBox.enclosing(coordinates), projection: projection,
      viewport: viewport,
      points: projection.isWebMercator ? nil : projection.pointCover(coordinates))
    try io.out(
      format == "json"
        ? report.json.rendered(pretty: true) + "\n" : terminalSafeMessage(report.text))
  }
}
