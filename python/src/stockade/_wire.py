"""The request bodies and the answers of API v1, shared by the sync and async clients."""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from typing import Any, Dict, Iterable, Iterator, Mapping, Optional, Sequence, Tuple, Union

import httpx

from ._types import (
    BadRequest,
    BatchEvent,
    BatchInput,
    BatchRun,
    Busy,
    HostCall,
    Limits as LimitsType,
    Mode,
    Output,
    PolicyNotFound,
    Result,
    ServerUnavailable,
    SessionBusy,
    SessionEnded,
    SessionNotFound,
    StockadeError,
    Unauthorized,
)

DEFAULT_SOCKET = "/run/stockade/api.sock"
DEFAULT_TIMEOUT = 60.0
# A refused request waits at most this long before it is tried again, whatever Retry-After says.
MAX_RETRY_WAIT = 5.0

#: The header that makes a run safe to ask for again (the server gives the first answer).
KEY_HEADER = "Idempotency-Key"

Files = Mapping[str, Union[bytes, str]]
Limits = Union[LimitsType, Mapping[str, Optional[int]]]


def endpoint(socket: Optional[str], url: Optional[str]) -> Tuple[str, Optional[str]]:
    """The base URL and the unix socket (``None`` over TCP) for a client's arguments."""
    if socket is not None and url is not None:
        raise ValueError("give socket or url, not both")
    if url is not None:
        return url.rstrip("/"), None
    return "http://localhost", socket or DEFAULT_SOCKET


def headers(token: Optional[str]) -> Dict[str, str]:
    h = {"User-Agent": "stockade-python/0.1", "Accept": "application/json"}
    if token:
        h["Authorization"] = f"Bearer {token}"
    return h


#: ``tools=``: a tool's name, and the callable (or :class:`Tool`) that answers it.
Tools = Mapping[str, Any]


def body(
    runtime: str,
    *,
    code: Optional[str] = None,
    module: Optional[bytes] = None,
    argv: Optional[Sequence[str]] = None,
    stdin: Union[str, bytes, None] = None,
    files: Optional[Files] = None,
    limits: Optional[Limits] = None,
    policy: Optional[str] = None,
    return_files: Union[str, Iterable[str], None] = None,
    tools: Optional[Tools] = None,
    egress_allow: Optional[Sequence[str]] = None,
) -> Dict[str, Any]:
    """The JSON of ``POST /v1/runs``. ``limits``: a :class:`Limits`, or a mapping whose keys may be
    written ``wall_timeout_ms`` or ``wall-timeout-ms`` (an unknown one raises ``TypeError``);
    ``files`` maps a relative path in ``/app`` to its content."""
    b: Dict[str, Any] = {"runtime": runtime}
    if code is not None:
        b["code"] = code
    if module is not None:
        b["module"] = base64.b64encode(bytes(module)).decode("ascii")
    if argv is not None:
        if isinstance(argv, str):
            raise TypeError("argv is a list of strings, not a string")
        b["argv"] = [str(a) for a in argv]
    if isinstance(stdin, (bytes, bytearray, memoryview)):
        b["stdin-base64"] = base64.b64encode(bytes(stdin)).decode("ascii")
    elif stdin is not None:
        b["stdin"] = stdin
    if files:
        b["files"] = [
            {
                "path": path,
                "content": base64.b64encode(
                    content.encode("utf-8") if isinstance(content, str) else bytes(content)
                ).decode("ascii"),
            }
            for path, content in files.items()
        ]
    if limits:
        b["limits"] = LimitsType.of(limits).to_json()
    if policy is not None:
        b["policy"] = policy
    if return_files is not None:
        b["return-files"] = [return_files] if isinstance(return_files, str) else list(return_files)
    if tools:
        b["tools"] = [tool_of(fn).to_json(name) for name, fn in tools.items()]
    if egress_allow is not None:
        if isinstance(egress_allow, str):
            raise TypeError("egress_allow is a list of HOST:PORT strings, not a string")
        b["egress-allow"] = [str(e) for e in egress_allow]
    return b


def tool_of(fn: Any) -> Any:
    """A :class:`Tool` (a plain callable is one with the server's defaults)."""
    from ._types import Tool

    if isinstance(fn, Tool):
        return fn
    if not callable(fn):
        raise TypeError(f"a tool is a callable or a Tool, not {type(fn).__name__}")
    return Tool(fn)


