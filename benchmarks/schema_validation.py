"""CPU of x402lab's JSON Schema checks (``jsonschema_rs``) against ``jsonschema`` doing the
same work, both measured in this run.

Run with ``python benchmarks/schema_validation.py`` (``--answers N``, ``--checks N``).

- import: CPU of importing the validator in a fresh interpreter. Where Jupyter is installed,
  ``jsonschema`` imports its format checkers, and rfc3987-syntax builds an Earley grammar
  with lark at import: every process that validated paid it (kernels, CLI children,
  emulator subprocesses, Dask workers).
- typed answers: N answers of a five-field schema (bounds, a nullable pattern, maxItems, a
  nullable anyOf with maxLength, a nullable email format), a quarter invalid, each checked
  with its message: ``answer_schema.validator`` + ``schema_problem`` against jsonschema's
  ``Draft202012Validator`` with its format checker and ``best_match`` (what x402lab ran
  before).
- request check: ``RequestSchema.check`` of a valid chat body against the emulator's
  published schema (the client's check before signing), against jsonschema listing the
  errors of the same body on the same schema document.

Prints CPU per unit of work and each ratio (jsonschema / x402lab).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import jsonschema
from jsonschema.exceptions import best_match

from x402lab.batch.kinds import _answer_schema as answer_schema
from x402lab.batch.kinds import output_spec
from x402lab.emulator.gateway.catalog import Catalog
from x402lab.emulator.gateway.discovery import openapi
from x402lab.emulator.settings import EmulatorSettings
from x402lab.gateway.params import find_route, request_schema_of, routes_of

SCHEMA = {
    "type": "object",
    "properties": {
        "rating": {"type": "integer", "minimum": 1, "maximum": 5},
        "order": {"type": ["string", "null"], "pattern": "^ORD-[0-9]{4}$"},
        "keywords": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "summary": {"anyOf": [{"type": "string", "maxLength": 40}, {"type": "null"}]},
        "email": {"type": ["string", "null"], "format": "email"},
    },
    "required": ["rating", "order", "keywords", "summary", "email"],
}
CHAT = {
    "model": "zai-org-glm-4.7-flash",
    "messages": [{"role": "user", "content": "Summarise this review: " + "fine " * 40}],
    "max_tokens": 256,
    "temperature": 0.2,
}


def cpu(work: Callable[[], Any]) -> float:
    start = time.process_time()
    work()
    return time.process_time() - start


def import_cpu(module: str) -> float:
    code = f"import time; t = time.process_time(); import {module}; print(time.process_time() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


def answers(n: int) -> list[dict[str, Any]]:
    rng = random.Random(1)
    made = []
    for i in range(n):
        bad = i % 4 == 0
        made.append(
            {
                "rating": rng.choice([0, 6, 9]) if bad else rng.randint(1, 5),
                "order": f"ORD-{1000 + i % 9000}" if not bad or i % 8 else "ORD-x",
                "keywords": ["a", "b", "c"] if bad and i % 3 == 0 else ["a"],
                "summary": "x" * 50 if bad else "fine",
                "email": None if i % 2 else "a@b.example",
            }
        )
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=2000)
    parser.add_argument("--checks", type=int, default=2000)
    args = parser.parse_args()

    rs_import = min(import_cpu("jsonschema_rs") for _ in range(3))
    py_import = min(import_cpu("jsonschema") for _ in range(3))
    print(
        f"import: jsonschema_rs {rs_import * 1000:.0f} ms CPU, jsonschema"
        f" {py_import * 1000:.0f} ms ({py_import / rs_import:.0f}x)"
    )

    entries = answers(args.answers)
    spec = output_spec(schema=SCHEMA)
    assert spec is not None
    ours = answer_schema.validator(spec.answer_schema())
    theirs = jsonschema.Draft202012Validator(
        spec.answer_schema(), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    found: list[Any] = []
    rs = cpu(lambda: found.extend(answer_schema.schema_problem(ours, e) for e in entries))
    py = cpu(lambda: [best_match(theirs.iter_errors(e)) for e in entries])
    invalid = sum(p is not None for p in found)
    print(
        f"{args.answers:,} typed answers ({invalid:,} invalid), checked with messages:"
        f" x402lab {rs * 1000:.1f} ms CPU, jsonschema {py * 1000:.1f} ms ({py / rs:.0f}x)"
    )

    document = json.loads(json.dumps(openapi(EmulatorSettings(), Catalog.from_fixtures(), "x")))
    route = find_route(routes_of(document), "POST", "/api/v1/chat/completions")
    assert route is not None
    schema = request_schema_of(document, route)
    assert schema is not None
    schema.check(CHAT, caller="chat()")  # builds the validator once, as a lab does per route
    root = {"allOf": [schema.schema], "components": document.get("components", {})}
    judge = jsonschema.Draft202012Validator(root)
    assert list(judge.iter_errors(CHAT)) == []
    n = args.checks
    rs = cpu(lambda: [schema.check(CHAT, caller="chat()") for _ in range(n)]) / n
    py = cpu(lambda: [list(judge.iter_errors(CHAT)) for _ in range(n)]) / n
    print(
        f"one request check of a chat body: x402lab {rs * 1e6:.0f} µs CPU, jsonschema"
        f" {py * 1e6:.0f} µs ({py / rs:.1f}x)"
    )


if __name__ == "__main__":
    main()
