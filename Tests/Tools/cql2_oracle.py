"""An independent evaluator of CQL2 filters over trips, for the differential tests of
`trips serve`'s `filter`: filters are parsed by pygeofilter (PyPI, MIT licence), evaluated here
over the trips' GeoJSON features with shapely (PyPI, BSD licence) for geometry, and written back
as CQL2 JSON by pygeofilter, so that the server reads both encodings of each filter.

Input (stdin): {"features": [GeoJSON features of trips], "filters": [CQL2 JSON filters]}.
Output (stdout): [{"ids": [matching ids, sorted]} | {"error": "..."}].

pygeofilter 0.4.0 reads an earlier draft of CQL2 JSON in places; `draft` rewrites the 1.0 forms
it lacks into forms it reads (syntax only: `between` with three arguments, `accenti`, the
temporal functions it does not map or maps to another relation, intervals with property ends,
`bbox`, whose numbers it takes in another order),
and `evaluate` gives each its CQL2 1.0 meaning.

Semantics (the service's, documented in TripFilter): a trip's startDate and endDate are instants
(00:00 UTC of their days); its interval is [startDate, endDate]; an instant is an interval that
starts and ends at once; BBOX with west > east crosses the antimeridian; geometries are planar.
"""

import datetime
import json
import sys
import unicodedata

import shapely.geometry
from pygeofilter import ast, values
from pygeofilter.parsers.cql2_json import parse as parse_json

UTC = datetime.timezone.utc


def instant(value):
    if isinstance(value, datetime.datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, datetime.date):
        return datetime.datetime(value.year, value.month, value.day, tzinfo=UTC)
    raise TypeError(f"not an instant: {value!r}")


def interval(value):
    if isinstance(value, tuple):
        return value
    if isinstance(value, values.Interval):
        start = None if value.start in (None, "..") else instant(value.start)
        end = None if value.end in (None, "..") else instant(value.end)
        return (start, end)
    moment = instant(value)
    return (moment, moment)


def lt(a, b, side_a, side_b):
    """a < b for interval ends, None standing for -inf (side 'start') or +inf ('end')."""
    va = (-1 if side_a == "start" else 1) if a is None else 0
    vb = (-1 if side_b == "start" else 1) if b is None else 0
    if va or vb:
        return (va, 0) < (vb, 0) if va != vb else False
    return a < b


def eq(a, b, side_a, side_b):
    if a is None or b is None:
        return a is None and b is None and side_a == side_b
    return a == b


def temporal(op, a, b):
    (a1, a2), (b1, b2) = interval(a), interval(b)
    s, e = "start", "end"
    if op == "T_AFTER":
        return lt(b2, a1, e, s)
    if op == "T_BEFORE":
        return lt(a2, b1, e, s)
    if op == "T_DISJOINT":
        return lt(b2, a1, e, s) or lt(a2, b1, e, s)
    if op == "T_INTERSECTS":
        return not (lt(b2, a1, e, s) or lt(a2, b1, e, s))
    if op == "T_DURING":
        return lt(b1, a1, s, s) and lt(a2, b2, e, e)
    if op == "T_CONTAINS":
        return lt(a1, b1, s, s) and lt(b2, a2, e, e)
    if op == "T_EQUALS":
        return eq(a1, b1, s, s) and eq(a2, b2, e, e)
    if op == "T_MEETS":
        return eq(a2, b1, e, s)
    if op == "T_METBY":
        return eq(a1, b2, s, e)
    if op == "T_STARTS":
        return eq(a1, b1, s, s) and lt(a2, b2, e, e)
    if op == "T_STARTEDBY":
        return eq(a1, b1, s, s) and lt(b2, a2, e, e)
    if op == "T_FINISHES":
        return lt(b1, a1, s, s) and eq(a2, b2, e, e)
    if op == "T_FINISHEDBY":
        return lt(a1, b1, s, s) and eq(a2, b2, e, e)
    if op == "T_OVERLAPS":
        return lt(a1, b1, s, s) and lt(b1, a2, s, e) and lt(a2, b2, e, e)
    if op == "T_OVERLAPPEDBY":
        return lt(b1, a1, s, s) and lt(a1, b2, s, e) and lt(b2, a2, e, e)
    raise ValueError(op)


TEMPORAL = {
    ast.TimeAfter: "T_AFTER", ast.TimeBefore: "T_BEFORE", ast.TimeDisjoint: "T_DISJOINT",
    ast.TimeDuring: "T_DURING", ast.TimeContains: "T_CONTAINS", ast.TimeEquals: "T_EQUALS",
    ast.TimeMeets: "T_MEETS", ast.TimeMetBy: "T_METBY", ast.TimeBegins: "T_STARTS",
    ast.TimeBegunBy: "T_STARTEDBY", ast.TimeEnds: "T_FINISHES", ast.TimeEndedBy: "T_FINISHEDBY",
    ast.TimeOverlaps: "T_OVERLAPS", ast.TimeOverlappedBy: "T_OVERLAPPEDBY",
}


def shape(value):
    if isinstance(value, values.Envelope):
        if value.x1 > value.x2:  # crosses the antimeridian
            return shapely.geometry.MultiPolygon([
                shapely.geometry.box(value.x1, value.y1, 180, value.y2),
                shapely.geometry.box(-180, value.y1, value.x2, value.y2),
            ])
        return shapely.geometry.box(value.x1, value.y1, value.x2, value.y2)
    if isinstance(value, values.Geometry):
        return shapely.geometry.shape(value.geometry)
    if isinstance(value, shapely.geometry.base.BaseGeometry):
        return value
    raise TypeError(f"not a geometry: {value!r}")


