"""A real `stockade serve` for the tests: the built binary, on a temporary unix socket and a
loopback TCP port with a token. Never a mock.

The binary is $STOCKADE_BIN, else the repository's target/debug/stockade (`cargo build` makes
it); the guests come from $STOCKADE_GUEST_DIR or the usual places, as for `stockade run`.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator, List, Optional

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "sdk-test-token-0123456789abcdef"


def stockade_bin() -> Path:
    b = Path(os.environ.get("STOCKADE_BIN") or ROOT / "target" / "debug" / "stockade")
    if not b.exists():
        pytest.fail(f"{b} is missing: build it with `cargo build` (or set STOCKADE_BIN)")
    return b


class Server:
    """One running `stockade serve`; `socket`, `url` (TCP) and `token` reach it."""

    def __init__(self, tmp: Path, server: str = "", rest: str = "") -> None:
        self.socket = str(tmp / "api.sock")
        tokens = tmp / "tokens"
        tokens.write_text(f"# the SDK tests'\n{TOKEN}\n")
        tokens.chmod(0o600)
        self.token = TOKEN
        config = tmp / "serve.toml"
        config.write_text(
            "version = 1\n[server]\n"
            f'listen = ["unix:{self.socket}", "tcp:127.0.0.1:0"]\n'
            f'tokens-file = "{tokens}"\n{server}\n'
            "[runtimes.python]\nguest = \"python\"\nwarm = 1\n"
            "[runtimes.javascript]\nguest = \"javascript\"\nwarm = 1\n"
            + (
                '[runtimes.python3]\nprogram = "/usr/bin/python3"\nbootstrap = "python"\npolicy = "wrap-python"\nwarm = 1\n'
                if Path("/usr/bin/python3").exists()
                else ""
            )
            + f"{rest}\n"
        )
        self.log: List[str] = []
        self.proc = subprocess.Popen(
            # Its own state directory: one server at a time may hold one.
            [str(stockade_bin()), "serve", str(config), "--state-dir", str(tmp / "state")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        ready = threading.Event()
        self.url: Optional[str] = None

        def read() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.log.append(line.rstrip("\n"))
                m = re.search(r"tcp:(127\.0\.0\.1:\d+)", line)
                if "listening on" in line:
                    if m:
                        self.url = f"http://{m.group(1)}"
                    ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(60) or self.url is None:
            self.stop()
            pytest.fail("the server did not start:\n" + "\n".join(self.log))
        self.wait_warm()

    def wait_warm(self) -> None:
        """Until every warm pool is full (the runs then take warm jails)."""
        transport = httpx.HTTPTransport(uds=self.socket)
        with httpx.Client(transport=transport, base_url="http://localhost") as c:
            end = time.monotonic() + 60
            while time.monotonic() < end:
                h = c.get("/v1/health").json()
                if all(w["ready"] >= w["target"] for w in h["warm"].values()):
                    return
                time.sleep(0.05)
        pytest.fail("the warm pools did not fill")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The server most tests share."""
    s = Server(tmp_path_factory.mktemp("serve"), server="concurrency = 2\nqueue = 8")
    yield s
    s.stop()
    assert s.proc.returncode == 0, "\n".join(s.log)
    assert not Path(s.socket).exists(), "the server left its socket"


@pytest.fixture()
def one_slot(tmp_path: Path) -> Iterator[Server]:
    """A server with one run slot and no queue: a second run at once is refused."""
    s = Server(tmp_path, server="concurrency = 1\nqueue = 0")
    yield s
    s.stop()
