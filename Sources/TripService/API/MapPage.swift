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
    "map.css": ("text/css; charset=utf-8", .text(style)),
    "world.geojson": ("application/geo+json", .world),
  ]

  enum Source {
    case leaflet(String)
    case text(String)
    case world
  }

  /// The page's Content-Security-Policy: scripts, styles, data and streams from this server
  /// only, no inline script or style, no plugins, frames, forms or `<base>`. With it a user
  /// string that reached markup still could not run (the page puts every one in as text).
  static let contentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

  /// `GET /map` or `GET /map/NAME`.
  static func respond(asset: String?) throws -> HTTPResponse {
    guard let asset else {
      return HTTPResponse(
        status: 200,
        headers: [
          ("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-cache"),
          ("Content-Security-Policy", contentSecurityPolicy),
          ("X-Content-Type-Options", "nosniff"),
        ],
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
    <link rel="stylesheet" href="map/map.css">
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

  /// The page's own style (a file: the policy allows no inline style).
  static let style = """
    html, body { margin: 0; height: 100%; }
    #map { position: absolute; inset: 0; background: #dbe9f4; }
    #panel { position: absolute; top: 10px; right: 10px; z-index: 1000; max-width: 32em;
      background: rgba(255, 255, 255, 0.92); padding: 8px 12px; border-radius: 4px;
      font: 13px/1.45 sans-serif; box-shadow: 0 1px 4px rgba(0, 0, 0, 0.3); }
    #panel code { font-size: 12px; }
    #state { display: none; }

    """

  static let script = #"""
    (function () {
      "use strict";
      const state = { ready: false, mode: null, markers: 0, stays: 0, boundsEvents: 0,
        itemEvents: 0, box: null, drawn: null, changedAt: 0, tiles: 0, tilePoints: 0,
        tileClusters: 0, tileTrips: 0, tilesPending: 0, tileFetches: 0, tileRepaints: 0,
        errors: [] };
      const stateElement = document.getElementById("state");
      // Every string from the store goes into the page as a text node, never as markup
      // (Leaflet sets a string tooltip's innerHTML).
      function textNode(value) {
        return document.createTextNode(value == null ? "" : String(value));
      }
      let map = null;
      let box = null;
      const markers = new Map();
      // The tiles on screen (tiles mode), by Leaflet's key, each with what it drew.
      const tiles = new Map();
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
      // The largest cluster on screen, where it is drawn in the page (tiles mode).
      function largestCluster() {
        let best = null;
        tiles.forEach(function (canvas) {
          const c = canvas.coords;
          const corner = map.latLngToContainerPoint(map.unproject([c.x * 256, c.y * 256], c.z));
          const scale = Math.pow(2, map.getZoom() - c.z);
          (canvas.drawn || []).forEach(function (f) {
            if (!f.cluster || (best && best.count >= f.properties.count)) { return; }
            const x = corner.x + f.x * scale, y = corner.y + f.y * scale;
            const size = map.getSize();
            if (x < 0 || y < 0 || x > size.x || y > size.y) { return; }
            best = { x: x, y: y, count: f.properties.count };
          });
        });
        return best;
      }
      function publish() {
        measure();
        if (map) {
          const c = map.getCenter().wrap();
          state.zoom = map.getZoom();
          state.center = { latitude: c.lat, longitude: c.lng };
        }
        if (state.mode === "tiles") { state.largestCluster = largestCluster(); }
        stateElement.textContent = JSON.stringify(state);
      }
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
        entry.stay.marker.unbindTooltip().bindTooltip(textNode(stay.name));
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
        entry.marker.unbindTooltip().bindTooltip(textNode(feature.properties.name));
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

      // Stores up to this many trips are drawn a marker each (with their stays, moved one by
      // one as the items stream says); larger ones as vector tiles, with clusters at low zoom
      // (`?tiles=1` or `?tiles=0` chooses).
      const markerLimit = 5000;
      const choice = new URLSearchParams(window.location.search).get("tiles");

      function startMarkers() {
        state.mode = "markers";
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
        return load("collections/trips/items?limit=10000");
      }

      // MVT 2.1 (Protocol Buffers), read here: layers of point features with their
      // properties, each position as a fraction of the tile (0 to 1).
      function readTile(buffer) {
        const bytes = new Uint8Array(buffer);
        const decoder = new TextDecoder();
        let pos = 0;
        function varint() {
          let result = 0, shift = 0, b;
          do {
            if (pos >= bytes.length) { throw new Error("MVT: a number runs past the end"); }
            b = bytes[pos++];
            result += (b & 0x7f) * Math.pow(2, shift);
            shift += 7;
          } while (b & 0x80);
          return result;
        }
        function zigzag(z) { return z % 2 === 1 ? -(z + 1) / 2 : z / 2; }
        function skip(wire) {
          if (wire === 0) { varint(); } else if (wire === 1) { pos += 8; }
          else if (wire === 2) { const n = varint(); pos += n; } else if (wire === 5) { pos += 4; }
          else { throw new Error("MVT: wire type " + wire); }
        }
        function text(n) { const t = decoder.decode(bytes.subarray(pos, pos + n)); pos += n; return t; }
        function packed() {
          const end = varint() + pos;
          const out = [];
          while (pos < end) { out.push(varint()); }
          return out;
        }
        function value(end) {
          let v = null;
          while (pos < end) {
            const key = varint(), field = Math.floor(key / 8), wire = key & 7;
            const view = new DataView(bytes.buffer, bytes.byteOffset + pos);
            if (field === 1) { v = text(varint()); }
            else if (field === 2) { v = view.getFloat32(0, true); pos += 4; }
            else if (field === 3) { v = view.getFloat64(0, true); pos += 8; }
            else if (field === 4 || field === 5) { v = varint(); }
            else if (field === 6) { v = zigzag(varint()); }
            else if (field === 7) { v = varint() !== 0; } else { skip(wire); }
          }
          return v;
        }
        function feature(end) {
          const f = { id: null, tags: [], type: 0, geometry: [] };
          while (pos < end) {
            const key = varint(), field = Math.floor(key / 8), wire = key & 7;
            if (field === 1) { f.id = varint(); } else if (field === 2) { f.tags = packed(); }
            else if (field === 3) { f.type = varint(); } else if (field === 4) { f.geometry = packed(); }
            else { skip(wire); }
          }
          return f;
        }
        function layer(end) {
          const l = { name: "", extent: 4096, keys: [], values: [], features: [] };
          while (pos < end) {
            const key = varint(), field = Math.floor(key / 8), wire = key & 7;
            if (field === 1) { l.name = text(varint()); }
            else if (field === 2) { const n = varint(); l.features.push(feature(pos + n)); }
            else if (field === 3) { l.keys.push(text(varint())); }
            else if (field === 4) { const n = varint(); l.values.push(value(pos + n)); }
            else if (field === 5) { l.extent = varint(); } else { skip(wire); }
          }
          l.features.forEach(function (f) {
            f.properties = {};
            for (let i = 0; i + 1 < f.tags.length; i += 2) {
              f.properties[l.keys[f.tags[i]]] = l.values[f.tags[i + 1]];
            }
            if (f.type === 1 && f.geometry.length >= 3) {
              f.x = zigzag(f.geometry[1]) / l.extent;
              f.y = zigzag(f.geometry[2]) / l.extent;
            }
          });
          return l;
        }
        const layers = {};
        while (pos < bytes.length) {
          const key = varint();
          if (key === 26) { const n = varint(); const l = layer(pos + n); layers[l.name] = l; }
          else { skip(key & 7); }
        }
        return layers;
      }

      function tileKey(coords) { return coords.x + ":" + coords.y + ":" + coords.z; }
      function countTiles() {
        let points = 0, clusters = 0, trips = 0, pending = 0;
        tiles.forEach(function (canvas) {
          if (!canvas.drawn) { pending += 1; }
          (canvas.drawn || []).forEach(function (f) {
            if (f.cluster) { clusters += 1; trips += f.properties.count; } else { points += 1; }
          });
        });
        state.tiles = tiles.size;
        state.tilePoints = points;
        state.tileClusters = clusters;
        state.tileTrips = trips + points;
        state.tilesPending = pending;
      }
      function abbreviate(count) {
        return count >= 1e6 ? (count / 1e6).toFixed(1) + "M" : count >= 1e4
          ? Math.round(count / 1e3) + "k" : count >= 1e3 ? (count / 1e3).toFixed(1) + "k" : String(count);
      }
      // Fetches the tile (revalidated with its ETag: a 304 for a tile no change touched) and
      // paints it when its tag changed.
      function paint(canvas, coords, done) {
        const n = Math.pow(2, coords.z);
        const column = ((coords.x % n) + n) % n;
        if (coords.y < 0 || coords.y >= n) { canvas.drawn = []; done(null, canvas); return; }
        state.tileFetches += 1;
        fetch("collections/trips/tiles/WebMercatorQuad/" + coords.z + "/" + coords.y + "/" + column,
          { cache: "no-cache" }).then(function (response) {
          if (!response.ok) { throw new Error("tile " + coords.z + "/" + coords.y + "/" + column + ": HTTP " + response.status); }
          const tag = response.headers.get("ETag");
          if (tag && tag === canvas.tag) { return null; }
          canvas.tag = tag;
          return response.arrayBuffer();
        }).then(function (buffer) {
          if (buffer === null) { done(null, canvas); return; }
          const layers = readTile(buffer);
          const size = canvas.width;
          const context = canvas.getContext("2d");
          context.clearRect(0, 0, size, size);
          const drawn = [];
          // Discs first, then the labels over them all.
          const clusters = (layers.clusters || {}).features || [];
          clusters.forEach(function (f) {
            const count = f.properties.count;
            // A cell of the grid is 8 pixels across: small discs, labelled from 1,000 trips.
            const r = Math.min(2.5 + 1.8 * Math.log10(count), 9);
            context.beginPath();
            context.arc(f.x * size, f.y * size, r, 0, 2 * Math.PI);
            context.fillStyle = "rgba(240, 140, 0, 0.85)";
            context.fill();
            context.strokeStyle = "#ffffff";
            context.lineWidth = 0.8;
            context.stroke();
            drawn.push({ cluster: true, x: f.x * size, y: f.y * size, r: Math.max(r, 5), properties: f.properties });
          });
          context.fillStyle = "#5c2e00";
          context.font = "bold 9px sans-serif";
          context.textAlign = "center";
          context.textBaseline = "middle";
          clusters.forEach(function (f) {
            if (f.properties.count >= 1000) {
              context.fillText(abbreviate(f.properties.count), f.x * size, f.y * size);
            }
          });
          ((layers.trips || {}).features || []).forEach(function (f) {
            context.beginPath();
            context.arc(f.x * size, f.y * size, 3.5, 0, 2 * Math.PI);
            context.fillStyle = "#1c7ed6";
            context.fill();
            context.strokeStyle = "#ffffff";
            context.lineWidth = 1;
            context.stroke();
            // Points of the buffer belong to the next tile: drawn, not counted twice.
            if (f.x >= 0 && f.x < 1 && f.y >= 0 && f.y < 1) {
              drawn.push({ cluster: false, x: f.x * size, y: f.y * size, r: 6, properties: f.properties });
            }
          });
          canvas.drawn = drawn;
          state.tileRepaints += 1;
          countTiles();
          publish();
          done(null, canvas);
        }).catch(function (error) { fail(error); done(error, canvas); });
      }

      function startTiles() {
        state.mode = "tiles";
        const TripTiles = L.GridLayer.extend({
          createTile: function (coords, done) {
            const canvas = L.DomUtil.create("canvas", "leaflet-tile");
            const size = this.getTileSize();
            canvas.width = size.x;
            canvas.height = size.y;
            canvas.coords = coords;
            tiles.set(tileKey(coords), canvas);
            paint(canvas, coords, done);
            return canvas;
          }
        });
        // Above the outlines (250) and the box (400).
        map.createPane("trips").style.zIndex = 450;
        const layer = new TripTiles({ pane: "trips" });
        layer.on("tileunload", function (event) {
          tiles.delete(tileKey(event.coords));
          countTiles();
          publish();
        });
        layer.addTo(map);
        map.on("moveend", publish);
        // A click on a cluster zooms into its trips' bounds; on a trip, says what it is.
        map.on("click", function (event) {
          const z = Math.round(map.getZoom());
          const point = map.project(event.latlng, z);
          const coords = { x: Math.floor(point.x / 256), y: Math.floor(point.y / 256), z: z };
          const canvas = tiles.get(tileKey(coords));
          if (!canvas || !canvas.drawn) { return; }
          const x = point.x - coords.x * 256, y = point.y - coords.y * 256;
          const hit = canvas.drawn.find(function (f) {
            return Math.hypot(f.x - x, f.y - y) <= f.r + 2;
          });
          if (!hit) { return; }
          const p = hit.properties;
          if (hit.cluster) {
            const shift = event.latlng.lng - L.latLng(map.unproject(point, z)).wrap().lng;
            map.fitBounds([[p.south, p.west + shift], [p.north, p.east + shift]],
              { padding: [padding, padding], maxZoom: 16 });
          } else {
            const line = document.createElement("div");
            const name = document.createElement("b");
            name.textContent = p.name;
            line.appendChild(name);
            line.appendChild(document.createElement("br"));
            line.appendChild(document.createTextNode(p.destination + ", " +
              p.startDate.slice(0, 10) + " – " + p.endDate.slice(0, 10)));
            L.popup().setLatLng(event.latlng).setContent(line).openOn(map);
          }
        });
        // After a change the tiles on screen are asked again (a 304 each that the change did
        // not touch) and the changed ones repainted, at most every 300 ms.
        let pending = null;
        function refresh() {
          if (pending) { return; }
          pending = setTimeout(function () {
            pending = null;
            tiles.forEach(function (canvas) { paint(canvas, canvas.coords, function () {}); });
          }, 300);
        }
        const items = new EventSource("collections/trips/items/stream");
        ["insert", "update", "delete", "reset"].forEach(function (name) {
          items.addEventListener(name, function () { state.itemEvents += 1; refresh(); });
        });
        return Promise.resolve();
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
          // A map of markers follows the box; a map of tiles is fitted once, then the user's.
          if (state.mode !== "tiles" || state.boundsEvents === 1) {
            map.fitBounds(bounds, { padding: [padding, padding], maxZoom: 12, animate: false });
          }
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
      fetch("collections/trips/items?limit=1&skipGeometry=true&properties=").then(function (response) {
        if (!response.ok) { throw new Error("trips: HTTP " + response.status); }
        return response.json();
      }).then(function (page) {
        const large = choice === "1" || (choice !== "0" && page.numberMatched > markerLimit);
        return large ? startTiles() : startMarkers();
      }).then(function () {
        state.ready = true;
        publish();
      }).catch(fail);
      publish();
    })();

    """#
}
