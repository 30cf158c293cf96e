import Foundation
import Testing

#if canImport(FoundationXML)
  import FoundationXML
#endif

/// The elements of an SVG document: name, attributes and the text directly inside.
final class SVGElements: NSObject, XMLParserDelegate {
  struct Element {
    var name: String
    var attributes: [String: String]
    var text = ""
    var parent: String?
  }
  var elements: [Element] = []
  private var open: [Int] = []

  static func parse(_ text: String) throws -> [Element] {
    let parser = XMLParser(data: Data(text.utf8))
    let collector = SVGElements()
    parser.delegate = collector
    guard parser.parse() else {
      throw CocoaError(.fileReadCorruptFile, userInfo: ["reason": "\(parser.parserError as Any)"])
    }
    return collector.elements
  }

  func parser(
    _ parser: XMLParser, didStartElement name: String, namespaceURI: String?,
    qualifiedName: String?, attributes: [String: String] = [:]
  ) {
    elements.append(
      Element(name: name, attributes: attributes, parent: open.last.map { elements[$0].name }))
    open.append(elements.count - 1)
  }

  func parser(_ parser: XMLParser, foundCharacters string: String) {
    if let index = open.last { elements[index].text += string }
  }

  func parser(
    _ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?
  ) {
    open.removeLast()
  }
}

@Suite("trips bounds --format svg")
struct BoundsSVGTests {
  func number(_ element: SVGElements.Element, _ name: String) -> Double {
    Double(element.attributes[name] ?? "") ?? .nan
  }

  @Test("draws one box the short way across the antimeridian, every trip inside it, with names")
  func antimeridian() throws {
    let scratch = Scratch()
    let places: [(String, Double, Double)] = [
      ("Suva <&> \"quoted\"", -18.1, 178.4), ("Apia", -13.8, -171.8), ("Nadi", -17.8, 177.4),
      ("Nuku'alofa", -21.1, -175.2),
    ]
    for (name, latitude, longitude) in places {
      let run = try trips(
        [
          "add", "--name", name, "--destination", "Pacific", "--start", "2027-01-01", "--end",
          "2027-01-02", "--latitude", String(latitude), "--longitude", String(longitude),
        ], store: scratch.store)
      #expect(run.status == 0, "\(run.stderr)")
    }
    let run = try trips(
      ["bounds", "--format", "svg", "--viewport", "800x500", "--padding", "30"],
      store: scratch.store)
    #expect(run.status == 0, "\(run.stderr)")
    let elements = try SVGElements.parse(run.stdout)
    let root = try #require(elements.first)
    #expect(root.name == "svg" && root.attributes["width"] == "800")
    let boxes = elements.filter { $0.name == "rect" && $0.attributes["class"] == "box" }
    #expect(boxes.count == 1)
    let box = try #require(boxes.first)
    let (x, y) = (number(box, "x"), number(box, "y"))
    let (width, height) = (number(box, "width"), number(box, "height"))
    // Fitted with the padding: the box touches the padded frame on one axis.
    #expect(x >= 29 && y >= 29 && x + width <= 771 && y + height <= 471)
    #expect(abs(x - 30) < 1.5 || abs(y - 30) < 1.5)
    let circles = elements.filter { $0.name == "circle" }
    #expect(circles.count == places.count)
    for circle in circles {
      let (cx, cy) = (number(circle, "cx"), number(circle, "cy"))
      #expect(cx >= x - 0.2 && cx <= x + width + 0.2 && cy >= y - 0.2 && cy <= y + height + 0.2)
    }
    let titles = Set(elements.filter { $0.name == "title" && $0.parent == "circle" }.map(\.text))
    #expect(titles == Set(places.map(\.0)))
    let labels = Set(elements.filter { $0.name == "text" && $0.parent == "g" }.map(\.text))
    #expect(labels.isSuperset(of: places.map(\.0)))
    // The panel names the box in its three dialects.
    let panel = elements.filter { $0.name == "text" }.map(\.text).joined(separator: "\n")
    #expect(panel.contains("4 trips"))
    #expect(
      panel.contains(
        "CRS84 box [177.40000, -21.10000, -171.80000, -13.80000] (crosses the antimeridian)"))
    #expect(panel.contains("EPSG:3857 x"))
    #expect(panel.contains("camera latitude"))
    // The world is drawn from the shipped outlines: Fiji is there, with its name.
    #expect(elements.contains { $0.name == "title" && $0.parent == "path" && $0.text == "Fiji" })
  }

  @Test("draws the whole world and no box for an empty store")
  func empty() throws {
    let scratch = Scratch()
    let run = try trips(["bounds", "--format", "svg"], store: scratch.store)
    #expect(run.status == 0, "\(run.stderr)")
    let elements = try SVGElements.parse(run.stdout)
    #expect(elements.first?.attributes["width"] == "960")
    #expect(!elements.contains { $0.attributes["class"] == "box" })
    #expect(elements.first { $0.name == "title" }?.text == "No trips")
    #expect(elements.filter { $0.name == "path" }.count > 150)
  }

  @Test(
    "refuses bad padding, viewports and formats with one clear line",
    arguments: [
      (
        ["--padding", "-1"],
        "Error: Invalid value '-1' for '--padding': expected whole pixels from 0 to 10000."
      ),
      (
        ["--padding", "12px"],
        "Error: Invalid value '12px' for '--padding': expected whole pixels from 0 to 10000."
      ),
      (
        ["--padding", "400"],
        "Error: Invalid value for '--padding': 400 px on each side leaves nothing of 960x600."
      ),
      (
        ["--viewport", "0x10"],
        "Error: Invalid value '0x10' for '--viewport': expected WIDTHxHEIGHT in whole pixels from 1 to 100000 each, such as 800x600."
      ),
      (
        ["--format", "png"],
        "Error: Invalid value 'png' for '--format': expected text, json, geojson or svg."
      ),
    ])
  func garbage(arguments: [String], message: String) throws {
    let scratch = Scratch()
    let format = arguments.contains("--format") ? [] : ["--format", "svg"]
    let run = try trips(["bounds"] + format + arguments, store: scratch.store)
    #expect(run.status == 64)
    #expect(run.stdout.isEmpty)
    #expect(run.stderr.hasPrefix(message + "\n"), "\(run.stderr)")
  }
}
