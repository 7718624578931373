"""Sessions through the SDK, against a real `stockade serve` (see conftest.py): a file uploaded,
transformed by Python, downloaded; a file one run writes read by the next; the errors of a busy,
an ended and a foreign session; sync and async."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import pytest

from stockade import (
    AsyncClient,
    BadRequest,
    Client,
    FileInfo,
    SessionBusy,
    SessionEnded,
    SessionNotFound,
    Unauthorized,
)


def test_a_file_round_trip_and_two_turns(server) -> None:
    with Client(socket=server.socket) as client, client.session("python") as s:
        assert s.id.startswith("s-") and s.info["mode"] == "workspace"
        info = s.upload("temps.csv", "city,temp\nOslo,3\nLima,19\n")
        assert isinstance(info, FileInfo) and info.bytes == 25
        r = s.run(
            "import csv\n"
            "rows = list(csv.DictReader(open('temps.csv')))\n"
            "open('warm.txt', 'w').write(','.join(r['city'] for r in rows if int(r['temp']) > 10))\n"
            "print(len(rows), 'cities')",
            return_files="*.txt",
        )
        assert r.ok and r.stdout == "2 cities\n", r
        assert r.files == {"warm.txt": b"Lima"}
        assert r.session is not None and r.session["id"] == s.id and r.session["workspace"]["files"] == 2
        # The next turn reads what the last one wrote.
        assert s.run("print(open('warm.txt').read())").stdout == "Lima\n"
        assert s.download("warm.txt") == b"Lima"
        assert [f.path for f in s.files()] == ["temps.csv", "warm.txt"]
        s.upload("bin/data.bin", bytes(range(256)))
        assert s.download("bin/data.bin") == bytes(range(256))
        s.remove("temps.csv")
        with pytest.raises(SessionNotFound):
            s.download("temps.csv")
        with pytest.raises(BadRequest) as e:
            s.upload("../escape", b"x")
        assert e.value.field == "path"
        with pytest.raises(BadRequest) as e:
            s.run("1", limits={"wall_timeout_ms": 10**9})
        assert e.value.field == "limits.wall-timeout-ms"
        sid = s.id
    # Leaving the block ended it.
    with Client(socket=server.socket) as client:
        with pytest.raises(SessionEnded) as e:
            client._request("GET", f"/v1/sessions/{sid}")
        assert "deleted" in str(e.value)


def test_one_run_at_a_time_and_a_session_is_its_token_s(server) -> None:
    with Client(url=server.url, token=server.token) as client, client.session(
        "python", limits={"wall_timeout_ms": 3000}
    ) as s:
        done = threading.Event()

        def long() -> None:
            try:
                s.run("while True: pass")
            finally:
                done.set()

        t = threading.Thread(target=long)
        t.start()
        end = time.monotonic() + 10
        while s.refresh().get("running") is None and time.monotonic() < end:
            time.sleep(0.02)
        with pytest.raises(SessionBusy) as e:
            s.run("print(1)")
        assert e.value.run == s.info["running"]
        t.join()
        # The unix socket's clients do not reach a token's session.
        with Client(socket=server.socket) as other:
            with pytest.raises(SessionNotFound):
                other._request("GET", f"/v1/sessions/{s.id}")
        with Client(url=server.url, token="a-token-the-server-does-not-know") as stranger:
            with pytest.raises(Unauthorized):
                stranger._request("GET", f"/v1/sessions/{s.id}")


def test_a_fork_goes_on_on_its_own(server) -> None:
    with Client(socket=server.socket) as client, client.session("python") as s:
        s.upload("n.txt", "1")
        with s.fork() as f:
            assert f.id != s.id and f.info["forked-from"] == s.id and f.info["runs"] == 0
            assert f.run("open('n.txt', 'w').write('2')").ok
            assert (s.download("n.txt"), f.download("n.txt")) == (b"1", b"2")
        with client.session("python", mode="live") as live:
            live.run("x = 41")
            assert live.hibernate()["state"] == "hibernated" and live.info["image-bytes"] > 0
            with live.fork() as g:
                assert g.info["state"] == "hibernated"
                r = g.run("print(x + 1)")
                assert (r.stdout, r.interpreter) == ("42\n", "resumed") and r.resume_ms > 0
            r = live.run("print(x)")
            assert (r.stdout, r.interpreter) == ("41\n", "resumed")
            with pytest.raises(BadRequest) as e:
                s.hibernate()
            assert e.value.field == "mode"


def test_async_sessions(server) -> None:
    async def main() -> None:
        async with AsyncClient(socket=server.socket) as client:
            async with await client.session("javascript") as s:
                await s.upload("in.txt", "abc")
                r = await s.run("const t = std.loadFile('/app/in.txt'); const f = std.open('/app/out.txt', 'w'); f.puts(t.toUpperCase()); f.close(); console.log(t)")
                assert r.ok and r.stdout == "abc\n", r
                assert await s.download("out.txt") == b"ABC"
                assert [f.path for f in await s.files()] == ["in.txt", "out.txt"]
                async with await s.fork() as f:
                    assert f.info["forked-from"] == s.id and await f.download("out.txt") == b"ABC"
            async with await client.session("python", mode="live") as live:
                await live.run("y = 'kept'")
                assert (await live.hibernate())["state"] == "hibernated"
                r = await live.run("print(y)")
                assert (r.stdout, r.interpreter) == ("kept\n", "resumed")

    asyncio.run(main())


def test_a_live_session_keeps_its_variables(server) -> None:
    with Client(socket=server.socket) as client, client.session("python", mode="live") as s:
        assert s.info["mode"] == "live"
        r = s.run("x = 41")
        assert r.ok and r.interpreter == "started", r
        r = s.run("print(x + 1)")
        assert r.stdout == "42\n" and r.interpreter == "kept", r
        # Past its wall limit the interpreter is taken down; the files stay, the variables go.
        s.upload("note.txt", "kept")
        r = s.run("while True: pass", limits={"wall_timeout_ms": 300})
        assert r.status == "timeout" and r.interpreter == "restarted", r
        r = s.run("print(open('note.txt').read(), 'x' in globals())")
        assert r.stdout == "kept False\n" and r.interpreter == "started", r


def test_an_async_live_session(server) -> None:
    async def main() -> None:
        async with AsyncClient(socket=server.socket) as client:
            async with await client.session("javascript", mode="live") as s:
                await s.run("var n = 1")
                r = await s.run("n += 1; console.log(n)")
                assert r.stdout == "2\n" and r.interpreter == "kept", r

    asyncio.run(main())


def test_an_error_inside_a_stream_is_raised_as_its_class(server) -> None:
    # A live session's interpreter holds its memory limit for its life: a run asking another is
    # refused inside the run, which streams (it has a tool), so the refusal is the stream's last
    # event, not an HTTP status. It is raised as the HTTP refusal would be.
    tools = {"t": lambda a: a}
    with Client(socket=server.socket) as client, client.session("python", mode="live") as s:
        with httpx.Client(transport=httpx.HTTPTransport(uds=server.socket), base_url="http://localhost") as raw:
            body = {"code": "1", "limits": {"memory-max-bytes": 50_000_000}, "tools": [{"name": "t"}]}
            r = raw.post(f"/v1/sessions/{s.id}/runs", params={"stream": "ndjson"}, json=body)
            last = json.loads(r.text.strip().splitlines()[-1])
            assert r.status_code == 200 and last["error"]["code"] == "bad-request", r.text
        with pytest.raises(BadRequest) as e:
            s.run("print(1)", limits={"memory_max_bytes": 50_000_000}, tools=tools)
        assert (e.value.status, e.value.code, e.value.field) == (400, "bad-request", "limits.memory-max-bytes")
        assert "live session" in e.value.message, e.value
        # Nothing ran; the session goes on.
        r2 = s.run("print(2)", tools=tools)
        assert r2.stdout == "2\n", r2

    async def main() -> None:
        async with AsyncClient(socket=server.socket) as client:
            async with await client.session("python", mode="live") as s:
                with pytest.raises(BadRequest) as e:
                    await s.run("print(1)", limits={"memory_max_bytes": 50_000_000}, tools=tools)
                assert (e.value.status, e.value.field) == (400, "limits.memory-max-bytes")

    asyncio.run(main())
