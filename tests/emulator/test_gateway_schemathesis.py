"""schemathesis over the gateway's own /openapi.json: the description is what the server does.

Two checks, through schemathesis's pytest integration (one subtest per operation):
``not_a_server_error`` (no input gives a 5xx) and ``negative_data_rejection`` (every request
the published schema calls invalid is refused with a 4xx, never served or answered 402). The
examples, coverage and fuzzing phases run with both valid and invalid data and a fixed seed, so
the run is the same every time and takes seconds. The coverage phase is the systematic part:
for every operation it sends bodies and parameters at and past each constraint the schema
states (missing required fields, wrong types, values out of range). Fuzzing adds a few random
bodies of each kind per operation on top (``max-examples``: 4; 12 took 19 s of CPU against
14 s, for more random cases from the same seed, not a new kind of input). schemathesis
is a declared dev dependency: if it is missing this module fails to import, it never skips.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from schemathesis.checks import negative_data_rejection, not_a_server_error

from x402lab.emulator.server import RunningEmulator, start_emulator
from x402lab.emulator.settings import EmulatorSettings

SEED = 402
CONFIG = {
    "seed": SEED,
    "generation": {"mode": "all", "max-examples": 4, "database": "none"},
    "phases": {
        "examples": {"enabled": True},
        "coverage": {"enabled": True},
        "fuzzing": {"enabled": True},
        "stateful": {"enabled": False},
    },
}


@pytest.fixture(scope="module")
def gateway() -> Iterator[RunningEmulator]:
    emulator = start_emulator(EmulatorSettings(job_seconds=0.3))
    yield emulator
    emulator.stop()


@pytest.fixture
def gateway_schema(gateway: RunningEmulator) -> schemathesis.BaseSchema:
    config = schemathesis.Config.from_dict(CONFIG)
    return schemathesis.openapi.from_url(f"{gateway.gateway_url}/openapi.json", config=config)


schema = schemathesis.pytest.from_fixture("gateway_schema")


@schema.parametrize()
def test_openapi_describes_what_the_gateway_accepts(case: schemathesis.Case) -> None:
    case.call_and_validate(checks=[not_a_server_error, negative_data_rejection])


def test_the_run_is_configured_as_documented(gateway_schema: schemathesis.BaseSchema) -> None:
    config = gateway_schema.config
    assert config.seed == SEED
    assert config.generation.modes and len(config.generation.modes) == 2  # valid and invalid
    phases = config.phases
    assert phases.examples.enabled and phases.coverage.enabled and phases.fuzzing.enabled
