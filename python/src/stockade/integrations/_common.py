"""What the integrations share: a run's result as text a model reads, the runtimes' words, and
running code on whichever client or session a tool was given."""

from __future__ import annotations

import asyncio
import re
from typing import Any, Dict, List, Optional, Union

from .._client import AsyncClient, AsyncSession, Client, Session
from .._types import Result, RuntimeInfo
from .._wire import Limits

#: What a tool runs its code on: a client (a fresh jail per call) or a session (its state kept).
Target = Union[Client, AsyncClient, Session, AsyncSession]

#: The most characters of stdout or stderr a tool's text keeps (its head and its tail).
MAX_STREAM_CHARS = 20_000

_REASONS = {
    "timeout": "the run passed its wall-clock limit{limit} and was killed",
    "oom": "the run passed its memory limit and was killed",
    "output-limit": "the run's output passed its cap and the run was killed",
    "wasm-memory-limit": "the program asked for more memory than its limit",
    "fuel-exhausted": "the program used up its CPU budget (fuel)",
    "cpu-limit": "the program used up its CPU time",
    "pids-limit": "the program could not start another process or thread",
    "disk-limit": "the program filled its writable directory",
    "seccomp-violation": "the program made a forbidden system call{syscall} and was killed",
    "setup-failed": "the jail could not be set up",
}


def import_error(framework: str, extra: str) -> ImportError:
    """The error for a framework that is not installed, naming the extra that brings it."""
    return ImportError(f"{framework} is not installed: pip install 'stockade[{extra}]'")


def reason(result: Result) -> str:
    """Why a run that is not ``ok`` ended, in words (``""`` for an ``ok`` run)."""
    if result.ok:
        return ""
    if result.status == "exited-nonzero":
        why = f"the program exited with code {result.exit_code}"
    elif result.status == "signaled":
        why = f"the program was killed by {result.signal_name or f'signal {result.signal}'}"
    elif result.status == "wasm-trap":
        why = "the WebAssembly program trapped"
    else:
        limit = result.report.get("wall-timeout-ms")
        syscall = (result.report.get("seccomp-violation") or {}).get("syscall")
        why = _REASONS.get(result.status, result.status).format(
            limit=f" ({limit} ms)" if limit else "", syscall=f" ({syscall})" if syscall else ""
        )
    if result.error:
        why += f"; {result.error}"
    return why


def clip(text: str, limit: int = MAX_STREAM_CHARS) -> str:
    """``text`` within ``limit`` characters: its head and its tail, with what was left out said."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"


def describe(result: Result, *, max_chars: int = MAX_STREAM_CHARS) -> str:
    """A run's result as text for a model: status (and why, when not ok), stdout, stderr, the
    value of the last expression, the figures."""
    lines = [f"status: {result.status}" + (f" ({reason(result)})" if not result.ok else "")]
    for name, text, cut in (
        ("stdout", result.stdout, result.stdout_truncated),
        ("stderr", result.stderr, result.stderr_truncated),
    ):
        if text:
            lines.append(f"{name}:" + (" (cut at the output cap)" if cut else ""))
            lines.append(clip(text, max_chars).rstrip("\n"))
    if result.value is not None:
        lines.append(f"value: {clip(repr(result.value), max_chars)}")
    elif result.value_repr is not None:
        lines.append(f"value: {clip(result.value_repr, max_chars)}")
    if result.outputs:
        lines.append(f"figures: {len(result.outputs)} PNG image(s), not shown here")
    if len(lines) == 1 and result.ok:
        lines.append("(no output)")
    return "\n".join(lines)


_KIND_WORDS = {
    "python": "Python 3.14 (CPython for WASI: the standard library only, no subprocesses)",
    "javascript": "JavaScript (QuickJS with its std and os modules)",
}


def words(runtime: str) -> str:
    """What a runtime runs, from its name alone (``python``, ``javascript``; else the name)."""
    return _KIND_WORDS.get(runtime, f"{runtime} (a stockade runtime)")


def runtime_words(rt: RuntimeInfo) -> str:
    """What a runtime the server lists runs, in a few words for a tool's description."""
    name = str(rt.get("name"))
    runs: Dict[str, Any] = dict(rt.get("runs") or {})
    if "guest" in runs:
        return _KIND_WORDS.get(str(runs["guest"]), f"the {runs['guest']} guest")
    program = runs.get("program")
    if runs.get("bootstrap") == "python":
        return f"Python ({program}: the host's interpreter and its installed packages)"
    return f"the {name} runtime ({program})" if program else f"the {name} runtime"


