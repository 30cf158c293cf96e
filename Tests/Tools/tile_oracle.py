#!/usr/bin/env python3
"""An independent check of the service's vector tiles.

Usage: tile_oracle.py BASE_URL MAX_ZOOM

Reads every trip from BASE_URL/collections/trips/items, works out on its own what each tile of
WebMercatorQuad from zoom 0 to MAX_ZOOM must hold (the contract in Documentation/Service.md,
"Vector tiles"), fetches every one of those tiles, decodes it with mapbox-vector-tile (PyPI,
MIT) and compares. Prints one JSON object: {"tiles": n, "points": n, "clusters": n,
"errors": [...]} (at most 50 errors).

The contract, as this script computes it:
- a trip's place in a tile is floor(X * 2^z * 4096) - column * 4096 (and the same for Y), where
  X and Y are its spherical Mercator position on the unit square (latitudes clamped to the
  square; the bottom edge belongs to the bottom row);
- a tile draws the trips within 64 units around it (across the antimeridian too, with their
  longitude shifted by 360); it counts (OGC-NumberMatched) those inside it;
- when more than 2,000 trips are drawn, the tile holds a "clusters" layer instead: a point per
  occupied cell of a 32 x 32 grid over the tile, over the trips inside the tile only, at the
  floor of their mean position, with their count, bounds and most common destination (the
  least by code points among equals), and the cell's number row * (2^z * 32) + column as its id;
- points are ordered by start date, name and key, clusters by id.
"""

import json
import math
import sys
from collections import Counter, defaultdict

import mapbox_vector_tile
import requests

EXTENT = 4096
BUFFER = 64
BUDGET = 2000
GRID = 32
MAX_LATITUDE = math.degrees(math.atan(math.sinh(math.pi)))


def unit_x(longitude):
    return (longitude + 180.0) / 360.0


def unit_y(latitude):
    latitude = max(-MAX_LATITUDE, min(MAX_LATITUDE, latitude))
    phi = math.radians(latitude)
    return min(max((1.0 - math.log(math.tan(math.pi / 4 + phi / 2)) / math.pi) / 2.0, 0.0), 1.0)


def read_trips(base):
    trips = []
    url = base + "/collections/trips/items?limit=10000"
    session = requests.Session()
    while url:
        page = session.get(url).json()
        for feature in page["features"]:
            longitude, latitude = feature["geometry"]["coordinates"]
            properties = feature["properties"]
            trips.append(
                {
                    "id": feature["id"],
                    "longitude": longitude,
                    "latitude": latitude,
                    "name": properties["name"],
                    "destination": properties["destination"],
                    "startDate": properties["startDate"],
                    "endDate": properties["endDate"],
                    "placeIdentifier": properties.get("placeIdentifier"),
                }
            )
        url = next((link["href"] for link in page["links"] if link["rel"] == "next"), None)
    return trips