_IDS = {
    "session": re.compile(r"s-[0-9a-f]{32}\Z"),
    "run": re.compile(r"r-[0-9a-f]{16}\Z"),
    "call": re.compile(r"c-[0-9]{1,20}\Z"),
}


def checked_id(kind: str, value: Any) -> str:
    """An id the server sent, as API v1 writes it (``s-`` and 32 hex digits for a session), or
    :class:`StockadeError`: an id goes into a URL's path, where anything else could take this
    client's requests elsewhere."""
    if not isinstance(value, str) or not _IDS[kind].match(value):
        raise StockadeError(f"the server sent a {kind} id that is not one: {value!r}")
    return value


def new_key() -> str:
    """A fresh ``Idempotency-Key`` for one run."""
    return str(uuid.uuid4())


def call_path(call: Any, session: Optional[str]) -> str:
    """Where a call's answer goes (its ids checked)."""
    run, cid = checked_id("run", call.run), checked_id("call", call.id)
    if session is not None:
        return f"/v1/sessions/{checked_id('session', session)}/runs/{run}/calls/{cid}"
    return f"/v1/runs/{run}/calls/{cid}"


#: A streamed run with tools asks for its calls to be answered on its own connection: the
#: server answers ``101`` and the connection carries the run's events one way and the answers
#: (one JSON line each) the other, with no request per answer.
UPGRADE = {"Connection": "Upgrade", "Upgrade": "stockade-calls"}


def answer_line(call: Any, answer: Dict[str, Any]) -> bytes:
    """A call's answer as a line of an upgraded run's connection."""
    line = {"run": checked_id("run", call.run), "call": checked_id("call", call.id)}
    line.update(answer)
    return json.dumps(line, separators=(",", ":")).encode("utf-8") + b"\n"


def split_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The lines of a connection's bytes as they come (the last one when it ends unfinished)."""
    rest = b""
    for chunk in chunks:
        rest += chunk
        *whole, rest = rest.split(b"\n")
        yield from whole
    if rest.strip():
        yield rest


def answer_of(fn: Any, args: Any) -> Tuple[Dict[str, Any], Any]:
    """Calls a tool: its answer's JSON, or (when it returns an awaitable) ``None`` and that."""
    try:
        value = tool_of(fn).fn(args)
    except Exception as e:  # the tool's failure is the run's to see, not this client's
        return failed(e), None
    if hasattr(value, "__await__"):
        return {}, value
    return ok(value), None


def ok(value: Any) -> Dict[str, Any]:
    try:
        json.dumps(value)
    except (TypeError, ValueError) as e:
        return {"error": f"the tool's answer is not JSON: {e}"}
    return {"ok": value}


def failed(e: BaseException) -> Dict[str, Any]:
    return {"error": f"{type(e).__name__}: {e}"}


def session_body(
    runtime: str,
    *,
    mode: Mode = "workspace",
    policy: Optional[str] = None,
    limits: Optional[Limits] = None,
    idle_timeout_ms: Optional[int] = None,
    max_lifetime_ms: Optional[int] = None,
) -> Dict[str, Any]:
    """The JSON of ``POST /v1/sessions``."""
    b: Dict[str, Any] = {"runtime": runtime, "mode": mode}
    if policy is not None:
        b["policy"] = policy
    if limits:
        b["limits"] = LimitsType.of(limits).to_json()
    if idle_timeout_ms is not None:
        b["idle-timeout-ms"] = int(idle_timeout_ms)
    if max_lifetime_ms is not None:
        b["max-lifetime-ms"] = int(max_lifetime_ms)
    return b


def session_run_body(
    code: str,
    *,
    argv: Optional[Sequence[str]] = None,
    stdin: Union[str, bytes, None] = None,
    files: Optional[Files] = None,
    limits: Optional[Limits] = None,
    return_files: Union[str, Iterable[str], None] = None,
    tools: Optional[Tools] = None,
) -> Dict[str, Any]:
    """The JSON of ``POST /v1/sessions/{id}/runs``: :func:`body`'s, without runtime and policy (a
    session's runs have the session's policy)."""
    b = body(
        "", code=code, argv=argv, stdin=stdin, files=files, limits=limits, return_files=return_files, tools=tools
    )
    del b["runtime"]
    return b


