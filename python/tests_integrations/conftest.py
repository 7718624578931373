"""The integrations' tests: a real `stockade serve` (python/tests/conftest.py's `Server`, never a
mock) and scripted models in place of an LLM (no network, no API keys).

Run apart from python/tests, in a virtual environment with the extras installed:
`pip install './python[smolagents,langchain,openai-agents]' pytest`. A framework that is not
installed fails its tests' collection: nothing here is skipped.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any, Iterator

import pytest

import stockade

# No framework may phone home (the OpenAI Agents SDK's traces), whatever the test does.
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

_CORE = Path(__file__).resolve().parents[1] / "tests" / "conftest.py"
_spec = importlib.util.spec_from_file_location("stockade_core_conftest", _CORE)
assert _spec is not None and _spec.loader is not None
_core = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_core)
Server = _core.Server


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One server for every test (each test's sessions are its own)."""
    s = Server(tmp_path_factory.mktemp("serve"), server="concurrency = 4\nqueue = 16")
    yield s
    s.stop()
    assert s.proc.returncode == 0, "\n".join(s.log)


@pytest.fixture()
def client(server: Any) -> Iterator[stockade.Client]:
    with stockade.Client(socket=server.socket) as c:
        yield c


@pytest.fixture()
def async_client(server: Any) -> stockade.AsyncClient:
    return stockade.AsyncClient(socket=server.socket)
