"""Validates the service's features against the schemas /api gives for them.

Usage: feature_schema_check.py BASE_URL. Reads /api, turns its OpenAPI 3.0 schemas
(`nullable`, `$ref` into components) into JSON Schema, and validates, with jsonschema_rs and
formats checked, a page of each collection, one feature of each, and a trips page with
`properties=` and `skipGeometry=true`; and that the request bodies of each collection's POST,
PATCH and PUT are described (not any object) by schemas that take that feature. A copy of each
page with one property given a wrong type must fail (so that a schema accepting anything is
caught). Prints one JSON object:
{"checked": N, "errors": [...], "tamperedPassed": [...]}.
"""

import json
import sys
import urllib.request

import jsonschema_rs

base = sys.argv[1]


def get(path):
    with urllib.request.urlopen(base + path) as response:
        return json.load(response)


api = get("/api")
schemas = api["components"]["schemas"]


def resolve(schema):
    if isinstance(schema, dict):
        if "$ref" in schema:
            return resolve(schemas[schema["$ref"].split("/")[-1]])
        out = {key: resolve(value) for key, value in schema.items() if key != "nullable"}
        if schema.get("nullable"):
            if "type" in out:
                out["type"] = [out["type"], "null"]
            else:
                out = {"anyOf": [out, {"type": "null"}]}
        return out
    if isinstance(schema, list):
        return [resolve(item) for item in schema]
    return schema


def validator(name):
    return jsonschema_rs.Draft4Validator(resolve(schemas[name]), validate_formats=True)


checked = 0
errors = []
tampered_passed = []
for collection, name in [
    ("trips", "Trip"),
    ("stays", "Stay"),
    ("bucket-list-items", "BucketListItem"),
]:
    pages = [f"/collections/{collection}/items?limit=100"]
    if collection == "trips":
        pages.append("/collections/trips/items?limit=20&properties=name,startDate&skipGeometry=true")
    for path in pages:
        page = get(path)
        found = [error.message for error in validator(name + "FeatureCollection").iter_errors(page)]
        errors += [f"{path}: {message}" for message in found[:5]]
        checked += len(page["features"])
        first = page["features"][0]
        one = get(f"/collections/{collection}/items/{first['id']}")
        errors += [
            f"{collection} item: {error.message}" for error in validator(name + "Feature").iter_errors(one)
        ]
        checked += 1
        items = f"/collections/{collection}/items"
        for path_name, method in [(items, "post"), (items + "/{featureId}", "patch"), (items + "/{featureId}", "put")]:
            operation = api["paths"][path_name].get(method)
            if operation is None:
                continue
            for media, content in operation["requestBody"]["content"].items():
                if content["schema"] == {"type": "object"}:
                    errors.append(f"{method} {path_name} ({media}): the body is not described")
                    continue
                body = jsonschema_rs.Draft4Validator(resolve(content["schema"]), validate_formats=True)
                errors += [f"{method} {path_name} ({media}): {error.message}" for error in body.iter_errors(one)]
                checked += 1
        member = next(iter(first["properties"]))
        first["properties"][member] = {"wrong": [1]}
        if not list(validator(name + "FeatureCollection").iter_errors(page)):
            tampered_passed.append(f"{path}: {member}")

print(json.dumps({"checked": checked, "errors": errors, "tamperedPassed": tampered_passed}))
