import Foundation
import TripPlanner

// The paths of the vector tiles (OGC API – Tiles).

extension OpenAPIDocument {
  /// The paths of the vector tiles (OGC API – Tiles): the tile matrix sets, the trips'
  /// tilesets, the TileJSON and a tile.
  static func tilePaths() -> [(String, JSONValue)] {
    let json = FeaturesAPI.json
    // The filters of items but bbox (the tile is the box), and f: json for the documents.
    let tileFilters = filters.filter {
      guard case .object(let members) = $0,
        case .string(let name) = members.first(where: { $0.0 == "name" })?.1
      else { return false }
      return !["bbox", "bbox-crs"].contains(name)
    }
    let set: JSONValue = .object([
      ("name", .string("tileMatrixSetId")), ("in", .string("path")), ("required", .bool(true)),
      ("description", .string("The tile matrix set: \(FeaturesAPI.tileMatrixSetID).")),
      (
        "schema",
        .object([
          ("type", .string("string")),
          ("enum", .array([.string(FeaturesAPI.tileMatrixSetID)])),
        ])
      ),
    ])
    func index(_ name: String, _ description: String, maximum: Int) -> JSONValue {
      .object([
        ("name", .string(name)), ("in", .string("path")), ("required", .bool(true)),
        ("description", .string(description)),
        (
          "schema",
          .object([
            ("type", .string("integer")), ("minimum", .number(0)),
            ("maximum", .number(Double(maximum))),
          ])
        ),
      ])
    }
    let tile: JSONValue = .object([
      (
        "description",
        .string(
          "The tile as MVT 2.1 (empty when it holds no trip), with its ETag and OGC-NumberMatched.")
      ),
      (
        "content",
        .object([
          (
            FeaturesAPI.mvt,
            .object([
              ("schema", .object([("type", .string("string")), ("format", .string("binary"))]))
            ])
          )
        ])
      ),
    ])
    let tileFormat = parameter(
      "f", "The format: mvt.",
      schema: .object([("type", .string("string")), ("enum", .array([.string("mvt")]))]))
    return [
      (
        "/tileMatrixSets",
        .object([
          (
            "get",
            operation(
              "The tile matrix sets of the tiles", "getTileMatrixSetsList",
              parameters: [filters.last!],
              ok: ("200", response("The list (WebMercatorQuad).", json)))
          )
        ])
      ),
      (
        "/tileMatrixSets/{tileMatrixSetId}",
        .object([
          (
            "get",
            operation(
              "A tile matrix set's definition (OGC 17-083r4, JSON)", "getTileMatrixSet",
              parameters: [set, filters.last!],
              ok: ("200", response("The definition, tile matrices 0 to 24.", json)))
          )
        ])
      ),
      (
        "/collections/trips/tiles",
        .object([
          (
            "get",
            operation(
              "The trips' vector tilesets", "getCollectionVectorTilesetsList",
              parameters: tileFilters,
              ok: ("200", response("The tilesets (one per tile matrix set).", json)))
          )
        ])
      ),
      (
        "/collections/trips/tiles/{tileMatrixSetId}",
        .object([
          (
            "get",
            operation(
              "The trips' vector tileset: its layers and the template of its tiles (with the filters given)",
              "getCollectionVectorTileSet", parameters: [set] + tileFilters,
              ok: ("200", response("The tileset's metadata.", json)))
          )
        ])
      ),
      (
        "/collections/trips/tiles/{tileMatrixSetId}/tilejson.json",
        .object([
          (
            "get",
            operation(
              "The tileset as TileJSON 3.0.0 (with the filters given in its tiles' template)",
              "getCollectionTileJSON", parameters: [set] + tileFilters,
              ok: ("200", response("The TileJSON.", json)), extra: [notModified])
          )
        ])
      ),
      (
        "/collections/trips/tiles/{tileMatrixSetId}/{tileMatrix}/{tileRow}/{tileCol}",
        .object([
          (
            "get",
            operation(
              "A vector tile of the trips: points, or clusters where there are more than \(TripTile.featureBudget)",
              "getCollectionVectorTile",
              parameters: [
                set, index("tileMatrix", "The zoom level, 0 to 24.", maximum: 24),
                index(
                  "tileRow", "The row, 0 to 2^tileMatrix − 1, from the north.",
                  maximum: (1 << 24) - 1),
                index(
                  "tileCol", "The column, 0 to 2^tileMatrix − 1, from 180° W.",
                  maximum: (1 << 24) - 1),
              ] + tileFilters.dropLast() + [tileFormat],
              ok: ("200", tile), extra: [notModified],
              notAcceptable: "Only a Mapbox Vector Tile can be returned.")
          )
        ])
      ),
    ]
  }
}
