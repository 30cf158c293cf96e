#!/usr/bin/env python3
"""Builds Data/sample-plans.json: bucket lists and stays for a third of the sample trips.

The plans are generated, not taken from any source: each bucket-list item comes from a short
list of activity templates filled with the trip's destination, and each stay is a made-up
lodging named after the destination, placed a few hundred metres to a few kilometres from the
destination's coordinates (one stay in eight 10 to 30 km away, as an airport hotel or a
stay out of town would be). No name, address or position is a real establishment.

The file is in the import format (`trips import`, JSON): each trip's values as
Data/sample-trips.csv has them, with its `bucketList` and `livingAccommodation`; importing it
after the CSV gives those trips their plans. Run from the repository root:

    python3 Tools/make-sample-plans.py

The output is deterministic: the same sample-trips.csv gives a byte-identical file.
"""
import csv
import hashlib
import json
import random
import uuid

# Things to do: (title, details, needs a reservation). `{d}` is the destination.
ACTIVITIES = [
    ("Walk the old town of {d}", "", False),
    ("Morning market in {d}", "Go early; bring cash", False),
    ("Dinner at a family restaurant", "Book a table for two", True),
    ("Day trip out of {d}", "", False),
    ("Cooking class", "Half a day, vegetarian menu", True),
    ("Sunrise from the best viewpoint in {d}", "", False),
    ("Guided walking tour", "Meet at the main square", True),
    ("Botanical garden", "", False),
    ("City museum", "Closed on Mondays", False),
    ("Concert or show", "", True),
    ("Souvenirs for the family", "", False),
    ("Swim or sauna", "", False),
]
# Made-up lodgings: `{d}` is the destination.
LODGINGS = [
    "Guesthouse {d}",
    "Hotel {d} Centre",
    "Apartment near {d} station",
    "Hostel {d}",
    "Bed and breakfast in {d}",
]
# The trips whose plans README and Documentation/CLI.md build from nothing in their examples.
LEFT_EMPTY = {"0378f603-a7ba-4528-8cae-a02f67f52dcf"}


def child_id(trip_id, kind, index):
    """A stable id for a trip's item or stay."""
    return str(uuid.uuid5(uuid.UUID(trip_id), f"{kind}-{index}"))


def plan(row):
    trip_id = row["id"]
    rng = random.Random(hashlib.sha256(trip_id.encode()).digest())
    destination = row["destination"]
    count = rng.randint(2, 5)
    items = []
    for index, (title, details, reservation) in enumerate(rng.sample(ACTIVITIES, count)):
        items.append(
            {
                "id": child_id(trip_id, "item", index),
                "title": title.format(d=destination),
                "details": details,
                "hasReservation": reservation,
                "isInPlan": rng.random() < 0.6,
                "position": index,
            }
        )
    stay = None
    if rng.random() < 0.85:
        far = rng.random() < 0.125
        distance = rng.uniform(0.1, 0.3) if far else rng.uniform(0.003, 0.03)
        latitude = max(-89.9, min(89.9, float(row["latitude"]) + rng.uniform(-1, 1) * distance))
        longitude = float(row["longitude"]) + rng.uniform(-1, 1) * distance
        longitude = (longitude + 180) % 360 - 180
        stay = {
            "id": child_id(trip_id, "stay", 0),
            "name": rng.choice(LODGINGS).format(d=destination),
            "address": "",
            "latitude": round(latitude, 5),
            "longitude": round(longitude, 5),
            "placeIdentifier": None,
        }
    return items, stay


def main():
    with open("Data/sample-trips.csv", newline="", encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    trips = []
    for row in rows:
        if row["id"] in LEFT_EMPTY or int(hashlib.sha256(row["id"].encode()).hexdigest(), 16) % 3:
            continue
        items, stay = plan(row)
        trips.append(
            {
                "id": row["id"],
                "name": row["name"],
                "destination": row["destination"],
                "startDate": row["start_date"],
                "endDate": row["end_date"],
                "latitude": float(row["latitude"]),
                "longitude": float(row["longitude"]),
                "placeIdentifier": row["place_id"] or None,
                "bucketList": items,
                "livingAccommodation": stay,
            }
        )
    with open("Data/sample-plans.json", "w", encoding="utf-8") as file:
        json.dump(trips, file, ensure_ascii=False, indent=2)
        file.write("\n")


if __name__ == "__main__":
    main()