#: ``runs=`` / ``inputs=``: each a :class:`BatchRun` / :class:`BatchInput`, or a mapping with
#: their keys (``code``, ``argv``, ``stdin``, ``limits``, ``expect``).
BatchEntries = Iterable[Union[BatchRun, BatchInput, Mapping[str, Any]]]

_RUN_KEYS = ("code", "argv", "stdin", "limits", "expect")


def batch_entry(entry: Any, where: str) -> Dict[str, Any]:
    """The JSON of one run (or input) of a batch (``where`` names it: ``runs[3]``); a mapping's key
    this client does not know raises :class:`TypeError` naming it, before anything is sent."""
    if isinstance(entry, (BatchRun, BatchInput)):
        values: Dict[str, Any] = {k: getattr(entry, k, None) for k in _RUN_KEYS}
    elif isinstance(entry, Mapping):
        unknown = [k for k in entry if k not in _RUN_KEYS]
        if unknown:
            raise TypeError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(_RUN_KEYS)})")
        values = dict(entry)
    else:
        raise TypeError(f"{where}: a BatchRun, a BatchInput or a dict, not {type(entry).__name__}")
    b = body("", code=values.get("code"), argv=values.get("argv"), stdin=values.get("stdin"), limits=values.get("limits"))
    del b["runtime"]
    if values.get("expect") is not None:
        b["expect"] = str(values["expect"])
    return b


def batch_body(
    runtime: str,
    runs: Optional[BatchEntries] = None,
    *,
    code: Optional[str] = None,
    inputs: Optional[BatchEntries] = None,
    limits: Optional[Limits] = None,
    policy: Optional[str] = None,
    compare: Optional[str] = None,
) -> Dict[str, Any]:
    """The JSON of ``POST /v1/batches``: ``runs``, or ``code`` with ``inputs`` (which of them make a
    batch is the server's to say: it names the field)."""
    b: Dict[str, Any] = {"runtime": runtime}
    for key, entries in (("runs", runs), ("inputs", inputs)):
        if entries is None:
            continue
        if isinstance(entries, (str, bytes, Mapping)):
            raise TypeError(f"{key} is a list of runs, not a {type(entries).__name__}")
        b[key] = [batch_entry(e, f"{key}[{i}]") for i, e in enumerate(entries)]
    if code is not None:
        b["code"] = code
    if limits:
        b["limits"] = LimitsType.of(limits).to_json()
    if policy is not None:
        b["policy"] = policy
    if compare is not None:
        b["compare"] = compare
    return b


def batch_event(line: bytes) -> Union[BatchEvent, Dict[str, Any], None]:
    """One NDJSON line of a streamed batch: a :class:`BatchEvent` for a run that ended, the last
    line (``{"batch-id", "summary"}``, a dict), or ``None``; an error line is raised as its
    exception (:func:`stream_error`)."""
    line = line.strip()
    if not line:
        return None
    try:
        ev = json.loads(line)
    except ValueError as e:
        raise StockadeError(f"the server sent a line that is not JSON: {line[:80]!r}") from e
    if not isinstance(ev, dict):
        return None
    if "error" in ev:
        raise stream_error(ev["error"])
    if isinstance(ev.get("result"), dict) and isinstance(ev.get("index"), int):
        return BatchEvent(ev["index"], Result.from_report(ev["result"]))
    if isinstance(ev.get("summary"), dict):
        return {"batch-id": str(ev["batch-id"]), "summary": ev["summary"]}
    return None


def file_path(session: str, path: str) -> str:
    """The URL path of a file of a session: ``path`` percent-encoded whole, its slashes too, so
    that nothing on the way resolves a ``..`` in it (the server decodes it and checks it)."""
    from urllib.parse import quote

    return f"/v1/sessions/{checked_id('session', session)}/files/{quote(path, safe='')}"


def retry_after(response: httpx.Response) -> Optional[float]:
    value = response.headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