def expected_tiles(trips, zoom):
    """{(row, column): [(trip, x, y, inside)]} for the tiles that draw a trip."""
    size = 2**zoom
    scale = size * EXTENT
    tiles = defaultdict(list)
    for trip in trips:
        wy = min(math.floor(unit_y(trip["latitude"]) * scale), scale - 1)
        for shift in (0.0, -360.0, 360.0):
            wx = math.floor(unit_x(trip["longitude"] + shift) * scale)
            if wx < -BUFFER or wx >= scale + BUFFER:
                continue
            columns = {c for c in ((wx - BUFFER) // EXTENT, wx // EXTENT, (wx + BUFFER) // EXTENT) if 0 <= c < size}
            rows = {r for r in ((wy - BUFFER) // EXTENT, wy // EXTENT, (wy + BUFFER) // EXTENT) if 0 <= r < size}
            for column in columns:
                for row in rows:
                    x = wx - column * EXTENT
                    y = wy - row * EXTENT
                    if -BUFFER <= x < EXTENT + BUFFER and -BUFFER <= y < EXTENT + BUFFER:
                        inside = 0 <= x < EXTENT and 0 <= y < EXTENT
                        tiles[(row, column)].append((trip, x, y, inside, shift))
    return tiles


def check_tile(zoom, row, column, drawn, body, matched_header, keys, errors):
    where = f"{zoom}/{row}/{column}"
    inside = [d for d in drawn if d[3]]
    if matched_header is not None and int(matched_header) != len(inside):
        errors.append(f"{where}: OGC-NumberMatched {matched_header}, expected {len(inside)}")
    decoded = mapbox_vector_tile.decode(body, default_options={"y_coord_down": True}) if body else {}
    if not drawn:
        if decoded:
            errors.append(f"{where}: expected an empty tile, got layers {sorted(decoded)}")
        return 0, 0
    if len(drawn) <= BUDGET and "trips" in decoded:
        layer = decoded["trips"]
        if sorted(decoded) != ["trips"]:
            errors.append(f"{where}: layers {sorted(decoded)}")
        expected = sorted(drawn, key=lambda d: (d[0]["startDate"], d[0]["name"]))
        got = layer["features"]
        if len(got) != len(expected):
            errors.append(f"{where}: {len(got)} points, expected {len(expected)}")
            return 0, 0
        by_id = defaultdict(list)
        for trip, x, y, _, _ in drawn:
            by_id[trip["id"]].append((x, y))
        previous = None
        for feature in got:
            properties = feature["properties"]
            trip_id = properties.get("id")
            if trip_id not in by_id:
                errors.append(f"{where}: a point of trip {trip_id}, which the tile does not draw")
                continue
            point = tuple(feature["geometry"]["coordinates"])
            if point not in by_id[trip_id]:
                errors.append(f"{where}: trip {trip_id} at {point}, expected one of {by_id[trip_id]}")
            trip = next(d[0] for d in drawn if d[0]["id"] == trip_id)
            for name in ("name", "destination", "startDate", "endDate", "placeIdentifier"):
                if properties.get(name) != trip[name]:
                    errors.append(f"{where}: trip {trip_id} {name} {properties.get(name)!r}, expected {trip[name]!r}")
            key = keys.setdefault(trip_id, feature["id"])
            if key != feature["id"]:
                errors.append(f"{where}: trip {trip_id} has id {feature['id']} here, {key} elsewhere")
            order = (trip["startDate"], trip["name"], feature["id"])
            if previous is not None and order < previous:
                errors.append(f"{where}: points out of order at trip {trip_id}")
            previous = order
        return len(got), 0
    if len(drawn) <= BUDGET:
        errors.append(f"{where}: {len(drawn)} trips drawn, within the budget, but no trips layer")
        return 0, 0
    if sorted(decoded) != ["clusters"]:
        errors.append(f"{where}: {len(drawn)} trips drawn: expected clusters, got layers {sorted(decoded)}")
        return 0, 0
    cell = EXTENT // GRID
    cells = defaultdict(list)
    for trip, x, y, is_inside, shift in inside:
        cells[(y // cell, x // cell)].append((trip, x, y, shift))
    across = 2**zoom * GRID
    expected = {}
    for (cell_row, cell_column), members in cells.items():
        count = len(members)
        counts = Counter(m[0]["destination"] for m in members)
        most = max(counts.values())
        destination = min(d for d, n in counts.items() if n == most)
        longitudes = [m[0]["longitude"] + m[3] for m in members]
        latitudes = [m[0]["latitude"] for m in members]
        identifier = (row * GRID + cell_row) * across + column * GRID + cell_column
        expected[identifier] = {
            "point": (sum(m[1] for m in members) // count, sum(m[2] for m in members) // count),
            "count": count,
            "bounds": (min(longitudes), min(latitudes), max(longitudes), max(latitudes)),
            "destination": destination,
        }
    got = decoded["clusters"]["features"]
    ids = [feature["id"] for feature in got]
    if ids != sorted(expected):
        errors.append(f"{where}: cluster ids {ids[:5]}..., expected {sorted(expected)[:5]}...")
        return 0, 0
    for feature in got:
        want = expected[feature["id"]]
        properties = feature["properties"]
        if tuple(feature["geometry"]["coordinates"]) != want["point"]:
            errors.append(f"{where}: cluster {feature['id']} at {feature['geometry']['coordinates']}, expected {want['point']}")
        if properties.get("count") != want["count"]:
            errors.append(f"{where}: cluster {feature['id']} count {properties.get('count')}, expected {want['count']}")
        bounds = tuple(properties.get(name) for name in ("west", "south", "east", "north"))
        if bounds != want["bounds"]:
            errors.append(f"{where}: cluster {feature['id']} bounds {bounds}, expected {want['bounds']}")
        if properties.get("destination") != want["destination"]:
            errors.append(f"{where}: cluster {feature['id']} destination {properties.get('destination')!r}, expected {want['destination']!r}")
    return 0, len(got)


def main():
    base = sys.argv[1].rstrip("/")
    max_zoom = int(sys.argv[2])
    trips = read_trips(base)
    session = requests.Session()
    errors = []
    keys = {}
    summary = {"trips": len(trips), "tiles": 0, "points": 0, "clusters": 0, "matched": {}}
    for zoom in range(max_zoom + 1):
        expected = expected_tiles(trips, zoom)
        total = 0
        for row in range(2**zoom):
            for column in range(2**zoom):
                response = session.get(f"{base}/collections/trips/tiles/WebMercatorQuad/{zoom}/{row}/{column}")
                if response.status_code != 200:
                    errors.append(f"{zoom}/{row}/{column}: status {response.status_code}")
                    continue
                matched = response.headers.get("OGC-NumberMatched")
                total += int(matched or 0)
                points, clusters = check_tile(
                    zoom, row, column, expected.get((row, column), []), response.content, matched, keys, errors
                )
                summary["tiles"] += 1
                summary["points"] += points
                summary["clusters"] += clusters
        summary["matched"][str(zoom)] = total
        if total != len(trips):
            errors.append(f"zoom {zoom}: the tiles count {total} trips, the store holds {len(trips)}")
    summary["errors"] = errors[:50]
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
