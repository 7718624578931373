"""Batches through the SDK, against a real `stockade serve` (see conftest.py): a judge's batch (one
program against many inputs, one of them answered wrong), each run's own code and its ending, the
verdicts and their counts, a streamed batch yielding every index once (and hanging up early),
the refusals naming their field, sync and async."""

from __future__ import annotations

import asyncio
import json
import time
import typing
from pathlib import Path

import pytest

import stockade
from stockade import (
    AsyncClient,
    BadRequest,
    BatchEvent,
    BatchInput,
    BatchResult,
    BatchRun,
    Client,
    Limits,
    PolicyNotFound,
    Result,
)

SCHEMAS = json.loads((Path(__file__).resolve().parents[2] / "docs" / "openapi.json").read_text())["components"]["schemas"]

SQUARE = "n = int(input())\nprint(n * n)"


def test_a_judge_runs_one_program_against_many_inputs(server) -> None:
    # Input 7 is expected to print 50: the program is right, the expectation is not.
    inputs = [BatchInput(stdin=f"{i}\n", expect=f"{50 if i == 7 else i * i}\n") for i in range(20)]
    inputs.append({"stdin": b"20\n", "expect": "400"})  # a dict, stdin as bytes, no newline expected
    inputs.append({"stdin": "21"})  # no expect: no verdict
    with Client(socket=server.socket) as c:
        b = c.batch("python", code=SQUARE, inputs=inputs)
    assert isinstance(b, BatchResult) and b.batch_id.startswith("b-"), b
    assert len(b.results) == 22 and all(isinstance(r, Result) for r in b.results)
    # In the inputs' order, each a run of the batch's.
    assert [r.stdout for r in b.results] == [f"{i * i}\n" for i in range(22)]
    assert {(r.jail, r.batch_id, r.status) for r in b.results} == {("batch", b.batch_id, "ok")}
    assert b.verdicts == ["accepted"] * 7 + ["wrong-answer"] + ["accepted"] * 13 + [None]
    assert b.results[7].verdict == "wrong-answer" and b.results[21].verdict is None
    assert b.summary["runs"] == 22 and b.summary["statuses"] == {"ok": 22}
    assert b.summary["verdicts"] == {"accepted": 20, "wrong-answer": 1}
    assert b.summary["jails"] >= 1 and b.summary["wall-ms"] > 0
    assert b.answer["batch-id"] == b.batch_id and len(b.answer["results"]) == 22


def test_each_run_has_its_code_and_its_ending(server) -> None:
    runs = [
        BatchRun("print(1)", expect="1"),
        BatchRun("print(2)", expect="3"),
        BatchRun("raise ValueError('no')", expect=""),
        BatchRun("while True: pass", limits=Limits(wall_timeout_ms=300), expect=""),
        {"code": "print('x' * 100000)", "limits": {"stdout_max_bytes": 1000}, "expect": ""},
        BatchRun("import sys; print(sys.argv[1:], sys.stdin.read())", argv=["a", "b"], stdin="in"),
        BatchRun("print(7 * 6)", expect="42"),
    ]
    with Client(socket=server.socket) as c:
        b = c.batch("python", runs, limits={"wall_timeout_ms": 5000})
    assert [(r.status, r.verdict) for r in b.results] == [
        ("ok", "accepted"),
        ("ok", "wrong-answer"),
        ("exited-nonzero", "runtime-error"),
        ("timeout", "timeout"),
        ("output-limit", "output-limit"),
        ("ok", None),
        ("ok", "accepted"),
    ], b.results
    assert b.results[3].report["wall-timeout-ms"] == 300 and b.results[0].report["wall-timeout-ms"] == 5000
    assert b.results[4].stdout_truncated
    assert b.results[5].stdout == "['a', 'b'] in\n"
    assert b.summary["verdicts"] == {
        "accepted": 2, "wrong-answer": 1, "runtime-error": 1, "timeout": 1, "output-limit": 1,
    }, b.summary
    assert b.summary["statuses"] == {"ok": 4, "exited-nonzero": 1, "timeout": 1, "output-limit": 1}, b.summary
    # Exact: the newline console.log adds must be expected too.
    with Client(socket=server.socket) as c:
        b = c.batch("javascript", code="console.log(6 * 7)", inputs=[{"expect": "42"}, {"expect": "42\n"}], compare="exact")
    assert b.verdicts == ["wrong-answer", "accepted"], b.results


def test_a_streamed_batch_yields_every_index_once(server) -> None:
    runs = [BatchRun(f"print({i})", expect=str(i if i != 5 else -1)) for i in range(30)]
    with Client(socket=server.socket) as c:
        stream = c.batch_stream("python", runs)
        assert stream.summary is None and stream.batch_id is None
        seen = {}
        for ev in stream:
            assert isinstance(ev, BatchEvent) and isinstance(ev.result, Result)
            i, result = ev
            assert i not in seen, f"index {i} twice"
            seen[i] = result
        assert sorted(seen) == list(range(30))
        assert all(r.stdout == f"{i}\n" for i, r in seen.items()), seen
        assert seen[5].verdict == "wrong-answer"
        assert stream.batch_id is not None and stream.batch_id.startswith("b-"), stream.batch_id
        assert {r.batch_id for r in seen.values()} == {stream.batch_id}
        assert stream.summary is not None and stream.summary["runs"] == 30
        assert stream.summary["verdicts"] == {"accepted": 29, "wrong-answer": 1}
        assert list(stream) == [], "a stream is iterated once"
        # One program against many inputs, streamed.
        events = list(c.batch_stream("javascript", code="console.log(std.in.getline())", inputs=[{"stdin": f"{i}\n"} for i in range(5)]))
        assert sorted((i, r.stdout) for i, r in events) == [(i, f"{i}\n") for i in range(5)]


