import Foundation

extension TripJSON {
  /// One bucket-list item as a JSON object:
  /// `{"id","title","details","hasReservation","isInPlan","position"}`.
  public static func object(_ record: BucketListItemRecord) -> JSONValue {
    .object([
      ("id", record.id.map { .string($0.lowercasedString) } ?? .null),
      ("title", .string(record.title)),
      ("details", .string(record.details)),
      ("hasReservation", .bool(record.hasReservation)),
      ("isInPlan", .bool(record.isInPlan)),
      ("position", .number(Double(record.position))),
    ])
  }

  /// One stay as a JSON object:
  /// `{"id","name","address","latitude","longitude","placeIdentifier"}`.
  public static func object(_ record: LivingAccommodationRecord) -> JSONValue {
    .object([
      ("id", record.id.map { .string($0.lowercasedString) } ?? .null),
      ("name", .string(record.name)),
      ("address", .string(record.address)),
      ("latitude", .number(record.latitude)),
      ("longitude", .number(record.longitude)),
      ("placeIdentifier", record.placeIdentifier.map(JSONValue.string) ?? .null),
    ])
  }
}