def like(text, pattern):
    """CQL2 LIKE: % any run, _ one character, backslash escapes."""
    import re
    out, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out += re.escape(pattern[i + 1])
            i += 2
            continue
        out += ".*" if c == "%" else "." if c == "_" else re.escape(c)
        i += 1
    return re.fullmatch(out, text, re.DOTALL) is not None


def evaluate(node, trip):
    e = lambda n: evaluate(n, trip)  # noqa: E731
    if isinstance(node, ast.And):
        return e(node.lhs) and e(node.rhs)
    if isinstance(node, ast.Or):
        return e(node.lhs) or e(node.rhs)
    if isinstance(node, ast.Not):
        return not e(node.sub_node)
    if isinstance(node, ast.Comparison):
        a, b = e(node.lhs), e(node.rhs)
        if isinstance(a, (datetime.date, datetime.datetime)):
            a, b = instant(a), instant(b)
        return {"=": a == b, "<>": a != b, "<": a < b, "<=": a <= b, ">": a > b,
                ">=": a >= b}[node.op.value]
    if isinstance(node, ast.Between):
        a, low, high = e(node.lhs), e(node.low), e(node.high)
        return (not (low <= a <= high)) if node.not_ else (low <= a <= high)
    if isinstance(node, ast.Like):
        result = like(e(node.lhs), node.pattern)
        return not result if node.not_ else result
    if isinstance(node, ast.In):
        a = e(node.lhs)
        result = any(a == e(item) for item in node.sub_nodes)
        return not result if node.not_ else result
    if isinstance(node, ast.IsNull):
        result = e(node.lhs) is None
        return not result if node.not_ else result
    if type(node) in TEMPORAL:
        return temporal(TEMPORAL[type(node)], e(node.lhs), e(node.rhs))
    if isinstance(node, ast.GeometryIntersects):
        return shape(e(node.lhs)).intersects(shape(e(node.rhs)))
    if isinstance(node, ast.Arithmetic):
        a, b = e(node.lhs), e(node.rhs)
        return {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else float("inf")}[
            node.op.value]
    if isinstance(node, ast.Function):
        args = [e(a) for a in node.arguments]
        name = node.name.lower()
        if name.startswith("t_"):
            return temporal(name.upper(), args[0], args[1])
        if name == "interval":
            ends = [None if a == ".." else instant(a) for a in args]
            return (ends[0], ends[1])
        if name == "lower":
            return args[0].lower()
        if name == "casei":
            return args[0].lower()
        if name == "accenti":
            return "".join(c for c in unicodedata.normalize("NFD", args[0])
                           if unicodedata.category(c) != "Mn")
        raise ValueError(f"function {node.name}")
    if isinstance(node, ast.Attribute):
        return trip[node.name]
    if isinstance(node, values.Interval):
        return (None if node.start in (None, "..") else instant(e(node.start)),
                None if node.end in (None, "..") else instant(e(node.end)))
    if isinstance(node, (values.Envelope, values.Geometry)):
        return node
    if isinstance(node, (bool, int, float, str, datetime.date, datetime.datetime)):
        return node
    raise ValueError(f"cannot evaluate {type(node).__name__}")


def trip_of(feature):
    properties = feature["properties"]
    lon, lat = feature["geometry"]["coordinates"]
    parse = lambda t: datetime.datetime.fromisoformat(t.replace("Z", "+00:00"))  # noqa: E731
    return {
        "id": feature["id"], "name": properties["name"],
        "destination": properties["destination"],
        "startDate": parse(properties["startDate"]), "endDate": parse(properties["endDate"]),
        "latitude": lat, "longitude": lon, "geometry": shapely.geometry.Point(lon, lat),
    }


def function(name, arguments):
    return {"function": {"name": name, "arguments": arguments}}


def draft(node):
    """CQL2 1.0 JSON in the forms pygeofilter 0.4.0 parses (see the module's comment)."""
    if isinstance(node, list):
        return [draft(item) for item in node]
    if not isinstance(node, dict):
        return node
    if "bbox" in node:  # pygeofilter's Envelope is (x1, x2, y1, y2)
        west, south, east, north = node["bbox"][:2] + node["bbox"][-2:]
        return {"bbox": [west, east, south, north]}
    if "interval" in node and any(isinstance(end, dict) for end in node["interval"]):
        return function("interval", [draft(end) for end in node["interval"]])
    if "op" in node:
        op, args = node["op"], draft(node["args"])
        if op == "between" and len(args) == 3:
            return {"op": "between", "args": [args[0], [args[1], args[2]]]}
        if op == "accenti":
            return function("accenti", args)
        if op.startswith("t_"):
            return function(op, args)
        return {"op": op, "args": args}
    return node


def main():
    request = json.load(sys.stdin)
    trips = [trip_of(f) for f in request["features"]]
    answers = []
    for cql2 in request["filters"]:
        try:
            tree = parse_json(draft(cql2))
            answers.append({"ids": sorted(t["id"] for t in trips if evaluate(tree, t))})
        except Exception as error:  # noqa: BLE001 - reported to the test, which fails on it
            answers.append({"error": f"{type(error).__name__}: {error}"})
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    main()
