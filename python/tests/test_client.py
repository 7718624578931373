"""The SDK against a real `stockade serve` (see conftest.py): every method, every error class,
streaming, files both ways, sync and async, timeouts and output caps."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import stockade
from stockade import (
    AsyncClient,
    BadRequest,
    Busy,
    Client,
    Limits,
    Output,
    PolicyNotFound,
    Result,
    RunFailed,
    ServerUnavailable,
    SessionBusy,
    SessionEnded,
    SessionNotFound,
    StockadeError,
    Unauthorized,
)
from stockade import _wire

OPENAPI = json.loads((Path(__file__).resolve().parents[2] / "docs" / "openapi.json").read_text())
SCHEMAS = OPENAPI["components"]["schemas"]

# (module (import "wasi_snapshot_preview1" "proc_exit" (func (param i32)))
#         (memory (export "memory") 1) (func (export "_start") i32.const 7 call 0))
EXIT_7_WASM = (
    bytes.fromhex("0061736d01000000")
    + bytes.fromhex("0108" "02" "60017f00" "600000")
    + bytes.fromhex("0224" "01" "16") + b"wasi_snapshot_preview1" + b"\x09proc_exit" + bytes.fromhex("0000")
    + bytes.fromhex("0302" "0101")
    + bytes.fromhex("0503" "01" "0001")
    + bytes.fromhex("0713" "02" "06") + b"memory" + bytes.fromhex("0200" "06") + b"_start" + bytes.fromhex("0001")
    + bytes.fromhex("0a08" "01" "06" "00" "4107" "1000" "0b")
)


def test_the_readme_quick_start(server) -> None:
    with stockade.Client(socket=server.socket) as client:
        result = client.run_python("print(6 * 7)")
        assert result.ok and result.stdout == "42\n", result
        assert result.exit_code == 0 and result.status == "ok"
        assert result.wall_ms > 0 and result.max_rss_bytes > 0
        assert any(e["layer"] == "namespace.net" and e["status"] == "enforced" for e in result.enforcement)


def test_the_quick_starts_run_verbatim(tmp_path: Path) -> None:
    """The server started by the README's command (`stockade serve --listen unix:$HOME/api.sock`,
    the shipped defaults), and the snippets of README.md and python/README.md as written."""
    from conftest import stockade_bin

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "HOME": str(tmp_path)}
    server = subprocess.Popen(
        [str(stockade_bin()), "serve", "--listen", f"unix:{tmp_path}/api.sock"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with Client(socket=str(tmp_path / "api.sock"), retries=0) as c:
            end = time.monotonic() + 60
            while True:
                try:
                    if c.health()["status"] == "ok":
                        break
                except ServerUnavailable:
                    pass
                assert time.monotonic() < end and server.poll() is None, "the server did not start"
                time.sleep(0.1)
        for readme in (root / "README.md", root / "python" / "README.md"):
            snippet = re.search(r"```python\n(.*?)```", readme.read_text(), re.S)
            assert snippet, f"no python block in {readme}"
            out = subprocess.run(
                [sys.executable, "-c", snippet.group(1)], env=env, capture_output=True, text=True, timeout=60
            )
            assert out.returncode == 0, out.stderr
            assert out.stdout.startswith("ok 42\n"), out.stdout
    finally:
        server.terminate()
        _, err = server.communicate(timeout=30)
    assert server.returncode == 0, err


def test_every_runtime_argv_and_stdin(server) -> None:
    with Client(socket=server.socket) as c:
        r = c.run_js("console.log(scriptArgs.join('+'))", argv=["a", "b"])
        assert (r.status, r.stdout) == ("ok", "a+b\n"), r
        r = c.run("python", "import sys; print(sys.stdin.read().upper())", stdin="piped in")
        assert r.stdout == "PIPED IN\n", r
        r = c.run_python("import sys; print(sys.stdin.buffer.read().hex())", stdin=b"\x00\xff")
        assert r.stdout == "00ff\n", r
        r = c.run_wasm(EXIT_7_WASM)
        assert (r.status, r.exit_code) == ("exited-nonzero", 7), r
        r = c.run_python("import sys; sys.stdout.buffer.write(b'\\xff\\xfe'); sys.stderr.write('oops')")
        assert (r.stdout_bytes, r.stderr) == (b"\xff\xfe", "oops"), r


def test_a_run_gives_back_its_value_and_figures(server) -> None:
    with Client(socket=server.socket) as c:
        r = c.run_python("x = 20\n1 + 1")
        assert (r.value, r.value_repr, r.outputs) == (2, None, []), r
        r = c.run_js("[1, 2].map(x => x * 2)")
        assert r.value == [2, 4], r
        r = c.run_python("(1, 'a')")
        assert (r.value, r.value_repr) == (None, "(1, 'a')"), r
        r = c.run_python("print(1)")
        assert (r.value, r.value_repr) == (None, None), r
        plt = subprocess.run(["/usr/bin/python3", "-c", "import matplotlib"], capture_output=True)
        if plt.returncode != 0:
            return  # the host's python3 has no matplotlib: no figures to give back
        r = c.run("python3", "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.gcf().dpi")
        assert (r.value, len(r.outputs), r.outputs[0].type) == (100.0, 1, "image/png"), r
        assert r.outputs[0].data.startswith(b"\x89PNG\r\n\x1a\n"), r.outputs[0].data[:8]


def test_files_go_in_and_come_back(server) -> None:
    code = (
        "import os\n"
        "rows = open('data.csv').read().split(',')\n"
        "os.makedirs('out', exist_ok=True)\n"
        "open('out/sum.txt', 'w').write(str(sum(map(int, rows))))\n"
        "open('out/raw.bin', 'wb').write(bytes(range(4)))\n"
        "open('skip.log', 'w').write('not asked for')\n"
    )
    with Client(socket=server.socket) as c:
        r = c.run_python(code, files={"data.csv": b"1,2,3", "notes.txt": "text too"}, return_files=["out/*"])
        assert r.ok, r
        assert r.files == {"out/raw.bin": b"\x00\x01\x02\x03", "out/sum.txt": b"6"}
        assert not r.files_capped and r.files_skipped == {}
        # Past the server's count cap (100), what is left out is named with the reason.
        r = c.run_python("for i in range(102): open(f'f{i:03}.txt', 'w').write('x')", return_files=["*.txt"])
        assert r.files_capped and len(r.files) == 100, r
        assert r.files_skipped == {
            "f100.txt": "over the request's return-files-max-count",
            "f101.txt": "left out after a cap was reached",
        }, r.files_skipped
        r = c.run_js("console.log(std.loadFile('notes.txt'))", files={"notes.txt": "from the host"})
        assert r.stdout == "from the host\n", r


def test_limits_time_and_output_caps(server) -> None:
    with Client(socket=server.socket) as c:
        r = c.run_python("while True: pass", limits={"wall_timeout_ms": 300})
        assert r.status == "timeout" and not r.ok, r
        with pytest.raises(RunFailed) as e:
            r.raise_for_status()
        assert e.value.result is r and e.value.code == "timeout"
        # Past its cap the run ends at once (output-limit), the cap's worth kept.
        r = c.run_python("print('x' * 10000)", limits={"stdout-max-bytes": 100})
        assert r.status == "output-limit" and not r.ok, r
        assert r.stdout_truncated and r.stdout_bytes == b"x" * 100, r
        assert 100 < r.report["stdout"]["bytes"] <= 10001
        with pytest.raises(RunFailed):
            c.run_python("raise SystemExit(3)").raise_for_status()


def test_typed_limits_match_the_server(server) -> None:
    with Client(socket=server.socket) as c:
        # The server's policies show their limits under the same keys the typed Limits has.
        info = c.info()
        for p in info["policies"]:
            limits = Limits.from_json(p["limits"])
            assert limits.wall_timeout_ms == p["limits"]["wall-timeout-ms"], p
            assert set(limits.to_json()) <= set(p["limits"]), p
        r = c.run_python("while True: pass", limits=Limits(wall_timeout_ms=300))
        assert r.status == "timeout", r
        with pytest.raises(BadRequest) as e:
            c.run_python("print(1)", limits=Limits(pids_max=10**9))
        assert e.value.field == "limits.pids-max" and "looser" in e.value.message, e.value
    # A key the server does not know is refused before anything is sent.
    with pytest.raises(TypeError, match="wall_timeout"):
        Limits.of({"wall_timeout": 5})
    with pytest.raises(TypeError, match="limits.fuel"):
        Limits(fuel=-1)


def test_bad_requests_name_their_field(server) -> None:
    with Client(socket=server.socket) as c:
        with pytest.raises(BadRequest) as e:
            c.run_python("print(1)", files={"../escape": b"x"})
        assert (e.value.status, e.value.code, e.value.field) == (400, "bad-request", "files[0].path")
        with pytest.raises(BadRequest) as e:
            c.run_python("print(1)", limits={"wall_timeout_ms": 10**9})
        assert e.value.field == "limits.wall-timeout-ms" and "policy" in e.value.message
        with pytest.raises(BadRequest) as e:
            c.run("cobol", "DISPLAY 'HI'.")
        assert e.value.field == "runtime"
        with pytest.raises(PolicyNotFound) as e:
            c.run_python("print(1)", policy="no-such-policy")
        assert (e.value.status, e.value.field) == (404, "policy")
        assert isinstance(e.value, StockadeError) and "no-such-policy" in str(e.value)


def test_every_error_code_has_its_status_and_its_class() -> None:
    # Every code docs/openapi.json lists (a new one fails here until the table has it), and no other.
    codes = {v for alt in SCHEMAS["ErrorCode"]["oneOf"] for v in alt.get("enum", [alt.get("const")])}
    assert codes and codes == set(_wire.ERROR_STATUS), codes ^ set(_wire.ERROR_STATUS)
    # A stream's error event gets its code's status and the class of an HTTP refusal with it.
    cases = {
        "bad-request": (BadRequest, 400),
        "payload-too-large": (BadRequest, 413),
        "forbidden": (Unauthorized, 403),
        "policy-not-found": (PolicyNotFound, 404),
        "session-not-found": (SessionNotFound, 404),
        "session-ended": (SessionEnded, 410),
        "session-busy": (SessionBusy, 409),
        "queue-full": (Busy, 429),
        "queue-timeout": (Busy, 503),
        "draining": (ServerUnavailable, 503),
        "internal": (ServerUnavailable, 500),
    }
    for code, (cls, status) in cases.items():
        e = _wire.stream_error({"code": code, "message": "m", "field": "f", "run": "r-0123456789abcdef"})
        assert (type(e), e.status, e.code, e.field, e.message) == (cls, status, code, "f", "m"), code
    assert _wire.stream_error({"code": "session-busy", "message": "m", "run": "r-1"}).run == "r-1"
    # A code this client does not know: the error as it came, no status.
    e = _wire.stream_error({"code": "a-new-code", "message": "m"})
    assert (type(e), e.status, e.code) == (StockadeError, None, "a-new-code")
    with pytest.raises(BadRequest) as raised:
        _wire.event(b'{"error": {"code": "bad-request", "message": "no", "field": "limits.fuel"}}\n')
    assert (raised.value.status, raised.value.field) == (400, "limits.fuel")


def test_the_answer_types_are_the_schemas() -> None:
    # Each TypedDict has its schema's keys, the required ones required (RuntimeRuns is a union).
    typed = {
        "Health": stockade.Health,
        "Warm": stockade.Warm,
        "Info": stockade.Info,
        "RuntimeInfo": stockade.RuntimeInfo,
        "PolicyInfo": stockade.PolicyInfo,
        "PolicyLimits": stockade.PolicyLimits,
        "Limits": stockade.RunLimits,
        "LayerReport": stockade.LayerReport,
        "RequestsInfo": stockade.RequestsInfo,
        "SessionsInfo": stockade.SessionsInfo,
        "SessionInfo": stockade.SessionInfo,
        "WorkspaceUse": stockade.WorkspaceUse,
        "BatchSummary": stockade.BatchSummary,
        "BatchAnswer": stockade.BatchAnswer,
    }
    for name, t in typed.items():
        schema = SCHEMAS[name]
        assert set(t.__required_keys__) == set(schema.get("required", [])), name
        assert set(t.__required_keys__) | set(t.__optional_keys__) == set(schema["properties"]), name
    runs = {k for alt in SCHEMAS["RuntimeRuns"]["anyOf"] for k in alt["properties"]}
    assert set(stockade.RuntimeRuns.__optional_keys__) == runs
    assert set(stockade._types.__all__) <= set(stockade.__all__)


def test_tcp_needs_the_token(server) -> None:
    with Client(url=server.url, token=server.token) as c:
        assert c.run_js("console.log(1 + 1)").stdout == "2\n"
        assert c.health()["status"] == "ok"
    with Client(url=server.url) as c:
        with pytest.raises(Unauthorized) as e:
            c.run_python("print(1)")
        assert e.value.status == 401
        assert c.health()["status"] == "ok", "health is open on TCP"
    with Client(url=server.url, token="wrong") as c:
        with pytest.raises(Unauthorized) as e:
            c.info()
        assert e.value.status == 403


def test_info_and_health(server) -> None:
    with Client(socket=server.socket) as c:
        info = c.info()
        # The fixture's runtimes (python3 when the host has it: conftest.py).
        expected = {"python", "javascript"} | ({"python3"} if Path("/usr/bin/python3").exists() else set())
        assert {r["name"] for r in info["runtimes"]} == expected
        assert "default" in {p["name"] for p in info["policies"]}
        assert info["api"] == "v1"
        h = c.health()
        assert h["status"] == "ok" and set(h["warm"]) == expected
        # The answers have the keys their types say.
        keys = lambda t: (set(t.__required_keys__), set(t.__required_keys__) | set(t.__optional_keys__))  # noqa: E731
        for value, t in [
            (info, stockade.Info),
            (info["runtimes"][0], stockade.RuntimeInfo),
            (info["policies"][0], stockade.PolicyInfo),
            (info["requests"], stockade.RequestsInfo),
            (info["sessions"], stockade.SessionsInfo),
            (h, stockade.Health),
            (h["warm"]["python"], stockade.Warm),
        ]:
            required, known = keys(t)
            assert required <= set(value) <= known, (t.__name__, set(value))


def test_streaming_gives_output_as_it_happens(server) -> None:
    code = "import time\nprint('first', flush=True)\ntime.sleep(1)\nprint('second')"
    with Client(socket=server.socket) as c:
        seen = []
        for event in c.stream_python(code):
            seen.append((time.monotonic(), event))
        outputs = [e for _, e in seen if isinstance(e, Output)]
        result = seen[-1][1]
        assert isinstance(result, Result) and result.ok, seen
        assert "".join(o.text for o in outputs) == "first\nsecond\n"
        assert result.stdout == "first\nsecond\n"
        first_at = next(t for t, e in seen if isinstance(e, Output) and "first" in e.text)
        assert seen[-1][0] - first_at > 0.5, "the first line came only with the end"
        events = list(c.stream_js("console.log('x'.repeat(50))", limits={"stdout-max-bytes": 10}))
        assert isinstance(events[-1], Result) and events[-1].stdout_truncated
        assert b"".join(e.data for e in events if isinstance(e, Output)) == b"x" * 10
        with pytest.raises(BadRequest):
            list(c.stream_python("print(1)", files={"/abs": b""}))


def test_the_async_client(server) -> None:
    async def main() -> None:
        async with AsyncClient(socket=server.socket) as c:
            rs = await asyncio.gather(c.run_python("print(1)"), c.run_js("console.log(2)"), c.run_wasm(EXIT_7_WASM))
            assert [r.stdout for r in rs[:2]] == ["1\n", "2\n"] and rs[2].exit_code == 7
            r = await c.run_python("print(open('a.txt').read())", files={"a.txt": "A"}, return_files="a.txt")
            assert (r.stdout, r.files) == ("A\n", {"a.txt": b"A"})
            events = [e async for e in c.stream_python("print('s')")]
            assert isinstance(events[-1], Result) and events[-1].stdout == "s\n"
            assert (await c.health())["status"] == "ok"
            assert "python" in {r["name"] for r in (await c.info())["runtimes"]}
            with pytest.raises(BadRequest):
                await c.run_python("print(1)", limits={"wall-timeout-ms": 10**9})
        async with AsyncClient(url=server.url) as c:
            with pytest.raises(Unauthorized):
                await c.run_js("1")

    asyncio.run(main())


def test_an_unreachable_server(tmp_path: Path) -> None:
    with Client(socket=str(tmp_path / "nobody.sock"), retries=1) as c:
        with pytest.raises(ServerUnavailable) as e:
            c.run_python("print(1)")
        assert e.value.status is None
    with pytest.raises(ValueError):
        Client(socket="/x", url="http://127.0.0.1:1")


def test_a_full_server_says_busy_and_a_retry_waits_its_turn(one_slot) -> None:
    long_run = "import time; time.sleep(1.5); print('done')"
    first: list = []
    t = threading.Thread(target=lambda: first.append(Client(socket=one_slot.socket).run_python(long_run)))
    t.start()
    time.sleep(0.5)
    with Client(socket=one_slot.socket, retries=0) as c:
        with pytest.raises(Busy) as e:
            c.run_js("console.log(1)")
        assert (e.value.status, e.value.code, e.value.retry_after) == (429, "queue-full", 1.0)
    # Refused before it ran: tried again after Retry-After, it runs once the slot is free.
    with Client(socket=one_slot.socket, retries=3) as c:
        assert c.run_js("console.log('after')").stdout == "after\n"
    t.join()
    assert first and first[0].stdout == "done\n"


def test_the_client_timeout_bounds_a_request(server) -> None:
    with Client(socket=server.socket, timeout=0.5) as c:
        with pytest.raises(ServerUnavailable):
            c.run_python("import time; time.sleep(3)")
