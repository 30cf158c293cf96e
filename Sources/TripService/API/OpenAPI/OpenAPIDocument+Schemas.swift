import Persistence
import TripPlanner

extension OpenAPIDocument {
  /// The features' schemas (`components.schemas`), each collection's properties written from
  /// its model's declaration (``FieldSchema``): a field added to a model is described in
  /// `/api` with no other change. A trip's feature carries its plan (its bucket list and its
  /// stay, every field of each); a stay's and an item's carry their trip's id. Cost:
  /// O(fields), once per document.
  static var featureSchemas: [(String, JSONValue)] {
    func reference(_ name: String) -> JSONValue {
      .object([("$ref", .string("#/components/schemas/" + name))])
    }
    func feature(_ properties: String, geometry: Bool, input: Bool = false) -> JSONValue {
      let point: JSONValue = .object([
        ("type", .string("object")), ("nullable", .bool(true)),
        (
          "properties",
          .object([
            ("type", .object([("type", .string("string")), ("enum", .array([.string("Point")]))])),
            (
              "coordinates",
              .object([
                ("type", .string("array")), ("items", .object([("type", .string("number"))])),
              ])
            ),
          ])
        ),
      ])
      let required = ["type"] + (input && geometry ? ["geometry"] : []) + ["properties"]
      return .object([
        ("type", .string("object")),
        ("required", .array(required.map(JSONValue.string))),
        (
          "properties",
          .object([
            (
              "type",
              .object([("type", .string("string")), ("enum", .array([.string("Feature")]))])
            ),
            ("id", .object([("type", .string("string")), ("format", .string("uuid"))])),
            (
              "geometry",
              geometry ? point : .object([("type", .string("object")), ("nullable", .bool(true))])
            ),
            ("properties", reference(properties)),
          ])
        ),
      ])
    }
    func collection(_ feature: String) -> JSONValue {
      .object([
        ("type", .string("object")),
        ("required", .array([.string("type"), .string("features")])),
        (
          "properties",
          .object([
            (
              "type",
              .object([
                ("type", .string("string")), ("enum", .array([.string("FeatureCollection")])),
              ])
            ),
            ("features", .object([("type", .string("array")), ("items", reference(feature))])),
            ("numberMatched", .object([("type", .string("integer"))])),
            ("numberReturned", .object([("type", .string("integer"))])),
          ])
        ),
      ])
    }
    let tripID: (String, JSONValue) = (
      "tripId",
      .object([
        ("type", .string("string")), ("format", .string("uuid")),
        ("description", .string("The trip it belongs to.")),
      ])
    )
    let position: Set<String> = ["id", "latitude", "longitude"]
    return [
      ("BucketListItem", FieldSchema.object(BucketListItem.schema.fields)),
      (
        "LivingAccommodation", FieldSchema.object(LivingAccommodation.schema.fields, nullable: true)
      ),
      (
        "TripProperties",
        FieldSchema.object(
          Trip.schema.fields, leaving: position,
          adding: [
            (
              "bucketList",
              .object([("type", .string("array")), ("items", reference("BucketListItem"))])
            ),
            ("livingAccommodation", reference("LivingAccommodation")),
          ])
      ),
      ("TripFeature", feature("TripProperties", geometry: true)),
      ("TripFeatureCollection", collection("TripFeature")),
      (
        "StayProperties",
        FieldSchema.object(LivingAccommodation.schema.fields, leaving: position, adding: [tripID])
      ),
      ("StayFeature", feature("StayProperties", geometry: true)),
      ("StayFeatureCollection", collection("StayFeature")),
      (
        "BucketListItemProperties",
        FieldSchema.object(BucketListItem.schema.fields, leaving: ["id"], adding: [tripID])
      ),
      ("BucketListItemFeature", feature("BucketListItemProperties", geometry: false)),
      ("BucketListItemFeatureCollection", collection("BucketListItemFeature")),
      // What a POST or a PUT must send: required members, nothing unknown, text rules.
      ("BucketListItemInput", FieldSchema.input(BucketListItem.self)),
      ("LivingAccommodationInput", FieldSchema.input(LivingAccommodation.self, nullable: true)),
      (
        "TripPropertiesInput",
        FieldSchema.input(
          Trip.self, leaving: position,
          adding: [
            (
              "bucketList",
              .object([("type", .string("array")), ("items", reference("BucketListItemInput"))])
            ),
            ("livingAccommodation", reference("LivingAccommodationInput")),
          ])
      ),
      ("TripFeatureInput", feature("TripPropertiesInput", geometry: true, input: true)),
      (
        "StayPropertiesInput",
        FieldSchema.input(
          LivingAccommodation.self, leaving: position, adding: [tripID], requiring: ["tripId"])
      ),
      ("StayFeatureInput", feature("StayPropertiesInput", geometry: true, input: true)),
      (
        "BucketListItemPropertiesInput",
        FieldSchema.input(
          BucketListItem.self, leaving: ["id"], adding: [tripID], requiring: ["tripId"])
      ),
      (
        "BucketListItemFeatureInput",
        feature("BucketListItemPropertiesInput", geometry: false, input: true)
      ),
    ]
  }

  /// A GeoJSON response whose body is the schema `name` of ``featureSchemas``.
  static func featureResponse(_ description: String, _ name: String) -> JSONValue {
    .object([
      ("description", .string(description)),
      (
        "content",
        .object([
          (
            FeaturesAPI.geoJSON,
            .object([("schema", .object([("$ref", .string("#/components/schemas/" + name))]))])
          )
        ])
      ),
    ])
  }
}