def default_description(runs: str, target: Any = None) -> str:
    """A tool's description for a model: what it runs, what it gives back, what is kept."""
    if isinstance(target, (Session, AsyncSession)) and target.info.get("mode") == "live":
        kept = "One interpreter runs every call: variables, functions and imports are kept between calls."
    elif isinstance(target, (Session, AsyncSession)):
        kept = "Each call is a fresh interpreter; files written in the working directory are kept."
    else:
        kept = "Each call starts from nothing: define everything the code uses."
    return (
        f"Runs {runs} code in an isolated sandbox (a stockade jail) and gives back its status, "
        f"stdout, stderr and the value of its last expression. {kept}"
    )


def code_runtimes(client: Client, runtimes: Optional[List[str]] = None) -> List[RuntimeInfo]:
    """The runtimes of ``client``'s server that take code (not ``wasm``) and can run now, in the
    server's order; ``runtimes`` picks some by name (one the server lacks is a ``ValueError``)."""
    listed = [rt for rt in client.info()["runtimes"] if rt.get("available", True) and rt.get("name") != "wasm"]
    if runtimes is None:
        return listed
    by_name = {str(rt["name"]): rt for rt in listed}
    missing = [r for r in runtimes if r not in by_name]
    if missing:
        raise ValueError(f"runtimes: the server has no runtime {missing[0]!r} that runs code (it has {sorted(by_name)})")
    return [by_name[r] for r in runtimes]


def tool_name(runtime: str) -> str:
    """A tool name for ``runtime`` that every framework takes (``stockade_python3``)."""
    return "stockade_" + re.sub(r"[^A-Za-z0-9_]", "_", runtime)


def target_runtime(target: Target, runtime: Optional[str]) -> str:
    """The runtime a tool on ``target`` runs: a session's own, else ``runtime`` (``python``)."""
    if isinstance(target, (Session, AsyncSession)):
        own = str(target.info.get("runtime"))
        if runtime is not None and runtime != own:
            raise ValueError(f"runtime: {runtime!r}, but the session runs {own!r}")
        return own
    if not isinstance(target, (Client, AsyncClient)):
        raise TypeError(f"client: a stockade Client, AsyncClient, Session or AsyncSession, not {type(target).__name__}")
    return runtime or "python"


def run_sync(target: Target, runtime: str, code: str, limits: Optional[Limits]) -> Result:
    """Runs ``code`` on a synchronous client or session."""
    if isinstance(target, Session):
        return target.run(code, limits=limits)
    if isinstance(target, Client):
        return target.run(runtime, code, limits=limits)
    raise TypeError(f"client: a {type(target).__name__} is awaited: call the tool asynchronously")


async def run_async(target: Target, runtime: str, code: str, limits: Optional[Limits]) -> Result:
    """Runs ``code`` on any client or session: awaited, or a synchronous one on a thread."""
    if isinstance(target, AsyncSession):
        return await target.run(code, limits=limits)
    if isinstance(target, AsyncClient):
        return await target.run(runtime, code, limits=limits)
    return await asyncio.to_thread(run_sync, target, runtime, code, limits)


def check_code(code: Any) -> str:
    """``code`` as a tool got it: a string, else a ``TypeError`` naming it."""
    if not isinstance(code, str):
        raise TypeError(f"code: a string of source code, not {type(code).__name__}")
    return code
