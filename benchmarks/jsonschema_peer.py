"""Python peers of kubeconform for the ``check`` benchmark: schema validation alone, in Python.

Usage: python benchmarks/jsonschema_peer.py {jsonschema,fastjsonschema} SCHEMA FILE

Reads every document of FILE with PyYAML's libyaml loader (the fastest YAML reader for Python)
and validates each against SCHEMA, a JSON Schema file (the benchmark passes the DaskCluster
schema as converted for kubeconform), with one of two validators, built once:

* ``jsonschema``: the reference implementation (the validator for the schema's draft);
* ``fastjsonschema``: the schema compiled to Python code, the package that calls itself the
  fastest Python implementation.

What a Python tool that only validates schemas, as kubeconform does, costs, start-up included.
No policy, no line lookup. Prints ``Valid: N, Invalid: M`` as kubeconform's summary does; exits
1 when a document is invalid.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import yaml


def validator(kind: str, schema: dict[str, Any]) -> Callable[[Any], bool]:
    """``kind``'s validator for ``schema``: True for a valid document."""
    if kind == "fastjsonschema":
        import fastjsonschema

        check = fastjsonschema.compile(schema)

        def valid(doc: Any) -> bool:
            try:
                check(doc)
            except fastjsonschema.JsonSchemaException:
                return False
            return True

        return valid
    import jsonschema

    return cast(Callable[[Any], bool], jsonschema.validators.validator_for(schema)(schema).is_valid)


def main(argv: list[str]) -> int:
    """Validate every document of ``argv[2]`` against the schema in ``argv[1]``."""
    kind, schema, path = argv
    valid = validator(kind, json.loads(Path(schema).read_text()))
    good = bad = 0
    for doc in yaml.load_all(Path(path).read_text(), Loader=yaml.CSafeLoader):
        if valid(doc):
            good += 1
        else:
            bad += 1
    print(f"Valid: {good}, Invalid: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
