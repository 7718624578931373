"""A lost answer, a hostile or broken server: what the SDK does about them. The run's server is
the real one; what stands between (a proxy that drops an answer) or instead of it (a server that
trickles, one that sends a bad id) is a socket of the test's own, playing the broken part."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Callable, List

import httpx
import pytest

import stockade


def _serve(path: str, handle: Callable[[socket.socket, int], None]) -> threading.Thread:
    """Accepts connections on a unix socket at `path`, each handled by `handle(conn, n)` in turn."""
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(8)

    def loop() -> None:
        n = 0
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn, n), daemon=True).start()
            n += 1

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return t


def _request(conn: socket.socket) -> bytes:
    """One HTTP request read whole from `conn` (its head and its Content-Length of body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip())
    while len(body) < length:
        body += conn.recv(65536)
    return head + b"\r\n\r\n" + body


def _body(answer: bytes) -> bytes:
    """An HTTP answer's body, its chunks joined when it came chunked."""
    head, _, rest = answer.partition(b"\r\n\r\n")
    if b"chunked" not in head.lower():
        return rest
    out = b""
    while rest:
        size, _, rest = rest.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            break
        out, rest = out + rest[:n], rest[n + 2 :]
    return out


def _runs(server) -> float:
    with httpx.Client(transport=httpx.HTTPTransport(uds=server.socket), base_url="http://localhost") as c:
        text = c.get("/metrics").text
    return sum(
        float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith("stockade_runs_total{")
    )


def test_a_run_whose_answer_was_lost_is_asked_again_and_runs_once(server, tmp_path: Path) -> None:
    """The first answer is lost between the server and the client (a proxy reads it and closes
    the connection): the SDK asks again with the run's key and gets that answer; the server ran it
    once."""
    proxy = str(tmp_path / "proxy.sock")
    firsts: List[bytes] = []

    def handle(conn: socket.socket, n: int) -> None:
        with conn:
            while True:
                req = _request(conn)
                if not req:
                    return
                up = socket.socket(socket.AF_UNIX)
                up.connect(server.socket)
                up.sendall(req.replace(b"keep-alive", b"close"))
                answer = b""
                while chunk := up.recv(65536):
                    answer += chunk
                up.close()
                if n == 0 and not firsts:
                    firsts.append(answer)
                    return  # lost: the connection closes without it
                conn.sendall(answer)
                return

    _serve(proxy, handle)
    before = _runs(server)
    with stockade.Client(socket=proxy) as c:
        r = c.run_python("import random\nprint(random.random())")
    assert firsts, "the proxy saw no first answer"
    first = json.loads(_body(firsts[0]))
    assert r.stdout == first["stdout"]["text"], "the answer is the first run's"
    assert _runs(server) - before == 1, "the run happened once"


def test_an_answer_that_trickles_is_bounded_by_the_timeout(tmp_path: Path) -> None:
    """A server that sends its answer a byte at a time: the client's timeout bounds the whole."""
    path = str(tmp_path / "slow.sock")

    def handle(conn: socket.socket, n: int) -> None:
        with conn:
            _request(conn)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n")
            for _ in range(1000):
                try:
                    conn.sendall(b" ")
                except OSError:
                    return
                time.sleep(0.2)

    _serve(path, handle)
    t = time.monotonic()
    with stockade.Client(socket=path, timeout=1.5, retries=2) as c:
        with pytest.raises(stockade.ServerUnavailable, match="timeout"):
            c.run_python("print(1)")
    assert time.monotonic() - t < 4, "the trickle held the client past its timeout"


def test_a_session_id_that_is_not_one_is_refused(tmp_path: Path) -> None:
    """A hostile server's session id (a path of its choosing) never becomes a request's path."""
    path = str(tmp_path / "hostile.sock")
    seen: List[bytes] = []

    def handle(conn: socket.socket, n: int) -> None:
        with conn:
            req = _request(conn)
            seen.append(req.split(b"\r\n", 1)[0])
            body = json.dumps({"id": "../../v1/runs?x=", "runtime": "python", "mode": "workspace"}).encode()
            conn.sendall(
                b"HTTP/1.1 201 Created\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: "
                + str(len(body)).encode() + b"\r\n\r\n" + body
            )

    _serve(path, handle)
    with stockade.Client(socket=path, retries=0) as c:
        with pytest.raises(stockade.StockadeError, match="session id"):
            c.session("python")
    assert seen == [b"POST /v1/sessions HTTP/1.1"], seen
