"""Host calls through the SDK, against a real `stockade serve` (see conftest.py): a run calls
plain Python functions of this process (``tools={"name": fn}``), a tool's exception reaches the
run as ``stockade_host.ToolError``, the budgets are the server's, the JavaScript guest's
``host.call``, a session's run (a live one too) and the async client (with an async tool) too. Needs the host's /usr/bin/python3 (the python3 runtime)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from stockade import AsyncClient, BadRequest, Client, Tool

pytestmark = pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="no /usr/bin/python3")

CODE = """
import stockade_host as h
print(h.call("search", {"q": "jails"}))
try:
    h.call("broken")
except h.ToolError as e:
    print("error:", e)
"""


def test_a_run_calls_this_process_s_functions(server) -> None:
    seen = []

    def search(args):
        seen.append(args)
        return {"hits": [args["q"], "sandboxes"]}

    def broken(args):
        raise RuntimeError("the index is down")

    with Client(socket=server.socket) as client:
        r = client.run("python3", CODE, tools={"search": search, "broken": broken})
        assert r.ok, r
        assert r.stdout == "{'hits': ['jails', 'sandboxes']}\nerror: RuntimeError: the index is down\n", r
        assert seen == [{"q": "jails"}]
        calls = r.report["host-calls"]
        assert [(c["name"], c["outcome"]) for c in calls] == [("search", "ok"), ("broken", "error")]
        # The server's budgets: past max-calls, refused in the run.
        r = client.run(
            "python3",
            "import stockade_host as h\nfor i in range(3):\n    try: print(h.call('t', i))\n    except h.ToolError as e: print('no')",
            tools={"t": Tool(lambda i: i * 2, max_calls=2)},
        )
        assert r.stdout == "0\n2\nno\n", r
        # A budget out of the server's bounds: said, naming the field.
        with pytest.raises(BadRequest) as e:
            client.run_js("1", tools={"t": Tool(search, timeout_ms=600_000)})
        assert e.value.field == "tools[0].timeout-ms"
        with client.session("python3") as s:
            r = s.run("import stockade_host as h\nprint(h.call('search', {'q': 'x'}))", tools={"search": search})
            assert r.stdout == "{'hits': ['x', 'sandboxes']}\n", r


def test_the_wasm_guest_calls_back_too(server) -> None:
    with Client(socket=server.socket) as client:
        r = client.run_python(CODE, tools={"search": lambda a: {"hits": [a["q"]]}, "broken": lambda a: 1 / 0})
        assert r.stdout == "{'hits': ['jails']}\nerror: ZeroDivisionError: division by zero\n", r


def test_a_tool_that_returns_nothing_answers_none(server) -> None:
    # `None` is JSON's null, a value like any other (the run goes on, the session is free again).
    with Client(socket=server.socket) as client:
        r = client.run_python("import stockade_host as h\nprint(h.call('u', {}))", tools={"u": lambda a: None})
        assert (r.status, r.stdout) == ("ok", "None\n"), r
        r = client.run_js("print(JSON.stringify(host.call('u', {})))", tools={"u": lambda a: None})
        assert (r.status, r.stdout) == ("ok", "null\n"), r
        with client.session("python3") as s:
            r = s.run("import stockade_host as h\nprint(h.call('u', {}))", tools={"u": lambda a: None})
            assert (r.status, r.stdout) == ("ok", "None\n"), r
            assert s.run("print(1)").stdout == "1\n"


def test_the_javascript_guest_and_a_live_session_call_back(server) -> None:
    with Client(socket=server.socket) as client:
        r = client.run_js(
            "print(JSON.stringify(host.call('search', {q: 'jails'})));\n"
            "try { host.call('broken') } catch (e) { print(e.name + ': ' + e.message) }",
            tools={"search": lambda a: {"hits": [a["q"]]}, "broken": lambda a: 1 / 0},
        )
        assert r.stdout == '{"hits":["jails"]}\nToolError: ZeroDivisionError: division by zero\n', r
        with client.session("python", mode="live") as s:
            r = s.run("import stockade_host as h\nx = h.call('add', [40, 2])", tools={"add": lambda a: sum(a)})
            assert r.ok and r.interpreter == "started", r
            r = s.run("print(x)")
            assert (r.stdout, r.interpreter) == ("42\n", "kept"), r


def test_async_tools(server) -> None:
    async def lookup(args):
        await asyncio.sleep(0.01)
        return args + 1

    async def main() -> None:
        async with AsyncClient(socket=server.socket) as client:
            r = await client.run("python3", "import stockade_host as h\nprint(h.call('lookup', 41))", tools={"lookup": lookup})
            assert r.stdout == "42\n", r

    asyncio.run(main())