#: Each error code of API v1 and the HTTP status the server answers it with (``docs/api.md``;
#: ``docs/openapi.json``'s ``ErrorCode`` lists the codes). An error event of a stream has no status
#: of its own: it is given its code's, and so the class an HTTP refusal with that code would have.
ERROR_STATUS: Dict[str, int] = {
    "bad-request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "policy-not-found": 404,
    "not-found": 404,
    "session-not-found": 404,
    "call-not-found": 404,
    "method-not-allowed": 405,
    "body-timeout": 408,
    "session-busy": 409,
    "file-conflict": 409,
    "cannot-hibernate": 409,
    "idempotency-conflict": 409,
    "session-ended": 410,
    "payload-too-large": 413,
    "unsupported-media-type": 415,
    "idempotency-mismatch": 422,
    "queue-full": 429,
    "too-many-sessions": 429,
    "jail-setup-failed": 500,
    "internal": 500,
    "queue-timeout": 503,
    "busy": 503,
    "draining": 503,
    "runtime-unavailable": 503,
}


def error_of(
    status: Optional[int],
    code: Optional[str],
    message: str,
    *,
    field: Optional[str] = None,
    run: Optional[str] = None,
    retry_after: Optional[float] = None,
) -> StockadeError:
    """The exception for a refusal with HTTP ``status`` and error ``code``: its class is picked
    from both (``None``, a status never had: a plain :class:`StockadeError`)."""
    kw: Dict[str, Any] = {"code": code, "field": field, "status": status}
    if status is None:
        return StockadeError(message, **kw)
    if status in (401, 403):
        return Unauthorized(message, **kw)
    if status == 404 and code == "policy-not-found":
        return PolicyNotFound(message, **kw)
    if status == 410:
        return SessionEnded(message, **kw)
    if status == 404 and code in ("session-not-found", "not-found"):
        return SessionNotFound(message, **kw)
    if status == 409 and code == "session-busy":
        return SessionBusy(message, run=run, **kw)
    if status == 429 or (status == 503 and code in ("queue-timeout", "busy")):
        return Busy(message, retry_after=retry_after, **kw)
    if status >= 500:
        return ServerUnavailable(message, retry_after=retry_after, **kw)
    if 400 <= status < 500:
        return BadRequest(message, **kw)
    return StockadeError(message, **kw)


