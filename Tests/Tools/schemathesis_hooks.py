"""Schemathesis hooks for `trips serve`'s /api: what JSON Schema cannot say of a parameter,
said here, for the property-based run of Tools/schemathesis.sh.

- `filter` has the format `cql2`: its values come from a small CQL2 Text grammar over the trips'
  queryables (the server's own parser and compiler decide everything else, and their errors
  are tested in FilterTests);
- values that match their schema but break a rule the parameter's description states across
  numbers or parameters (a box's south above its north or outside the CRS's range, a date that
  is not a day of the calendar or an interval that ends before it starts, a viewport side
  above 100000 or a padding that leaves nothing of it, a CRS PROJ does not know) are mapped to
  the nearest value that keeps them, so that every generated request is one /api calls valid.
"""

import datetime
import math
import os

import schemathesis
from hypothesis import strategies as st

def _rounded(value):
    return round(value, 4)


def _quoted(text):
    return "'" + text.replace("'", "''") + "'"


def _day(day):
    return f"DATE('{day.isoformat()}')"


def _compare(name, operator, literal):
    return f"{name} {operator} {literal}"


def _like(name, literal):
    return f"{name} LIKE {literal}"


def _casei(name, literal):
    return f"CASEI({name}) = CASEI({literal})"


def _between(name, a, b):
    return f"{name} BETWEEN {min(a, b)} AND {max(a, b)}"


def _box(w, s, e, n):
    return f"S_INTERSECTS(geometry, BBOX({w}, {min(s, n)}, {e}, {max(s, n)}))"


def _temporal(function, day):
    return f"{function}(INTERVAL(startDate, endDate), {day})"


def _combined(a, operator, b):
    return f"({a}) {operator} ({b})"


def _negated(condition):
    return f"NOT ({condition})"


def _branches(inner):
    return st.one_of(
        st.builds(_combined, inner, st.sampled_from(["AND", "OR"]), inner), inner.map(_negated))


LONGITUDE = st.floats(-180, 180, allow_nan=False).map(_rounded)
LATITUDE = st.floats(-90, 90, allow_nan=False).map(_rounded)
TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\ufffd"),
    max_size=8,
).map(_quoted)
DAY = st.dates(datetime.date(2000, 1, 1), datetime.date(2040, 12, 31)).map(_day)
STRINGS = st.sampled_from(["name", "destination"])
NUMBERS = st.sampled_from(["latitude", "longitude"])
LEAF = st.one_of(
    st.builds(_compare, STRINGS, st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), TEXT),
    st.builds(_like, STRINGS, TEXT),
    st.builds(_casei, STRINGS, TEXT),
    st.builds(_compare, NUMBERS, st.sampled_from(["=", "<", ">="]), LATITUDE),
    st.builds(_between, NUMBERS, LATITUDE, LATITUDE),
    st.builds(_box, LONGITUDE, LATITUDE, LONGITUDE, LATITUDE),
    st.builds(_compare, st.sampled_from(["startDate", "endDate"]), st.just(">="), DAY),
    st.builds(_temporal, st.sampled_from(["T_INTERSECTS", "T_BEFORE", "T_AFTER", "T_CONTAINS"]),
              DAY),
    st.sampled_from(["TRUE", "FALSE"]),
)
CQL2 = st.recursive(LEAF, _branches, max_leaves=4)
schemathesis.openapi.format("cql2", CQL2)

# The store's identifier (the part of its history tokens before the colon), from the runner.
STORE = os.environ.get("TRIPS_STORE_IDENTIFIER", "")
# The number of its last transaction when the run began: a later one was not issued yet.
LAST = int(os.environ.get("TRIPS_STORE_LAST") or "0")
CRS84 = "http://www.opengis.net/def/crs/OGC/1.3/CRS84"
EPSG4326 = "http://www.opengis.net/def/crs/EPSG/0/4326"
EPSG3857 = "http://www.opengis.net/def/crs/EPSG/0/3857"
MERCATOR_X = 20037508.342789244
PROJECTED = ["EPSG:3857", "EPSG:4326", "EPSG:32633", EPSG3857, "+proj=merc +lon_0=150"]


