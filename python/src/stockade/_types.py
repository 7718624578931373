"""The values the client hands back: a run's result, its streamed output, and the errors."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Literal, Mapping, NamedTuple, Optional, Sequence, TypedDict, Union, cast

__all__ = [
    "Limits",
    "Result",
    "Output",
    "StockadeError",
    "BadRequest",
    "Unauthorized",
    "PolicyNotFound",
    "Busy",
    "ServerUnavailable",
    "RunFailed",
    "SessionNotFound",
    "SessionEnded",
    "SessionBusy",
    "FileInfo",
    "Tool",
    "HostCall",
    "Readiness",
    "Mode",
    "Warm",
    "Health",
    "RunLimits",
    "PolicyLimits",
    "PolicyInfo",
    "LayerReport",
    "RuntimeRuns",
    "RuntimeInfo",
    "RequestsInfo",
    "SessionsInfo",
    "Info",
    "WorkspaceUse",
    "SessionInfo",
    "Verdict",
    "Compare",
    "BatchRun",
    "BatchInput",
    "BatchSummary",
    "BatchAnswer",
    "BatchEvent",
    "BatchResult",
]


class StockadeError(Exception):
    """An error from stockade serve, or from reaching it.

    ``code`` is the server's error code (``bad-request``, ``queue-full``...), ``field`` the
    request field it names (``files[0].path``), ``status`` the HTTP status (``None`` when the
    server was never reached).
    """

    def __init__(
        self,
        message: str,
        *,
        code: Optional[str] = None,
        field: Optional[str] = None,
        status: Optional[int] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.field = field
        self.status = status

    def __str__(self) -> str:
        where = f" ({self.field})" if self.field else ""
        code = f"{self.code}: " if self.code else ""
        return f"{code}{self.message}{where}"


class BadRequest(StockadeError):
    """The server refused the request as malformed or over a cap (400, 408, 413, 415)."""


class Unauthorized(StockadeError):
    """No token, or a token the server does not know (401, 403)."""


class PolicyNotFound(StockadeError):
    """The request named a policy the server does not have (404)."""


class _Retryable(StockadeError):
    """A refusal that says when trying again may work: ``retry_after``, seconds (the server's
    ``Retry-After``; ``None`` when it sent none)."""

    def __init__(
        self,
        message: str,
        *,
        retry_after: Optional[float] = None,
        code: Optional[str] = None,
        field: Optional[str] = None,
        status: Optional[int] = None,
    ) -> None:
        super().__init__(message, code=code, field=field, status=status)
        self.retry_after = retry_after


class Busy(_Retryable):
    """Every run slot and the queue are taken (429 ``queue-full``; 503 ``queue-timeout``, ``busy``).

    Nothing ran. ``retry_after`` is the server's ``Retry-After``, seconds.
    """


class ServerUnavailable(_Retryable):
    """The server could not be reached, is shutting down (503 ``draining``), or failed (5xx)."""


class SessionNotFound(StockadeError):
    """No such session, or no such file in its workspace (404). With tokens on, a session of
    another token is :class:`Unauthorized` (403), as an id never made is."""


class SessionEnded(SessionNotFound):
    """The session ended (410): the message says which clock ended it, or that it was deleted."""


class SessionBusy(StockadeError):
    """The session is running a run (409 ``session-busy``): ``run`` is its id. Nothing ran."""

    def __init__(
        self,
        message: str,
        *,
        run: Optional[str] = None,
        code: Optional[str] = None,
        field: Optional[str] = None,
        status: Optional[int] = None,
    ) -> None:
        super().__init__(message, code=code, field=field, status=status)
        self.run = run


@dataclass(frozen=True)
class FileInfo:
    """A file of a session's workspace: its path, size, and when its content last changed
    (milliseconds since the epoch, by the server's clock)."""

    path: str
    bytes: int
    modified_unix_ms: int

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "FileInfo":
        return cls(str(d["path"]), int(d["bytes"]), int(d["modified-unix-ms"]))


class RunFailed(StockadeError):
    """Raised by :meth:`Result.raise_for_status` for a run that did not end with status ``ok``."""

    def __init__(self, result: "Result") -> None:
        detail = result.error or (result.stderr.strip().splitlines() or [""])[-1]
        super().__init__(f"the run ended with {result.status}: {detail}".rstrip(": "), code=result.status)
        self.result = result


@dataclass(frozen=True)
class Limits:
    """A run's limits, the server's ``Limits`` type (``policy::Limits``) in Python's spelling.

    A request's limits may only tighten its policy's: a looser one (or one below the least a jail
    is built with) is refused with :class:`BadRequest` naming ``limits.KEY`` and the policy's
    value, never clamped. ``Client.info()`` shows each policy's, and :meth:`from_json` reads them.
    """

    #: The wall-clock limit (from the hand-over, for a warm jail).
    wall_timeout_ms: Optional[int] = None
    #: The run's memory limit; with pids, Wasm memory and fuel it needs a jail built for the run.
    memory_max_bytes: Optional[int] = None
    pids_max: Optional[int] = None
    #: Output kept (or streamed) per stream.
    stdout_max_bytes: Optional[int] = None
    stderr_max_bytes: Optional[int] = None
    #: A Wasm guest's linear memory, and its fuel (about one unit per instruction).
    wasm_memory_max_bytes: Optional[int] = None
    fuel: Optional[int] = None

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise TypeError(f"limits.{f.name}: a whole number of at least 0, not {v!r}")

    @classmethod
    def of(cls, limits: "Limits | Mapping[str, Optional[int]]") -> "Limits":
        """Limits from a mapping whose keys are written ``wall_timeout_ms`` or ``wall-timeout-ms``;
        a key the server does not know raises :class:`TypeError` naming it."""
        if isinstance(limits, Limits):
            return limits
        known = {f.name for f in fields(cls)}
        values: Dict[str, Optional[int]] = {}
        for key, v in limits.items():
            name = key.replace("-", "_")
            if name not in known:
                raise TypeError(f"limits: unknown key {key!r} (known: {', '.join(sorted(known))})")
            values[name] = v
        return cls(**values)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Limits":
        """A policy's limits as ``GET /v1/info`` shows them (keys it does not know are left out)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k.replace("-", "_"): v for k, v in d.items() if k.replace("-", "_") in known})

    def to_json(self) -> Dict[str, int]:
        """The request's ``limits`` object: the limits set, in the server's spelling."""
        return {f.name.replace("_", "-"): getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


@dataclass(frozen=True)
class Tool:
    """A tool the run may call back (``stockade_host.call(name, args)`` in the run), answered by
    ``fn(args)`` in this process: its return value (anything JSON can say) is the call's answer,
    an exception it raises reaches the run as ``stockade_host.ToolError``. The budgets are the
    server's: at most ``max_calls`` calls, requests and answers of at most
    ``max_request_bytes`` and ``max_response_bytes``, each call answered within ``timeout_ms``
    (else the run gets a timeout error). ``tools={"name": fn}`` is ``Tool(fn)`` with the
    server's defaults (50 calls, 64 KiB, 1 MiB, 5 s)."""

    fn: Any
    max_calls: Optional[int] = None
    max_request_bytes: Optional[int] = None
    max_response_bytes: Optional[int] = None
    timeout_ms: Optional[int] = None

    def to_json(self, name: str) -> Dict[str, Any]:
        out: Dict[str, Any] = {"name": name}
        for f in ("max_calls", "max_request_bytes", "max_response_bytes", "timeout_ms"):
            if getattr(self, f) is not None:
                out[f.replace("_", "-")] = getattr(self, f)
        return out


@dataclass(frozen=True)
class HostCall:
    """A call of the run's, as the server sent it: ``run``'s call ``id`` of tool ``name``."""

    run: str
    id: str
    name: str
    args: Any


@dataclass(frozen=True)
class Output:
    """A piece of a streamed run's output, as it happened: ``stream`` is ``stdout`` or ``stderr``."""

    stream: str
    data: bytes

    @property
    def text(self) -> str:
        """The bytes as text (UTF-8, undecodable bytes replaced)."""
        return self.data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Figure:
    """A figure the run's code left open, given back (``type`` is ``image/png``)."""

    type: str
    data: bytes

    def save(self, path: str) -> None:
        """Writes the figure's bytes to ``path``."""
        with open(path, "wb") as f:
            f.write(self.data)


def _stream_bytes(s: Mapping[str, Any]) -> bytes:
    if s.get("text") is not None:
        return str(s["text"]).encode("utf-8")
    if s.get("base64") is not None:
        return base64.b64decode(s["base64"])
    return b""


@dataclass
class Result:
    """What a run did: the server's report (``docs/report.md``), its fields in Python's spelling.

    ``report`` keeps the whole report as the server sent it.
    """

    status: str
    exit_code: Optional[int]
    signal: Optional[int]
    stdout_bytes: bytes
    stderr_bytes: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    wall_ms: float
    cpu_ms: float
    memory_peak_bytes: Optional[int]
    max_rss_bytes: int
    files: Dict[str, bytes]
    files_capped: bool
    #: Matching files not given back, path -> why (the server names the first 100).
    files_skipped: Dict[str, str]
    enforcement: List[Dict[str, Any]]
    error: Optional[str]
    report: Dict[str, Any] = field(repr=False)
    #: A session's run: the session's id, this run's id (``run``), the workspace as kept
    #: (``workspace``), what was not kept with why (``dropped``), and for a live session what
    #: became of its interpreter (``interpreter``); else ``None``.
    session: Optional[Dict[str, Any]] = None
    #: The connections the run asked its egress proxy for (a policy with an egress list):
    #: ``allowed``, ``refused``, ``bytes-out``, ``bytes-in`` and ``connections`` (host, port,
    #: method, allowed, why refused, bytes each way), as ``docs/report.md`` says; else ``None``.
    egress: Optional[Dict[str, Any]] = None
    #: The value of the code's last expression, as a notebook shows it: parsed JSON (Python's
    #: ``1 + 1``, JavaScript's ``[1, 2].map(x => x * 2)``); ``None`` when the code ended with a
    #: statement, its value was ``None``/``undefined``, or it is not JSON (see ``value_repr``).
    value: Any = None
    #: That value's ``repr`` (Python) or ``String()`` (JavaScript) when it is not JSON, else ``None``.
    value_repr: Optional[str] = None
    #: The figures the code left open (a runtime with matplotlib), as PNG.
    outputs: List[Figure] = field(default_factory=list)
    #: A batch's run with an ``expect``: the judge's word on it (:data:`Verdict`: ``accepted``,
    #: ``wrong-answer``, ``timeout``...); else ``None``.
    verdict: Optional[str] = None
    #: The jail this run shared with others, when it did: ``"batch"`` (a batch's run); else ``None``.
    jail: Optional[str] = None
    #: The batch this run was one of (``b-...``); else ``None``.
    batch_id: Optional[str] = None

    @property
    def interpreter(self) -> Optional[str]:
        """A live session's run: ``"started"`` (a new interpreter, no state from before),
        ``"kept"`` (the same one as the run before), ``"resumed"`` (its state back from its
        hibernated image: :attr:`resume_ms`) or ``"restarted"`` (its state is gone, the files are
        kept: it ended in this run, by its wall limit, a memory limit or its own exit; or it was
        lost before it, and :attr:`interpreter_reason` says why). Else ``None``."""
        return None if self.session is None else self.session.get("interpreter")

    @property
    def resume_ms(self) -> Optional[float]:
        """A resumed interpreter's resume, in milliseconds (its jail, its guest, its image); else
        ``None``."""
        return None if self.session is None else self.session.get("resume-ms")

    @property
    def interpreter_reason(self) -> Optional[str]:
        """Why a live session's interpreter was not kept, when it was lost before this run (its
        server stopped, say); else ``None``."""
        return None if self.session is None else self.session.get("interpreter-reason")

    @property
    def ok(self) -> bool:
        """The program exited with 0 (status ``ok``)."""
        return self.status == "ok"

    @property
    def stdout(self) -> str:
        """What the program wrote on stdout, as text (up to the cap; see ``stdout_truncated``)."""
        return self.stdout_bytes.decode("utf-8", errors="replace")

    @property
    def stderr(self) -> str:
        """What the program wrote on stderr, as text (up to the cap; see ``stderr_truncated``)."""
        return self.stderr_bytes.decode("utf-8", errors="replace")

    @property
    def signal_name(self) -> Optional[str]:
        """The name of the signal that ended the program (``SIGKILL``), if one did."""
        name = self.report.get("signal-name")
        return str(name) if name is not None else None

    def raise_for_status(self) -> "Result":
        """Raises :class:`RunFailed` unless the run's status is ``ok``; returns the result."""
        if not self.ok:
            raise RunFailed(self)
        return self

    @classmethod
    def from_report(
        cls,
        report: Dict[str, Any],
        *,
        stdout: Optional[bytes] = None,
        stderr: Optional[bytes] = None,
    ) -> "Result":
        """Builds a result from a report (a streamed run's output comes apart: pass it)."""
        out = report.get("stdout") or {}
        err = report.get("stderr") or {}
        files = {
            str(f["path"]): base64.b64decode(f.get("content") or "") for f in report.get("files") or []
        }
        return cls(
            status=str(report.get("status")),
            exit_code=report.get("exit-code"),
            signal=report.get("signal"),
            stdout_bytes=stdout if stdout is not None else _stream_bytes(out),
            stderr_bytes=stderr if stderr is not None else _stream_bytes(err),
            stdout_truncated=bool(out.get("truncated", False)),
            stderr_truncated=bool(err.get("truncated", False)),
            wall_ms=float(report.get("wall-ms") or 0.0),
            cpu_ms=float(report.get("cpu-user-ms") or 0.0) + float(report.get("cpu-sys-ms") or 0.0),
            memory_peak_bytes=report.get("memory-peak-bytes"),
            max_rss_bytes=int(report.get("max-rss-bytes") or 0),
            files=files,
            files_capped=bool(report.get("files-capped", False)),
            files_skipped={str(f["path"]): str(f["reason"]) for f in report.get("files-skipped") or []},
            enforcement=list(report.get("enforcement") or []),
            error=report.get("error"),
            report=report,
            session=report.get("session"),
            egress=report.get("egress"),
            value=report.get("value"),
            value_repr=report.get("value-repr"),
            outputs=[
                Figure(type=str(o.get("type")), data=base64.b64decode(o.get("base64") or ""))
                for o in report.get("outputs") or []
            ],
            verdict=report.get("verdict"),
            jail=report.get("jail"),
            batch_id=report.get("batch-id"),
        )


# The server's answers as JSON (``docs/openapi.json``'s schemas), typed: they stay plain dicts,
# their keys the server's (kebab-case), so ``client.health()["status"]`` is what it says. Keys a
# schema does not require may be missing; the functional ``TypedDict`` form spells kebab-case keys.

#: Whether the server can run every runtime (``Health``'s ``status``).
Readiness = Literal["ok", "starting", "unavailable", "draining"]

#: How a session's runs share their state: ``workspace`` (each run a fresh interpreter, ``/app``
#: kept) or ``live`` (one interpreter keeps its state between runs).
Mode = Literal["workspace", "live"]

#: Where a session's interpreter is (``SessionInfo["state"]``): ``live`` (in a jail of its own),
#: ``hibernated`` (written to the server's state directory; the next run resumes it) or ``none``
#: (a workspace session, or a live one whose interpreter starts with its next run).
SessionState = Literal["live", "hibernated", "none"]


class Warm(TypedDict):
    """A runtime's warm jails: waiting (``ready``), and wanted (``target``)."""

    ready: int
    target: int


class _HealthOptional(TypedDict, total=False):
    #: Each runtime that cannot run (or not yet), and why.
    unavailable: Dict[str, str]


class Health(_HealthOptional):
    """``GET /v1/health``: ``status``, the runs in progress (``running``) and waiting for a slot
    (``queued``), the warm jails by runtime (``warm``), and why each runtime that cannot run cannot
    (``unavailable``, when one cannot)."""

    status: Readiness
    running: int
    queued: int
    warm: Dict[str, Warm]


_RunLimits = TypedDict(
    "_RunLimits",
    {
        "wall-timeout-ms": Optional[int],
        "memory-max-bytes": Optional[int],
        "pids-max": Optional[int],
        "stdout-max-bytes": Optional[int],
        "stderr-max-bytes": Optional[int],
        "wasm-memory-max-bytes": Optional[int],
        "fuel": Optional[int],
    },
    total=False,
)


class RunLimits(_RunLimits):
    """A run's limits as the server writes them (schema ``Limits``; :class:`Limits` is the same in
    Python's spelling, and ``Limits.from_json`` reads one): ``None``, or missing, where none is set."""


_PolicyLimits = TypedDict("_PolicyLimits", {"cpu-max-percent": Optional[int]}, total=False)


class PolicyLimits(RunLimits, _PolicyLimits):
    """A policy's limits as a request names them (:class:`RunLimits`), and its CPU share
    (``cpu-max-percent``, in percent of one CPU)."""


class PolicyInfo(TypedDict):
    """A named policy (``info()["policies"]``): where it came from (a file, or the built-in
    default), and the limits it gives a run."""

    name: str
    source: str
    limits: PolicyLimits


class _LayerReportOptional(TypedDict, total=False):
    reason: Optional[str]


class LayerReport(_LayerReportOptional):
    """One isolation layer: what the policy asked, what the kernel applied, and the verdict
    (``status``); ``reason`` says why a layer did not hold."""

    layer: str
    asked: str
    applied: str
    status: Literal["enforced", "partial", "not-enforced"]


class RuntimeRuns(TypedDict, total=False):
    """What a runtime runs: a Wasm guest (``{"guest": "python"}``), or a program of the host's given
    its code on stdin (``{"program": PATH, "bootstrap": "stdin"}``, or ``"python"`` for stockade's
    Python bootstrap, which can keep an interpreter); such a program's ``preload`` (modules imported
    before the code arrives) and ``venv`` (the virtual environment they come from), when it has them."""

    guest: str
    program: str
    bootstrap: str
    preload: List[str]
    venv: str


_RuntimeInfoOptional = TypedDict(
    "_RuntimeInfoOptional",
    {"unavailable-because": Optional[str], "enforcement": Optional[List[LayerReport]]},
    total=False,
)


class RuntimeInfo(_RuntimeInfoOptional):
    """A runtime the server serves (``info()["runtimes"]``): its ``kind`` (``wasm-guest``, or
    ``program`` for a program of the host's), what it ``runs``, its own ``policy``, whether it is
    ``available`` (``unavailable-because`` says why not), its warm jails, and what this host
    enforces of its jail (``enforcement``, as its last warm jail reported)."""

    name: str
    kind: str
    runs: RuntimeRuns
    policy: str
    available: bool
    warm: Warm


_RequestsInfo = TypedDict(
    "_RequestsInfo",
    {
        "body-max-bytes": int,
        "code-max-bytes": int,
        "stdin-max-bytes": int,
        "argv-max-count": int,
        "files-max-count": int,
        "files-max-bytes": int,
        "return-files-max-count": int,
        "return-files-max-bytes": int,
        "batch-max-runs": int,
    },
)


class RequestsInfo(_RequestsInfo):
    """The caps of every request (``info()["requests"]``)."""


_SessionsInfo = TypedDict(
    "_SessionsInfo",
    {
        "max": int,
        "open": int,
        "modes": List[str],
        "max-per-token": int,
        "live-max": int,
        "idle-timeout-ms": int,
        "max-lifetime-ms": int,
        "workspace-max-bytes": int,
        "workspace-max-files": int,
    },
)


_SessionsInfoOptional = TypedDict("_SessionsInfoOptional", {"hibernate-after-ms": int}, total=False)


class SessionsInfo(_SessionsInfo, _SessionsInfoOptional):
    """The sessions the server keeps (``info()["sessions"]``): at most ``max`` (``open`` now),
    the ``modes`` it makes (``workspace``, and ``live`` when live sessions are on), their clocks
    (``hibernate-after-ms``: after how long idle a live interpreter is hibernated, when it is)
    and workspace quotas."""


_Info = TypedDict(
    "_Info",
    {
        "version": str,
        "api": str,
        "runtimes": List[RuntimeInfo],
        "wasm-modules": bool,
        "policies": List[PolicyInfo],
        "concurrency": int,
        "queue": int,
        "jails-built-by": str,
        "requests": RequestsInfo,
        "sessions": SessionsInfo,
        "uptime-s": int,
    },
)


class Info(_Info):
    """``GET /v1/info``: stockade's ``version``, the ``api`` (``v1``), the ``runtimes`` and the
    ``policies`` a request may name (with their limits), whether a request may send its own Wasm
    module (``wasm-modules``), runs at once (``concurrency``) and waiting (``queue``), where warm
    jails are built (``jails-built-by``: ``spawner`` or ``threads``), the caps of every request,
    the sessions, and the server's uptime (``uptime-s``)."""


_WorkspaceUse = TypedDict("_WorkspaceUse", {"files": int, "bytes": int, "files-max": int, "bytes-max": int})


class WorkspaceUse(_WorkspaceUse):
    """What a session's workspace holds (``files``, ``bytes``), against its quota."""


_SessionInfo = TypedDict(
    "_SessionInfo",
    {
        "id": str,
        "runtime": str,
        "mode": Mode,
        "policy": str,
        "limits": RunLimits,
        "idle-timeout-ms": int,
        "max-lifetime-ms": int,
        "created-unix-ms": int,
        "expires-unix-ms": int,
        "runs": int,
        "workspace": WorkspaceUse,
        "state": SessionState,
    },
)


_SessionInfoOptional = TypedDict(
    "_SessionInfoOptional",
    {"running": Optional[str], "forked-from": str, "hibernate-ms": float, "image-bytes": int},
    total=False,
)


class SessionInfo(_SessionInfo, _SessionInfoOptional):
    """A session as the server answers it (``Session.info``, ``Session.refresh()``): its ``id``,
    runtime, mode and policy, every run's ``limits``, its clocks (``expires-unix-ms``: when it ends
    if nothing else happens), its ``runs`` so far, the run in progress (``running``), and what its
    workspace holds, the session it was forked from (``forked-from``), if it was, and where its
    interpreter is (``state``; hibernated, ``hibernate-ms`` and ``image-bytes`` say what its
    hibernation took)."""


# Batches (``Client.batch``): many runs of a Wasm guest's runtime, each a fresh instance of its
# guest, sharing a few jails; a run with an ``expect`` is judged.

#: A judge's word on a batch's run with an ``expect`` (``Result.verdict``): ``accepted`` (it ended
#: well and printed what was expected), ``wrong-answer`` (it ended well and printed something
#: else), ``timeout`` (its wall clock or its fuel ran out), ``memory-limit`` (its linear memory or
#: its jail's memory), ``output-limit``, ``runtime-error`` (it raised, exited non-zero, trapped or
#: was killed), ``internal-error`` (the jail failed it).
Verdict = Literal[
    "accepted", "wrong-answer", "timeout", "memory-limit", "output-limit", "runtime-error", "internal-error"
]

#: How a batch's run's stdout is held against its ``expect``: ``exact`` (byte for byte) or
#: ``trailing-whitespace`` (the server's default: line by line, each line's trailing spaces, tabs
#: and ``\r`` ignored, and blank lines at the end).
Compare = Literal["exact", "trailing-whitespace"]

_LimitsArg = Union[Limits, Mapping[str, Optional[int]]]


@dataclass(frozen=True)
class BatchInput:
    """One input of a batch that runs one program against many (``Client.batch(runtime, code=...,
    inputs=[...])``): its ``argv``, its ``stdin`` (text or bytes), its own ``limits``, and what the
    program must print on stdout for the verdict ``accepted`` (``expect``; without it the run has
    no verdict). A dict with these keys is the same.

    A run's ``limits`` may only tighten the batch's, and only the wall clock, the output caps, a
    guest's fuel and linear memory: its memory and processes are its jail's, shared with the
    batch's other runs (set them in the batch's ``limits``; here they are :class:`BadRequest`
    naming ``inputs[N].limits.memory-max-bytes``)."""

    argv: Optional[Sequence[str]] = None
    stdin: Union[str, bytes, None] = None
    limits: Optional[_LimitsArg] = None
    expect: Optional[str] = None


@dataclass(frozen=True)
class BatchRun:
    """One run of a batch with its own ``code`` (``Client.batch(runtime, [BatchRun(code), ...])``):
    :class:`BatchInput`'s ``argv``, ``stdin``, ``limits`` and ``expect``, and the code. A dict
    with these keys is the same."""

    code: str
    argv: Optional[Sequence[str]] = None
    stdin: Union[str, bytes, None] = None
    limits: Optional[_LimitsArg] = None
    expect: Optional[str] = None


_BatchSummary = TypedDict(
    "_BatchSummary",
    {"runs": int, "statuses": Dict[str, int], "verdicts": Dict[str, int], "jails": int, "wall-ms": float},
)


class BatchSummary(_BatchSummary):
    """How a batch went (``BatchResult.summary``, ``BatchStream.summary``): its ``runs``, how many
    ended with each status (``statuses``: ``{"ok": 99, "timeout": 1}``) and, of those with an
    ``expect``, with each :data:`Verdict` (``verdicts``), the ``jails`` its runs shared (a run that
    ends its jail, at its wall clock say, has the next run in a new one), and ``wall-ms``, from its
    admission to its last run's end."""


_BatchAnswer = TypedDict(
    "_BatchAnswer", {"batch-id": str, "results": List[Dict[str, Any]], "summary": BatchSummary}
)


class BatchAnswer(_BatchAnswer):
    """``POST /v1/batches``'s answer as the server sent it (``BatchResult.answer``): the batch's
    id, every run's report in the runs' order, and the summary."""


class BatchEvent(NamedTuple):
    """A run of a streamed batch that ended (``Client.batch_stream``): its ``index`` in the
    batch's runs (or inputs) and its :class:`Result`; a tuple, so ``for i, result in stream``."""

    index: int
    result: Result


@dataclass
class BatchResult:
    """What a batch did (``Client.batch``): ``results``, every run's :class:`Result` in the
    runs' order (each with its ``verdict`` when it had an ``expect``, ``jail == "batch"`` and the
    ``batch_id``), the ``summary`` (a :class:`BatchSummary`), and the ``batch_id``. ``answer``
    keeps the whole answer as the server sent it."""

    batch_id: str
    results: List[Result]
    summary: BatchSummary
    answer: BatchAnswer = field(repr=False)

    @property
    def verdicts(self) -> List[Optional[str]]:
        """Each run's verdict, in the runs' order (``None`` for a run with no ``expect``)."""
        return [r.verdict for r in self.results]

    @classmethod
    def from_answer(cls, answer: Dict[str, Any]) -> "BatchResult":
        return cls(
            batch_id=str(answer.get("batch-id")),
            results=[Result.from_report(r) for r in answer.get("results") or []],
            summary=cast(BatchSummary, answer.get("summary") or {}),
            answer=cast(BatchAnswer, answer),
        )
