import Foundation
import Synchronization
import TripPlanner

/// The map page (`GET /map`) and what it loads: a Leaflet map of the trips that follows the
/// bounds and items streams, drawn over the shipped Natural Earth outlines, with no tile
/// server and no internet. Leaflet itself comes from Debian's `libjs-leaflet`, served from
/// its installed folder by a fixed list of names (no request path ever names a file).
///
/// The page opens the items stream before it reads the trips, so that no change falls between
/// the two; events are applied by id and so are idempotent. Each bounds event redraws the box
/// (one rectangle, unwrapped around its centre, so a box across 180° is drawn the short way),
/// moves every point to the copy of the world nearest the box's centre, and fits the camera
/// with the padding. Cost on the page: O(trips) per bounds event, O(1) per item event.
///
/// For tests and tools the page keeps its state as JSON in `#state`: how many points, the
/// box as received and as drawn, when it last changed (`Date.now()`), and every error seen.
enum MapPage {
  /// Where Debian's `libjs-leaflet` installs Leaflet.
  static let leafletFolder = "/usr/share/javascript/leaflet"
  /// The files under `/map/` and where each comes from.
  static let assets: [String: (type: String, source: Source)] = [
    "leaflet.js": ("text/javascript; charset=utf-8", .leaflet("leaflet.js")),
    "leaflet.css": ("text/css; charset=utf-8", .leaflet("leaflet.css")),
    "map.js": ("text/javascript; charset=utf-8", .text(script)),
    "world.geojson": ("application/geo+json", .world),
  ]

  enum Source {
    case leaflet(String)
    case text(String)
    case world
  }