def test_a_stream_left_early_hangs_up_and_the_server_goes_on(server) -> None:
    slow = "import time\nt = time.time()\nwhile time.time() - t < 0.05: pass\nprint('x')"
    with Client(socket=server.socket) as c:
        t = time.monotonic()
        # 200 runs of 50 ms on at most two jails: 5 s and more, were it read to its end.
        with c.batch_stream("python", [{"code": slow}] * 200) as stream:
            first = [next(stream) for _ in range(3)]
        assert time.monotonic() - t < 4, "leaving the stream waited for the batch"
        assert [r.stdout for _, r in first] == ["x\n"] * 3
        assert stream.summary is None, "a stream left early has no summary"
        assert c.run_python("print(5)").stdout == "5\n"


def test_a_bad_batch_is_refused_naming_its_field(server) -> None:
    one = [BatchRun("print(1)")]
    with Client(socket=server.socket) as c:
        for call in (c.batch, lambda *a, **k: list(c.batch_stream(*a, **k))):
            with pytest.raises(BadRequest) as e:
                call("python", [BatchRun("1", limits={"memory_max_bytes": 1 << 28})])
            assert (e.value.status, e.value.code, e.value.field) == (400, "bad-request", "runs[0].limits.memory-max-bytes")
            assert "a batch's runs share their jail's memory" in e.value.message, e.value
        # The batch's own memory limit is its jails'.
        assert c.batch("python", one, limits=Limits(memory_max_bytes=1 << 28)).results[0].stdout == "1\n"
        cases = [
            (dict(runs=[]), "runs"),
            (dict(runs=one, code="print(1)", inputs=[{}]), "runs"),
            (dict(inputs=[{}]), "code"),
            (dict(code="print(1)", inputs=[{"stdin": "a"}, {"code": "print(2)"}]), "inputs[1].code"),
            (dict(runs=[{"code": "1"}, {"code": "1", "limits": {"pids_max": 10}}]), "runs[1].limits.pids-max"),
            (dict(runs=[{"code": "1", "limits": {"wall_timeout_ms": 2000}}], limits={"wall_timeout_ms": 1000}), "runs[0].limits.wall-timeout-ms"),
            (dict(runs=one, limits={"wall_timeout_ms": 10**9}), "limits.wall-timeout-ms"),
            (dict(runs=one, compare="fuzzy"), "compare"),
        ]
        for kw, field in cases:
            with pytest.raises(BadRequest) as e:
                c.batch("python", **kw)
            assert (e.value.status, e.value.field) == (400, field), (kw, e.value)
        with pytest.raises(BadRequest) as e:
            c.batch("cobol", one)
        assert e.value.field == "runtime"
        with pytest.raises(PolicyNotFound) as e:
            c.batch("python", one, policy="no-such-policy")
        assert (e.value.status, e.value.field) == (404, "policy")
    # What this client cannot send is refused before anything is sent.
    with Client(socket=server.socket) as c:
        with pytest.raises(TypeError, match=r"runs\[1\]: unknown key 'nope'"):
            c.batch("python", [{"code": "1"}, {"code": "1", "nope": 1}])
        with pytest.raises(TypeError, match="runs is a list"):
            c.batch("python", "print(1)")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="limits"):
            c.batch_stream("python", [BatchRun("1", limits={"wall_timeout": 5})])


def test_the_async_client_s_batches(server) -> None:
    async def main() -> None:
        async with AsyncClient(socket=server.socket) as c:
            b, r = await asyncio.gather(
                c.batch("python", code=SQUARE, inputs=[BatchInput(stdin=str(i), expect=str(i * i + (i == 3))) for i in range(6)]),
                c.run_js("console.log(1)"),
            )
            assert r.stdout == "1\n"
            assert b.summary["verdicts"] == {"accepted": 5, "wrong-answer": 1} and b.verdicts[3] == "wrong-answer"
            stream = c.batch_stream("javascript", [BatchRun(f"console.log({i})", expect=str(i)) for i in range(12)])
            seen = [(i, res.stdout, res.verdict) async for i, res in stream]
            assert sorted(seen) == [(i, f"{i}\n", "accepted") for i in range(12)]
            assert stream.summary is not None and stream.summary["verdicts"] == {"accepted": 12}
            assert stream.batch_id is not None and stream.batch_id.startswith("b-")
            with pytest.raises(BadRequest) as e:
                async for _ in c.batch_stream("python", [BatchRun("1", limits={"pids_max": 10})]):
                    pass
            assert e.value.field == "runs[0].limits.pids-max"
            async with c.batch_stream("python", [BatchRun("print(0)")] * 50) as early:
                async for _ in early:
                    break
            assert early.summary is None
            assert (await c.run_python("print(2)")).stdout == "2\n"

    asyncio.run(main())


def test_the_verdicts_and_the_comparisons_are_the_schemas() -> None:
    for name, t in (("Verdict", stockade.Verdict), ("Compare", stockade.Compare)):
        consts = {alt["const"] for alt in SCHEMAS[name]["oneOf"]}
        assert set(typing.get_args(t)) == consts, name
    # A batch's run as the helper types send it: the schema's keys (stdin-base64 for bytes).
    run = set(SCHEMAS["BatchRunBody"]["properties"])
    assert {f.replace("_", "-") for f in BatchRun.__dataclass_fields__} | {"stdin-base64"} == run
    assert {f.replace("_", "-") for f in BatchInput.__dataclass_fields__} | {"stdin-base64", "code"} == run
    # A run's result has the batch's keys the report schema names.
    assert {"verdict", "jail", "batch-id"} <= set(SCHEMAS["RunResult"]["properties"])