def _numbers(value):
    if isinstance(value, (list, tuple)):
        items = list(value)
    elif isinstance(value, str):
        items = value.split(",")
    else:
        return None
    try:
        numbers = [float(v) for v in items]
    except (TypeError, ValueError):
        return None
    if len(numbers) != 4 or not all(math.isfinite(v) for v in numbers):
        return None
    return numbers


def _clamp(v, low, high):
    return min(max(v, low), high)


def _bbox(numbers, crs):
    a, b, c, d = numbers
    if crs == EPSG4326:  # latitude first
        a, c = _clamp(a, -90, 90), _clamp(c, -90, 90)
        b, d = _clamp(b, -180, 180), _clamp(d, -180, 180)
        a, c = min(a, c), max(a, c)
    elif crs == EPSG3857:
        a, c = _clamp(a, -MERCATOR_X, MERCATOR_X), _clamp(c, -MERCATOR_X, MERCATOR_X)
        b, d = _clamp(b, -MERCATOR_X, MERCATOR_X), _clamp(d, -MERCATOR_X, MERCATOR_X)
        b, d = min(b, d), max(b, d)
    else:
        a, c = _clamp(a, -180, 180), _clamp(c, -180, 180)
        b, d = _clamp(b, -90, 90), _clamp(d, -90, 90)
        b, d = min(b, d), max(b, d)
    return ",".join(repr(v) for v in (a, b, c, d))


def _instant(text):
    if text in ("", ".."):
        return None
    if len(text) == 10:
        return datetime.datetime.fromisoformat(text).replace(tzinfo=datetime.timezone.utc)
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _datetime(text):
    try:
        parts = text.split("/")
        ends = [_instant(p) for p in parts]
        if len(ends) == 2 and ends[0] and ends[1] and ends[1] < ends[0]:
            return f"{parts[1]}/{parts[0]}"
        return text
    except ValueError:
        # Not a date this script can read: the server decides. (Mapping it to a valid value
        # made a request generated to be refused a valid one, which the server then took.)
        return text


@schemathesis.hook
def map_query(ctx, query):
    if not isinstance(query, dict):
        return query
    if "bbox" in query:
        numbers = _numbers(query["bbox"])
        if numbers is not None:
            query["bbox"] = _bbox(numbers, query.get("bbox-crs", CRS84))
    if "properties" in query and query["properties"] is None:
        # A null list goes out as `properties=`, the empty list /api documents as valid; a
        # name that is not a property keeps the generated request one to refuse.
        query["properties"] = "null"
    if isinstance(query.get("datetime"), str):
        query["datetime"] = _datetime(query["datetime"])
    after = query.get("after")
    if isinstance(after, str) and ":" in after and STORE:
        # A token of this store: one of another store is refused, as the description says.
        number = after.split(":", 1)[1]
        if number.isdigit():
            number = str(int(number) % (LAST + 1))
        query["after"] = STORE + ":" + number
    viewport = query.get("viewport")
    if isinstance(viewport, str) and "x" in viewport.lower():
        width, height = (int(v) for v in viewport.lower().split("x"))
        width, height = _clamp(width, 1, 100000), _clamp(height, 1, 100000)
        padding = query.get("padding")
        if isinstance(padding, int) and padding > 0:
            width, height = max(width, 2 * padding + 1), max(height, 2 * padding + 1)
            if width > 100000 or height > 100000:
                query["padding"] = 0
                width, height = _clamp(width, 1, 100000), _clamp(height, 1, 100000)
        query["viewport"] = f"{width}x{height}"
    crs = query.get("crs")
    if isinstance(crs, str) and "/bounds" in ctx.operation.path and crs not in PROJECTED:
        query["crs"] = PROJECTED[len(crs) % len(PROJECTED)]
    if query.get("filter-lang") == "cql2-json" and "filter" in query:
        query["filter-lang"] = "cql2-text"
    return query