  /// `GET /map` or `GET /map/NAME`.
  static func respond(asset: String?) throws -> HTTPResponse {
    guard let asset else {
      return HTTPResponse(
        status: 200,
        headers: [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-cache")],
        body: Data(html.utf8))
    }
    // `/map/`: the page's links are relative to `/map`, so it is sent there (308).
    if asset.isEmpty {
      return HTTPResponse(
        status: 308, headers: [("Location", "/map"), ("Content-Type", "text/plain")],
        body: Data("The map page is at /map.\n".utf8))
    }
    guard let (type, source) = assets[asset] else {
      throw ServiceError.request(
        404,
        "There is nothing at /map/\(HTTPServer.loggable(asset)); the map page is at /map.")
    }
    let body: Data
    switch source {
    case .text(let text):
      body = Data(text.utf8)
    case .world:
      guard let data = WorldOutlines.shippedGeoJSON else {
        throw ServiceError.request(
          404,
          "The world outlines (Data/world-110m.geojson) were not found; set TRIPS_DATA to the folder that holds them."
        )
      }
      body = data
    case .leaflet(let name):
      guard let data = leaflet(name) else {
        throw ServiceError.request(
          404,
          "Leaflet is not installed on this server: install Debian's libjs-leaflet (\(leafletFolder)/\(name))."
        )
      }
      body = data
    }
    return HTTPResponse(
      status: 200, headers: [("Content-Type", type), ("Cache-Control", "max-age=3600")],
      body: body)
  }

  /// Leaflet's files, each read the first time it is found (an install after the server
  /// started is seen by the next request), not on every request.
  private static let leafletFiles = Mutex<[String: Data]>([:])

  static func leaflet(_ name: String) -> Data? {
    if let data = leafletFiles.withLock({ $0[name] }) { return data }
    guard let data = FileManager.default.contents(atPath: leafletFolder + "/" + name) else {
      return nil
    }
    leafletFiles.withLock { $0[name] = data }
    return data
  }

  static let html = """
    <!DOCTYPE html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>Trips</title>
    <link rel="icon" href="data:,">
    <link rel="stylesheet" href="map/leaflet.css">
    <style>
    html, body { margin: 0; height: 100%; }
    #map { position: absolute; inset: 0; background: #dbe9f4; }
    #panel { position: absolute; top: 10px; right: 10px; z-index: 1000; max-width: 32em;
      background: rgba(255, 255, 255, 0.92); padding: 8px 12px; border-radius: 4px;
      font: 13px/1.45 sans-serif; box-shadow: 0 1px 4px rgba(0, 0, 0, 0.3); }
    #panel code { font-size: 12px; }
    #state { display: none; }
    </style>
    </head>
    <body>
    <div id="map"></div>
    <div id="panel"><b id="count">…</b><br>
    RFC 7946 <code id="rfc7946">–</code><br>
    unwrapped <code id="unwrapped">–</code><br>
    non-wrapping <code id="nonWrapping">–</code><br>
    <span id="camera"></span></div>
    <pre id="state">{}</pre>
    <script src="map/leaflet.js"></script>
    <script src="map/map.js"></script>
    </body>
    </html>

    """

  static let script = #"""
    (function () {
      "use strict";
      const state = { ready: false, markers: 0, stays: 0, boundsEvents: 0, itemEvents: 0,
        box: null, drawn: null, changedAt: 0, errors: [] };
      const stateElement = document.getElementById("state");
      let map = null;
      let box = null;
      const markers = new Map();
      // The box and the points as drawn, in the page's pixels, for tests and tools.
      function measure() {
        if (!map || !box) { state.pixels = null; state.inside = 0; return; }
        const b = box.getBounds();
        const a = map.latLngToContainerPoint(b.getNorthWest());
        const c = map.latLngToContainerPoint(b.getSouthEast());
        state.pixels = { left: a.x, top: a.y, right: c.x, bottom: c.y,
          width: map.getSize().x, height: map.getSize().y };
        state.inside = 0;
        markers.forEach(function (entry) {
          const p = map.latLngToContainerPoint(entry.marker.getLatLng());
          if (p.x >= a.x - 0.5 && p.x <= c.x + 0.5 && p.y >= a.y - 0.5 && p.y <= c.y + 0.5) {
            state.inside += 1;
          }
        });
      }
      function publish() { measure(); stateElement.textContent = JSON.stringify(state); }
      function fail(message) { state.errors.push(String(message)); publish(); }
      window.addEventListener("error", function (event) { fail(event.message); });
      window.addEventListener("unhandledrejection", function (event) { fail(event.reason); });
      if (typeof L === "undefined") {
        document.getElementById("map").textContent =
          "Leaflet is not installed on the server (Debian's libjs-leaflet).";
        fail("Leaflet is missing");
        return;
      }
      const padding = 24;
      map = L.map("map", { zoomSnap: 0, minZoom: 0, maxZoom: 18, preferCanvas: true });
      map.attributionControl.setPrefix(false);
      map.attributionControl.addAttribution("Outlines: Natural Earth");
      map.createPane("world").style.zIndex = 250;
      map.setView([20, 0], 1);
      // Longitudes are drawn within 180° of this one: the centre of the current box.
      let center = 0;
      function unwrap(longitude) {
        return center + ((((longitude - center) % 360) + 540) % 360) - 180;
      }
      fetch("map/world.geojson").then(function (response) {
        if (!response.ok) { throw new Error("world outlines: HTTP " + response.status); }
        return response.json();
      }).then(function (world) {
        [-360, 0, 360].forEach(function (shift) {
          L.geoJSON(world, {
            pane: "world", interactive: false,
            coordsToLatLng: function (c) { return L.latLng(c[1], c[0] + shift); },
            style: { color: "#9a9a9a", weight: 0.6, fillColor: "#f4f1e8", fillOpacity: 1 }
          }).addTo(map);
        });
      }).catch(fail);

      function place(entry) {
        entry.marker.setLatLng([entry.latitude, unwrap(entry.longitude)]);
        if (entry.stay) {
          const longitude = unwrap(entry.stay.longitude);
          entry.stay.marker.setLatLng([entry.stay.latitude, longitude]);
          entry.stay.line.setLatLngs([[entry.latitude, unwrap(entry.longitude)],
            [entry.stay.latitude, longitude]]);
        }
      }
      // A trip's stay (its feature's livingAccommodation): a small orange mark, joined to
      // the trip by a thin line; removed with the trip or when the stay is cleared.
      function setStay(entry, stay) {
        if (!stay) {
          if (entry.stay) { entry.stay.marker.remove(); entry.stay.line.remove(); entry.stay = null; }
          return;
        }
        if (!entry.stay) {
          entry.stay = {
            marker: L.circleMarker([0, 0], { radius: 3.5, color: "#ffffff", weight: 1,
              fillColor: "#f08c00", fillOpacity: 1 }).addTo(map),
            line: L.polyline([[0, 0], [0, 0]], { color: "#f08c00", weight: 1, opacity: 0.7,
              interactive: false }).addTo(map)
          };
        }
        entry.stay.latitude = stay.latitude;
        entry.stay.longitude = stay.longitude;
        entry.stay.marker.unbindTooltip().bindTooltip(stay.name);
      }
      function countStays() {
        let count = 0;
        markers.forEach(function (entry) { if (entry.stay) { count += 1; } });
        state.stays = count;
      }
      function upsert(feature) {
        const id = feature.id;
        const [longitude, latitude] = feature.geometry.coordinates;
        let entry = markers.get(id);
        if (!entry) {
          entry = { marker: L.circleMarker([0, 0], { radius: 5, color: "#ffffff", weight: 1,
            fillColor: "#1c7ed6", fillOpacity: 1 }).addTo(map) };
          markers.set(id, entry);
        }
        entry.latitude = latitude;
        entry.longitude = longitude;
        entry.marker.unbindTooltip().bindTooltip(feature.properties.name);
        setStay(entry, feature.properties.livingAccommodation);
        place(entry);
        state.markers = markers.size;
        countStays();
      }
      function remove(id) {
        const entry = markers.get(id);
        if (entry) { setStay(entry, null); entry.marker.remove(); markers.delete(id); }
        state.markers = markers.size;
        countStays();
      }

      // The items stream first, then the trips: a change in between is not lost.
      const gone = new Set();
      const items = new EventSource("collections/trips/items/stream");
      function onItem(handler) {
        return function (event) { state.itemEvents += 1; handler(JSON.parse(event.data)); publish(); };
      }
      items.addEventListener("insert", onItem(upsert));
      items.addEventListener("update", onItem(upsert));
      items.addEventListener("delete", onItem(function (data) { gone.add(data.id); remove(data.id); }));
      items.addEventListener("reset", onItem(function (data) {
        Array.from(markers.keys()).forEach(remove);
        data.features.forEach(upsert);
      }));
      function load(url) {
        return fetch(url).then(function (response) {
          if (!response.ok) { throw new Error("trips: HTTP " + response.status); }
          return response.json();
        }).then(function (page) {
          page.features.forEach(function (feature) {
            if (!gone.has(feature.id) && !markers.has(feature.id)) { upsert(feature); }
          });
          const next = (page.links || []).find(function (link) { return link.rel === "next"; });
          return next ? load(next.href) : null;
        });
      }

      function text(values) { return "[" + values.map(function (v) { return v.toFixed(5); }).join(", ") + "]"; }
      function applyBounds(report) {
        state.boundsEvents += 1;
        document.getElementById("count").textContent =
          report.count + (report.count === 1 ? " trip" : " trips");
        const g = report.geographic;
        const ids = ["rfc7946", "unwrapped", "nonWrapping"];
        if (!g) {
          if (box) { box.remove(); box = null; }
          ids.forEach(function (id) { document.getElementById(id).textContent = "–"; });
          document.getElementById("camera").textContent = "";
          state.box = null;
          state.drawn = null;
        } else {
          const span = g.crossesAntimeridian ? g.east + 360 - g.west : g.east - g.west;
          center = report.center.longitude;
          const west = center - span / 2;
          const east = center + span / 2;
          const bounds = L.latLngBounds([g.south, west], [g.north, east]);
          if (box) { box.setBounds(bounds); } else {
            box = L.rectangle(bounds, { color: "#d6336c", weight: 2, fillOpacity: 0.08,
              interactive: false }).addTo(map);
          }
          markers.forEach(place);
          map.fitBounds(bounds, { padding: [padding, padding], maxZoom: 12, animate: false });
          ids.forEach(function (id) { document.getElementById(id).textContent = text(report.boxes[id]); });
          document.getElementById("camera").textContent = report.camera
            ? "camera " + report.camera.center.latitude.toFixed(5) + ", " +
              report.camera.center.longitude.toFixed(5) + " zoom " + report.camera.zoom.toFixed(2) +
              " (512-px tiles)"
            : "";
          state.box = g;
          state.drawn = { west: west, east: east, south: g.south, north: g.north };
        }
        state.changedAt = Date.now();
        publish();
      }
      const size = map.getSize();
      const bounds = new EventSource("collections/trips/bounds/stream?viewport=" +
        Math.max(size.x, 2 * padding + 1) + "x" + Math.max(size.y, 2 * padding + 1) +
        "&padding=" + padding);
      bounds.addEventListener("bounds", function (event) { applyBounds(JSON.parse(event.data)); });
      load("collections/trips/items?limit=10000").then(function () {
        state.ready = true;
        publish();
      }).catch(fail);
      publish();
    })();

    """#
}
