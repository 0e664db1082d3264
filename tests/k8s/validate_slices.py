#!/usr/bin/env python3
"""Validates the ResourceSlices k8s_slice_dump builds against the v1 schema,
and checks that the schema refuses broken slices (so this test can fail).

    validate_slices.py DUMP_TOOL SCHEMA
"""
import copy
import json
import pathlib
import subprocess
import sys
import tempfile

import jsonschema


def broken_variants(good):
    """(what, slice) pairs that the API would refuse."""
    def mutate(fn):
        s = copy.deepcopy(good)
        fn(s)
        return s

    def first_taint(s):
        return next(d for d in s["spec"]["devices"] if "taints" in d)["taints"][0]

    dev = lambda s: s["spec"]["devices"][0]
    return [
        ("taint effect PreferNoSchedule", mutate(lambda s: first_taint(s).update(effect="PreferNoSchedule"))),
        ("taint without key", mutate(lambda s: first_taint(s).pop("key"))),
        ("no driver", mutate(lambda s: s["spec"].pop("driver"))),
        ("pool without generation", mutate(lambda s: s["spec"]["pool"].pop("generation"))),
        ("resourceSliceCount 0", mutate(lambda s: s["spec"]["pool"].update(resourceSliceCount=0))),
        ("quantity with a space", mutate(lambda s: dev(s)["capacity"]["memory"].update(value="80 Gi"))),
        ("unknown spec field", mutate(lambda s: s["spec"].update(colour="red"))),
        ("attribute with two values",
         mutate(lambda s: dev(s)["attributes"]["index"].update(string="0"))),
        ("upper-case device name", mutate(lambda s: dev(s).update(name="GPU-0"))),
        ("version not semver",
         mutate(lambda s: dev(s)["attributes"]["computeCapability"].update(version="9.0"))),
        ("capacity without value", mutate(lambda s: dev(s)["capacity"]["compute"].pop("value"))),
        ("both validValues and validRange",
         mutate(lambda s: dev(s)["capacity"]["compute"]["requestPolicy"].update(validValues=["100"]))),
        ("wrong apiVersion", mutate(lambda s: s.update(apiVersion="resource.k8s.io/v1beta1"))),
    ]


def main():
    tool, schema_path = sys.argv[1], sys.argv[2]
    schema = json.loads(pathlib.Path(schema_path).read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(schema)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([tool, tmp], check=True)
        files = sorted(pathlib.Path(tmp).glob("*.json"))
        if len(files) < 5:
            print(f"FAIL: {tool} wrote {len(files)} slices")
            return 1
        for path in files:
            errors = list(validator.iter_errors(json.loads(path.read_text())))
            for e in errors:
                print(f"FAIL {path.name}: {'/'.join(map(str, e.absolute_path))}: {e.message}")
            failures += len(errors)
            print(f"{path.name}: {'ok' if not errors else 'INVALID'}")
        drained = json.loads((pathlib.Path(tmp) / "drained.json").read_text())
    for what, bad in broken_variants(drained):
        if validator.is_valid(bad):
            print(f"FAIL: the schema accepts a broken slice: {what}")
            failures += 1
        else:
            print(f"refused as it should be: {what}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
