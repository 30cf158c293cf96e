import Foundation

extension Projection {
  /// PROJ string keys whose value names a file (or a grid PROJ opens as one): `+init=FILE:ID`,
  /// `+nadgrids=`, `+geoidgrids=`, the `+grids=` of the grid shifts, `+file=` of `tinshift`,
  /// `+model=` of `defmodel`, and `+xy_grids=`/`+z_grids=` of `deformation`.
  static let fileTakingKeys: Set<String> = [
    "init", "nadgrids", "geoidgrids", "grids", "file", "model", "xy_grids", "z_grids",
  ]

  /// Creates the transformation to a CRS named by someone this process does not trust (a
  /// query parameter of a network request): only forms that make PROJ read nothing but its
  /// own database are accepted.
  ///
  /// - An authority code: `EPSG:3857`, `ESRI:54030`, `IAU_2015:30100`.
  /// - An OGC URN or URI: `urn:ogc:def:crs:EPSG::3857`,
  ///   `http://www.opengis.net/def/crs/EPSG/0/3857`.
  /// - A PROJ string (`+proj=…`) with none of the keys that name a file (`+init`, `+nadgrids`,
  ///   `+geoidgrids`, `+grids`, `+file`, `+model`, `+xy_grids`, `+z_grids`) and no `/` or `\`
  ///   in any value.
  ///
  /// WKT and PROJJSON are refused: both can carry file names (a `PARAMETERFILE`, a grid).
  /// PROJ's network access stays off (its default), so no form reaches the network. The
  /// check is O(length of `crs`) and runs before PROJ sees the text.
  ///
  /// - Throws: ``GeoError/Code/refusedCRS`` for any other form, before PROJ sees it;
  ///   ``GeoError/Code/unknownCRS`` when PROJ does not know an accepted one.
  public convenience init(reference crs: String) throws {
    try Self.checkReference(crs)
    try self.init(to: crs)
  }

  /// Throws ``GeoError/Code/refusedCRS`` unless `crs` is one of the forms
  /// ``init(reference:)`` accepts.
  public static func checkReference(_ crs: String) throws(GeoError) {
    func refuse(_ why: String) -> GeoError {
      GeoError(
        code: .refusedCRS,
        message:
          "\(why) Give a code such as EPSG:3857, a URI such as http://www.opengis.net/def/crs/EPSG/0/3857, or a PROJ string without files."
      )
    }
    guard !crs.isEmpty, crs.utf8.count <= 1000 else {
      throw refuse("A CRS is 1 to 1000 characters long.")
    }
    guard crs.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value < 0x7F }) else {
      throw refuse("A CRS is printable ASCII.")
    }
    if isCode(crs) || isURN(crs) || isURI(crs) { return }
    guard crs.hasPrefix("+") else {
      throw refuse("Only codes, URIs and PROJ strings are accepted here, not WKT or PROJJSON.")
    }
    for word in crs.split(separator: " ", omittingEmptySubsequences: true) {
      guard word.hasPrefix("+") else {
        throw refuse("'\(word)' is not a +key or +key=value of a PROJ string.")
      }
      let parts = word.dropFirst().split(separator: "=", maxSplits: 1)
      let key = parts.first.map { $0.lowercased() } ?? ""
      if fileTakingKeys.contains(key) {
        throw refuse("A PROJ string here may not name a file (+\(key)=).")
      }
      if parts.count == 2, parts[1].contains(where: { $0 == "/" || $0 == "\\" }) {
        throw refuse("A PROJ string here may not name a path (+\(key)=\(parts[1])).")
      }
    }
  }

  /// `AUTHORITY:CODE`: letters, digits and `_` before the colon, then a code without spaces
  /// or path characters.
  private static func isCode(_ text: String) -> Bool {
    let parts = text.split(separator: ":", omittingEmptySubsequences: false)
    guard parts.count == 2 else { return false }
    return isName(parts[0], first: \.isLetter) && isName(parts[1], extra: ".")
  }

  /// `urn:ogc:def:crs:AUTHORITY:VERSION:CODE` (the version may be empty).
  private static func isURN(_ text: String) -> Bool {
    let parts = text.split(separator: ":", omittingEmptySubsequences: false)
    guard parts.count == 7, parts[0...3].map({ $0.lowercased() }) == ["urn", "ogc", "def", "crs"]
    else { return false }
    return isName(parts[4], first: \.isLetter) && (parts[5].isEmpty || isName(parts[5], extra: "."))
      && isName(parts[6], extra: ".")
  }

  /// `http(s)://www.opengis.net/def/crs/AUTHORITY/VERSION/CODE`.
  private static func isURI(_ text: String) -> Bool {
    let lower = text.lowercased()
    let prefix = ["http://www.opengis.net/def/crs/", "https://www.opengis.net/def/crs/"].first {
      lower.hasPrefix($0)
    }
    guard let prefix else { return false }
    let parts = text.dropFirst(prefix.count).split(separator: "/", omittingEmptySubsequences: false)
    guard parts.count == 3 else { return false }
    return isName(parts[0], first: \.isLetter) && isName(parts[1], extra: ".")
      && isName(parts[2], extra: ".")
  }

  private static func isName(
    _ text: Substring, first: (Character) -> Bool = { _ in true }, extra: String = ""
  ) -> Bool {
    guard let head = text.first, first(head) else { return false }
    return text.allSatisfy {
      $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || extra.contains($0))
    }
  }
}
