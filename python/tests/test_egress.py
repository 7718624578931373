"""Egress through the SDK, against a real `stockade serve` whose python3 runtime's policy lists two
servers of this process on loopback: a run reaches them (``result.egress`` lists each
connection), ``egress_allow`` narrows the list (what it left out is refused, never contacted),
and a wider list is a :class:`BadRequest` naming the entry. Needs the host's /usr/bin/python3."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

from conftest import Server
from stockade import AsyncClient, BadRequest, Client

pytestmark = pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="no /usr/bin/python3")

ROOT = Path(__file__).resolve().parents[2]


def host(body: bytes, seen: List[str]) -> http.server.ThreadingHTTPServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[Server, List[str], List[str], List[str]]]:
    seen_a: List[str] = []
    seen_b: List[str] = []
    a, b = host(b"from a\n", seen_a), host(b"from b\n", seen_b)
    listed = [f"127.0.0.1:{s.server_address[1]}" for s in (a, b)]
    tmp = tmp_path_factory.mktemp("egress")
    policies = tmp / "policies"
    policies.mkdir()
    wrap = (ROOT / "policies/examples/wrap-python.toml").read_text()
    (policies / "net.toml").write_text(wrap + f'\n[network]\negress-allow = ["{listed[0]}", "{listed[1]}"]\n')
    s = Server(
        tmp,
        rest=f'[policies]\ndir = "{policies}"\n[runtimes.net]\nprogram = "/usr/bin/python3"\n'
        'bootstrap = "python"\npolicy = "net"\nwarm = 1\n',
    )
    yield s, listed, seen_a, seen_b
    s.stop()
    a.shutdown()
    b.shutdown()


def fetch(listed: List[str]) -> str:
    return (
        "import urllib.request\n"
        f"for host in {listed!r}:\n"
        "    try:\n"
        "        print(urllib.request.urlopen('http://' + host + '/sdk').read().decode(), end='')\n"
        "    except Exception as e:\n"
        "        print('refused', e.code)\n"
    )


def test_a_run_reaches_its_list_and_a_narrower_one_is_kept(hosts) -> None:
    server, listed, seen_a, seen_b = hosts
    with Client(socket=server.socket) as client:
        r = client.run("net", fetch(listed))
        assert (r.ok, r.stdout) == (True, "from a\nfrom b\n"), r
        assert r.egress is not None and r.egress["allowed"] == 2, r.egress
        before = len(seen_b)
        r = client.run("net", fetch(listed), egress_allow=[listed[0]])
        assert r.stdout == "from a\nrefused 403\n", r
        assert r.egress is not None and r.egress["connections"][1]["refused"] == "not-listed", r.egress
        assert len(seen_b) == before
        with pytest.raises(BadRequest) as e:
            client.run("net", "1", egress_allow=["pypi.org:443"])
        assert e.value.field == "egress-allow[0]", e.value


def test_the_async_client_narrows_the_same(hosts) -> None:
    import asyncio

    server, listed, _, _ = hosts

    async def go() -> None:
        async with AsyncClient(socket=server.socket) as client:
            r = await client.run("net", fetch(listed), egress_allow=[listed[1]])
            assert r.stdout == "refused 403\nfrom b\n", r
            assert r.egress is not None and (r.egress["allowed"], r.egress["refused"]) == (1, 1), r.egress

    asyncio.run(go())
