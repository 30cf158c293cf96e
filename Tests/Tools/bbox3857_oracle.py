"""An independent reading of `bbox` boxes in EPSG:3857 (Web Mercator metres) over trips, for the
differential tests of `trips serve`'s `bbox-crs`: each trip is projected forward by pyproj (PyPI,
MIT licence, its own PROJ), and a box holds it when some copy of the world holds it: its x plus a
whole number of world widths lies within the box's x range, and its y within the box's y range.
A box whose first x is greater than its second (both within the world) is read as two, one on
each side of 180 degrees.

Input (stdin): {"features": [GeoJSON features of trips], "boxes": [[x1, y1, x2, y2], ...]}.
Output (stdout): [[ids of the trips each box holds, sorted], ...].
"""

import json
import math
import sys

from pyproj import Transformer

HALF = math.pi * 6378137.0
WORLD = 2 * HALF


def holds_x(x, low, high):
    """Whether a copy of x (x + k * WORLD for a whole k) lies within [low, high]."""
    k = math.ceil((low - x) / WORLD)
    return x + k * WORLD <= high


def main():
    document = json.load(sys.stdin)
    forward = Transformer.from_crs("EPSG:4326", "EPSG:3857", always_xy=True)
    trips = []
    for feature in document["features"]:
        longitude, latitude = feature["geometry"]["coordinates"]
        x, y = forward.transform(longitude, latitude)
        if not math.isfinite(y):
            y = math.copysign(math.inf, latitude)
        trips.append((feature["id"], x, y))
    answers = []
    for x1, y1, x2, y2 in document["boxes"]:
        if x1 <= x2:
            ranges = [(x1, x2)]
        else:
            ranges = [(x1, HALF), (-HALF, x2)]
        ids = [
            trip_id
            for trip_id, x, y in trips
            if y1 <= y <= y2 and any(holds_x(x, low, high) for low, high in ranges)
        ]
        answers.append(sorted(ids))
    json.dump(answers, sys.stdout)


main()