def _text(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


def error_for(response: httpx.Response, content: bytes) -> StockadeError:
    """The exception for a non-200 answer (its JSON error, or the status alone)."""
    status = response.status_code
    code, message, field, run = None, f"HTTP {status}", None, None
    try:
        err = json.loads(content)["error"]
        code, message, field, run = err.get("code"), err.get("message", message), err.get("field"), err.get("run")
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    return error_of(status, code, message, field=field, run=run, retry_after=retry_after(response))


def stream_error(err: Any) -> StockadeError:
    """The exception for a stream's error event (``{"error": {"code", "message", "field"}}``): the
    class and the ``status`` of an HTTP refusal with its code (:data:`ERROR_STATUS`)."""
    if not isinstance(err, Mapping):
        err = {}
    code = _text(err.get("code"))
    message = _text(err.get("message")) or "the run failed"
    return error_of(
        ERROR_STATUS.get(code) if code is not None else None,
        code,
        message,
        field=_text(err.get("field")),
        run=_text(err.get("run")),
    )


def refused_before_running(err: StockadeError) -> bool:
    """A refusal that says nothing ran (full queue, draining): safe to try again."""
    return isinstance(err, Busy) or (isinstance(err, ServerUnavailable) and err.code == "draining")


def wait_for(err: StockadeError, attempt: int) -> float:
    after: Optional[float] = getattr(err, "retry_after", None)
    return min(MAX_RETRY_WAIT, after if after is not None else 0.1 * (2**attempt))


def retry_delay(failure: Exception, attempt: int, retries: int, idempotent: bool) -> Optional[float]:
    """How long to wait before trying a request again after ``failure``, or ``None`` when it must
    not be tried again. A run is idempotent only with its ``Idempotency-Key`` (the server then
    answers a second ask with the first answer); without one it is retried only when it cannot
    have reached a run (no connection was made; the server refused it before running anything).
    A request past the client's timeout is never asked again: the timeout bounds it."""
    if attempt >= retries:
        return None
    if isinstance(failure, httpx.TransportError):
        never_sent = isinstance(failure, (httpx.ConnectError, httpx.ConnectTimeout))
        timed_out = isinstance(failure, httpx.TimeoutException) and not never_sent
        return 0.1 * 2**attempt if never_sent or (idempotent and not timed_out) else None
    if isinstance(failure, StockadeError) and refused_before_running(failure):
        return wait_for(failure, attempt)
    return None


class Retry:
    """One request's attempts: after each failure, how long to wait before the next, or the
    exception to raise when there is none (see :func:`retry_delay`)."""

    def __init__(self, retries: int, idempotent: bool) -> None:
        self.retries, self.idempotent, self.attempt = retries, idempotent, 0

    def after(self, failure: Exception) -> float:
        delay = retry_delay(failure, self.attempt, self.retries, self.idempotent)
        if delay is None:
            raise fail(failure) from None
        self.attempt += 1
        return delay


def fail(failure: Exception) -> StockadeError:
    """The exception a failed request raises."""
    if isinstance(failure, httpx.TransportError):
        return unreachable(failure)
    assert isinstance(failure, StockadeError)
    return failure


def deadline(timeout: Optional[float]) -> Optional[float]:
    """When a request begun now must be over (``None``: no timeout)."""
    return None if timeout is None else time.monotonic() + timeout


def past(at: Optional[float]) -> None:
    """Raises the client's timeout when ``at`` has passed: an answer that comes a byte at a time
    is bounded as one that does not come."""
    if at is not None and time.monotonic() > at:
        raise httpx.ReadTimeout("the answer did not come whole within the client's timeout")


def whole(streamed: httpx.Response, data: bytes) -> httpx.Response:
    """A response read whole (``data``, decoded already), as ``httpx`` gives one."""
    kept = [(k, v) for k, v in streamed.headers.multi_items() if k.lower() != "content-encoding"]
    return httpx.Response(streamed.status_code, headers=kept, content=data, request=streamed.request)


class Stream:
    """A streamed run's lines: the output events to hand on, the output kept for the result."""

    def __init__(self) -> None:
        self.out: Dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}

    def feed(self, line: str) -> Union[Output, HostCall, Dict[str, Any], None]:
        """An :class:`Output`, a :class:`HostCall`, the final report (the run's result is
        :meth:`result`), or ``None``; an error event is raised (:func:`stream_error`)."""
        ev = event(line.encode("utf-8"))
        if isinstance(ev, Output):
            self.out[ev.stream] += ev.data
        return ev

    def result(self, report: Dict[str, Any]) -> Any:
        from ._types import Result

        return Result.from_report(report, stdout=bytes(self.out["stdout"]), stderr=bytes(self.out["stderr"]))


def unreachable(e: httpx.TransportError) -> ServerUnavailable:
    if isinstance(e, httpx.TimeoutException) and not isinstance(e, httpx.ConnectTimeout):
        return ServerUnavailable(f"no answer within the client's timeout (the run may have happened): {e!r}")
    if isinstance(e, (httpx.ConnectError, httpx.ConnectTimeout)):
        return ServerUnavailable(f"cannot reach the server: {e}")
    return ServerUnavailable(f"the connection was lost after the request was sent (the run may have happened): {e}")


def event(line: bytes) -> Union[Output, HostCall, Dict[str, Any], None]:
    """One NDJSON line of a streamed run: output, a host call, the final report (a dict), or
    ``None``; an error event is raised as its exception (:func:`stream_error`)."""
    line = line.strip()
    if not line:
        return None
    try:
        ev = json.loads(line)
    except ValueError as e:
        raise StockadeError(f"the server sent a line that is not JSON: {line[:80]!r}") from e
    for name in ("stdout", "stderr"):
        if name in ev:
            return Output(name, str(ev[name]).encode("utf-8"))
        if f"{name}-base64" in ev:
            return Output(name, base64.b64decode(ev[f"{name}-base64"]))
    if "call" in ev:
        c = ev["call"]
        return HostCall(run=str(c["run"]), id=str(c["id"]), name=str(c["name"]), args=c.get("args"))
    if "report" in ev:
        return dict(ev["report"])
    if "error" in ev:
        raise stream_error(ev["error"])
    return None
