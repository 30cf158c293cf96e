import CommandLineKit
import Foundation
import Geo
import TripPlanner

/// `trips bounds`: the bounding region of the trips, for map tools.
enum BoundsCommand: Subcommand {
  static let crs = Option<String>(
    name: "crs", valueName: "crs",
    help: "The projected CRS, as PROJ knows it (EPSG:32633, a PROJ string…).",
    defaultDescription: "EPSG:3857"
  ).completing(["EPSG:3857", "EPSG:4326", "EPSG:32633", "EPSG:3035"])
  static let viewport = Option<Viewport>(
    name: "viewport", valueName: "WxH",
    help: "Also fit a map camera to a viewport of this many pixels, such as 800x600.",
    parse: { text in
      guard let parsed = Viewport(text) else {
        throw CLIError.usage(
          "Invalid value '\(terminalSafe(text))' for '--viewport': expected WIDTHxHEIGHT in whole pixels from 1 to \(Viewport.maximumSide) each, such as 800x600."
        )
      }
      return parsed
    })

  static let padding = Option<Int>(
    name: "padding", valueName: "pixels",
    help: "Pixels kept clear on every side when fitting the camera.",
    defaultDescription: "0; 24 with --format svg",
    parse: { try CommonOptions.wholeNumber($0, option: "padding", in: 0...10_000, unit: "pixels") })

  static let withStays = Flag(
    name: "with-stays",
    help:
      "Also cover where one stays on each trip (a stay can be far from the destination); the count then includes the stays."
  )

  static let format = CommonOptions.format(
    [.text, .json, .geojson, .svg], default: .text,
    detail:
      "svg draws the trips and their box on a map, \(svgDefaultSize) unless --viewport says otherwise."
  )

  /// The most trips an SVG draws (the first in date order); the panel says how many.
  static let svgTripLimit = 20_000

  static var spec: CommandSpec {
    CommandSpec(
      name: "bounds",
      abstract: "Reports the smallest box around the trips, its center and projected extent.",
      discussion:
        "The box is the smallest on the globe: it crosses the antimeridian (west > east) when that is smaller.",
      options: CommonOptions.filters + [
        crs, viewport, padding, withStays, format, CommonOptions.store,
      ])
  }

  static func options(_ arguments: ParsedArguments) throws -> (Projection, Viewport?) {
    let viewport = try arguments[viewport]
    let crs = try arguments[crs] ?? "EPSG:3857"
    do {
      return (try Projection(to: crs), viewport)
    } catch let error as GeoError {
      throw CLIError.usage(error.message)
    }
  }

  static let svgDefaultSize = "960x600"

  static func run(_ arguments: ParsedArguments, _ io: TerminalIO) throws {
    let query = try CommonOptions.query(arguments, io)
    let format = try arguments[format] ?? .text
    var (projection, viewport) = try options(arguments)
    let padding = try arguments[padding] ?? (format == .svg ? 24 : 0)
    if format == .svg { viewport = viewport ?? Viewport(svgDefaultSize) }
    let size = viewport
    if let size, padding > 0 {
      guard size.width > Double(2 * padding), size.height > Double(2 * padding) else {
        throw CLIError.usage(
          "Invalid value for '--padding': \(padding) px on each side leaves nothing of \(size).")
      }
      viewport = Viewport(
        width: size.width - Double(2 * padding), height: size.height - Double(2 * padding))
    }
    let stays = arguments[withStays]
    if stays && format == .geojson {
      throw CLIError.usage(
        "'--with-stays' covers stays in a report (text, json, svg); the GeoJSON format lists trips: use 'trips serve' and /collections/stays for the stays as features."
      )
    }
    let store = try CommonOptions.openForReading(arguments, io)
    if format == .geojson {
      let records = try store.records(query)
      try io.out(String(decoding: TripGeoJSON.encode(records), as: UTF8.self))
      return
    }
    // Only the coordinates are read: no trip is made (about 20 times faster at a million).
    var coordinates = try store.coordinates(query)
    let stayCoordinates = stays ? try store.stayCoordinates(query) : []
    coordinates += stayCoordinates
    // Outside Web Mercator, the extent also holds every trip's own projection (one PROJ call
    // per trip), which densified box edges can miss.
    var report = try BoundsReport(
      count: coordinates.count, box: GeographicBox.enclosing(coordinates), projection: projection,
      viewport: viewport,
      points: projection.isWebMercator ? nil : projection.pointCover(coordinates))
    if stays { report.stayCount = stayCoordinates.count }
    if format == .svg, let size {
      var sample = query
      sample.limit = svgTripLimit
      var marks: [BoundsSVG.Mark] = []
      for trip in try store.trips(sample) {
        marks.append(
          BoundsSVG.Mark(
            coordinate: Coordinate(latitude: trip.latitude, longitude: trip.longitude),
            label: trip.name))
        if stays, let stay = trip.livingAccommodation {
          marks.append(
            BoundsSVG.Mark(
              coordinate: Coordinate(latitude: stay.latitude, longitude: stay.longitude),
              label: stay.name))
        }
      }
      let picture = try BoundsSVG(
        report: report, marks: marks, world: WorldOutlines.shipped, size: size,
        padding: Double(padding))
      try io.out(picture.document)
      return
    }
    try io.out(
      format == .json
        ? report.json.rendered(pretty: true) + "\n" : terminalSafeMessage(report.text))
  }
}
