"""The clients: :class:`Client` (blocking) and :class:`AsyncClient` (asyncio), the same methods."""

from __future__ import annotations

import asyncio
import time
from typing import (
    Any,
    AsyncGenerator,
    AsyncIterator,
    Dict,
    Generator,
    Iterable,
    Iterator,
    List,
    Optional,
    Sequence,
    Union,
    cast,
)

import httpcore
import httpx

from . import _wire
from ._types import (
    BatchEvent,
    BatchResult,
    BatchSummary,
    Compare,
    FileInfo,
    Health,
    HostCall,
    Info,
    Mode,
    Output,
    Result,
    SessionEnded,
    SessionInfo,
    SessionNotFound,
    StockadeError,
)

__all__ = ["Client", "AsyncClient", "Session", "AsyncSession", "BatchStream", "AsyncBatchStream"]

Event = Union[Output, Result]
#: A streamed batch's lines as the client reads them: a run that ended, then the last line.
_BatchLine = Union[BatchEvent, Dict[str, Any]]


class _Base:
    def __init__(
        self,
        socket: Optional[str],
        url: Optional[str],
        token: Optional[str],
        timeout: Optional[float],
        retries: int,
    ) -> None:
        self._base, self._uds = _wire.endpoint(socket, url)
        self._headers = _wire.headers(token)
        self._timeout = httpx.Timeout(timeout, connect=min(timeout, 10.0) if timeout else None)
        # The whole of a request, its answer read to its end too (httpx's own bound each read).
        self._total = timeout
        self._retries = max(0, retries)


class Client(_Base):
    """A blocking client of ``stockade serve``.

    ``Client()`` talks to ``/run/stockade/api.sock``; ``Client(socket=PATH)`` to another unix
    socket; ``Client(url="http://127.0.0.1:8787", token=...)`` over TCP. ``timeout`` bounds each
    request, its answer read whole (seconds; a run's own limit is the policy's). ``retries``: how
    many more times a request is tried when it never reached the server, the server refused it
    before running anything (a full queue, a draining server), or the connection was lost: each
    run carries an ``Idempotency-Key``, so a run asked again is answered by the first, never run
    twice. A request past the timeout is not asked again.
    """

    def __init__(
        self,
        socket: Optional[str] = None,
        *,
        url: Optional[str] = None,
        token: Optional[str] = None,
        timeout: Optional[float] = _wire.DEFAULT_TIMEOUT,
        retries: int = 2,
    ) -> None:
        super().__init__(socket, url, token, timeout, retries)
        transport = httpx.HTTPTransport(uds=self._uds) if self._uds else None
        self._http = httpx.Client(
            base_url=self._base, headers=self._headers, timeout=self._timeout, transport=transport
        )

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the client's connections."""
        self._http.close()

    def _request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        content: Optional[bytes] = None,
        idempotent: bool = True,
        key: Optional[str] = None,
    ) -> httpx.Response:
        headers = {_wire.KEY_HEADER: key} if key else None
        retry = _wire.Retry(self._retries, idempotent or key is not None)
        while True:
            try:
                response = self._fetch(method, path, json_body, content, headers)
                if 200 <= response.status_code < 300:
                    return response
                failure: Exception = _wire.error_for(response, response.content)
            except httpx.TransportError as e:
                failure = e
            time.sleep(retry.after(failure))

    def _fetch(
        self, method: str, path: str, json_body: Any, content: Optional[bytes], headers: Optional[Dict[str, str]]
    ) -> httpx.Response:
        """One request, its answer read whole within the client's timeout."""
        at = _wire.deadline(self._total)
        with self._http.stream(method, path, json=json_body, content=content, headers=headers) as r:
            data = bytearray()
            for chunk in r.iter_bytes():
                data += chunk
                _wire.past(at)
        return _wire.whole(r, bytes(data))

    def health(self) -> Health:
        """``GET /v1/health``: status, running and queued runs, warm pools (a :class:`Health`, a
        plain dict with the server's keys)."""
        return cast(Health, dict(self._request("GET", "/v1/health").json()))

    def info(self) -> Info:
        """``GET /v1/info``: version, runtimes, policies with their limits, what the host enforces
        (an :class:`Info`, a plain dict with the server's keys)."""
        return cast(Info, dict(self._request("GET", "/v1/info").json()))

    def run(
        self,
        runtime: str,
        code: str,
        *,
        argv: Optional[Sequence[str]] = None,
        stdin: Union[str, bytes, None] = None,
        files: Optional[_wire.Files] = None,
        limits: Optional[_wire.Limits] = None,
        policy: Optional[str] = None,
        return_files: Union[str, Iterable[str], None] = None,
        tools: Optional[_wire.Tools] = None,
        egress_allow: Optional[Sequence[str]] = None,
    ) -> Result:
        """Runs ``code`` in ``runtime`` (``python``, ``javascript``, or one the server adds).

        ``files`` maps a path relative to the run's ``/app`` to bytes or text; ``return_files``
        names patterns of files to bring back (``result.files`` maps their paths to bytes);
        ``limits`` may only tighten the policy (``Limits(wall_timeout_ms=2000)``, or the same
        as a dict). ``tools`` maps a name to a callable (or a :class:`Tool`) the run may call
        back with ``stockade_host.call(name, args)`` (``host.call`` in JavaScript): the run streams, and each call is answered
        here by ``fn(args)`` while it runs (``result.report["host-calls"]`` lists them).
        ``egress_allow`` narrows the hosts the runtime's policy lets the run reach
        (``["pypi.org:443"]``; one it does not list is refused); ``result.egress`` lists every
        connection the run asked for.
        """
        b = _wire.body(
            runtime, code=code, argv=argv, stdin=stdin, files=files, limits=limits, policy=policy,
            return_files=return_files, tools=tools, egress_allow=egress_allow,
        )
        if tools:
            return _last(self._streamed("/v1/runs", b, tools, None))
        return Result.from_report(self._request("POST", "/v1/runs", json_body=b, key=_wire.new_key()).json())

    def run_python(
        self,
        code: str,
        *,
        argv: Optional[Sequence[str]] = None,
        stdin: Union[str, bytes, None] = None,
        files: Optional[_wire.Files] = None,
        limits: Optional[_wire.Limits] = None,
        policy: Optional[str] = None,
        return_files: Union[str, Iterable[str], None] = None,
        tools: Optional[_wire.Tools] = None,
    ) -> Result:
        """Runs Python code (CPython for WASI); the keywords of :meth:`run`."""
        return self.run(
            "python", code, argv=argv, stdin=stdin, files=files, limits=limits, policy=policy,
            return_files=return_files, tools=tools,
        )

    def run_js(
        self,
        code: str,
        *,
        argv: Optional[Sequence[str]] = None,
        stdin: Union[str, bytes, None] = None,
        files: Optional[_wire.Files] = None,
        limits: Optional[_wire.Limits] = None,
        policy: Optional[str] = None,
        return_files: Union[str, Iterable[str], None] = None,
        tools: Optional[_wire.Tools] = None,
    ) -> Result:
        """Runs JavaScript (QuickJS); the keywords of :meth:`run`."""
        return self.run(
            "javascript", code, argv=argv, stdin=stdin, files=files, limits=limits, policy=policy,
            return_files=return_files, tools=tools,
        )

    def run_wasm(
        self,
        module: bytes,
        *,
        argv: Optional[Sequence[str]] = None,
        stdin: Union[str, bytes, None] = None,
        files: Optional[_wire.Files] = None,
        limits: Optional[_wire.Limits] = None,
        policy: Optional[str] = None,
        return_files: Union[str, Iterable[str], None] = None,
    ) -> Result:
        """Runs a WASI preview 1 command module (compiled by the server in a jail, cached)."""
        b = _wire.body(
            "wasm", module=module, argv=argv, stdin=stdin, files=files, limits=limits, policy=policy,
            return_files=return_files,
        )
        return Result.from_report(self._request("POST", "/v1/runs", json_body=b, key=_wire.new_key()).json())

    def stream(
        self,
        runtime: str,
        code: str,
        *,
        argv: Optional[Sequence[str]] = None,
        stdin: Union[str, bytes, None] = None,
        files: Optional[_wire.Files] = None,
        limits: Optional[_wire.Limits] = None,
        policy: Optional[str] = None,
        return_files: Union[str, Iterable[str], None] = None,
        tools: Optional[_wire.Tools] = None,
    ) -> Iterator[Event]:
        """Runs ``code`` and yields its output as it happens (:class:`Output`), then its
        :class:`Result` (whose ``stdout``/``stderr`` hold what was streamed, up to the caps);
        ``tools`` as for :meth:`run` (their calls are answered here, not yielded). An error the
        server sends in the stream is raised as an HTTP refusal with its code would be
        (:class:`BadRequest` for ``bad-request``...)."""
        b = _wire.body(
            runtime, code=code, argv=argv, stdin=stdin, files=files, limits=limits, policy=policy,
            return_files=return_files, tools=tools,
        )
        yield from self._streamed("/v1/runs", b, tools, None)

    def batch(
        self,
        runtime: str,
        runs: Optional[_wire.BatchEntries] = None,
        *,
        code: Optional[str] = None,
        inputs: Optional[_wire.BatchEntries] = None,
        limits: Optional[_wire.Limits] = None,
        policy: Optional[str] = None,
        compare: Optional[Compare] = None,
    ) -> BatchResult:
        """``POST /v1/batches``: many runs of ``runtime`` (a Wasm guest's: ``python``,
        ``javascript``), each in a fresh instance of its guest, sharing a few jails. Either
        ``runs`` (each a :class:`BatchRun`, or a dict with its keys: ``code``, ``argv``, ``stdin``,
        ``limits``, ``expect``), or one program, ``code``, against many ``inputs`` (each a
        :class:`BatchInput`, or such a dict without ``code``). A run with an ``expect`` is judged
        (``result.verdict``), its stdout held against it as ``compare`` says (``"exact"``, or the
        server's default ``"trailing-whitespace"``).

        ``limits`` are every run's (a run's own may only tighten them), and the jails':
        ``memory_max_bytes`` and ``pids_max`` are set here, never in a run's own (a
        :class:`BadRequest` naming ``runs[N].limits.memory-max-bytes``). A bad batch is refused
        before anything runs, the field named (``runs[3].stdin``). The answer, a
        :class:`BatchResult`, comes when the last run has ended, within the client's ``timeout``
        (:meth:`batch_stream` gives each result as its run ends). A batch carries no
        ``Idempotency-Key``: it is asked again only when nothing ran (no connection was made, or
        the server refused it before running it)."""
        b = _wire.batch_body(runtime, runs, code=code, inputs=inputs, limits=limits, policy=policy, compare=compare)
        return BatchResult.from_answer(self._request("POST", "/v1/batches", json_body=b, idempotent=False).json())

    def batch_stream(
        self,
        runtime: str,
        runs: Optional[_wire.BatchEntries] = None,
        *,
        code: Optional[str] = None,
        inputs: Optional[_wire.BatchEntries] = None,
        limits: Optional[_wire.Limits] = None,
        policy: Optional[str] = None,
        compare: Optional[Compare] = None,
    ) -> "BatchStream":
        """:meth:`batch`, streamed (``?stream=ndjson``): a :class:`BatchStream` that yields a
        :class:`BatchEvent` (``index, result``) as each run ends, in the order they end (not the
        runs' order), then stops; its ``summary`` and ``batch_id`` are then set. The request is
        sent when the iteration begins; a refusal (before the batch starts, or an error line of
        the stream) is raised as its class (:class:`BadRequest`...). Closing the stream before its
        end (``close()``, or leaving its ``with`` block) hangs up, which ends the batch: its jails
        take no further run."""
        b = _wire.batch_body(runtime, runs, code=code, inputs=inputs, limits=limits, policy=policy, compare=compare)
        return BatchStream(self._batch_lines(b))

    def _batch_lines(self, b: Dict[str, Any]) -> Generator[_BatchLine, None, None]:
        retry = _wire.Retry(self._retries, False)
        while True:
            try:
                with self._http.stream("POST", "/v1/batches", params={"stream": "ndjson"}, json=b) as response:
                    if response.status_code == 200:
                        for line in response.iter_lines():
                            ev = _wire.batch_event(line.encode("utf-8"))
                            if ev is not None:
                                yield ev
                        raise StockadeError("the batch's stream ended without its summary")
                    failure: Exception = _wire.error_for(response, response.read())
            except httpx.TransportError as e:
                failure = e
            time.sleep(retry.after(failure))

    def _streamed(self, path: str, b: Dict[str, Any], tools: Optional[_wire.Tools], session: Optional[str]) -> Iterator[Event]:
        retry = _wire.Retry(self._retries, False)
        upgrade = _wire.UPGRADE if tools else None
        while True:
            try:
                with self._http.stream("POST", path, params={"stream": "ndjson"}, json=b, headers=upgrade) as response:
                    if response.status_code == 101:
                        yield from self._duplex(response, tools)
                        return
                    if response.status_code == 200:
                        lines = _wire.Stream()
                        for line in response.iter_lines():
                            ev = lines.feed(line)
                            if isinstance(ev, Output):
                                yield ev
                            elif isinstance(ev, HostCall):
                                self._answer(ev, tools, session)
                            elif ev is not None:
                                yield lines.result(ev)
                                return
                        raise StockadeError("the stream ended without a report")
                    failure: Exception = _wire.error_for(response, response.read())
            except httpx.TransportError as e:
                failure = e
            time.sleep(retry.after(failure))

    def _duplex(self, response: httpx.Response, tools: Optional[_wire.Tools]) -> Iterator[Event]:
        """An upgraded run's events, its calls answered on its own connection."""
        net = response.extensions["network_stream"]
        read = self._timeout.read
        lines = _wire.Stream()
        try:
            for line in _wire.split_lines(iter(lambda: net.read(65536, timeout=read), b"")):
                ev = lines.feed(line.decode("utf-8", "replace"))
                if isinstance(ev, Output):
                    yield ev
                elif isinstance(ev, HostCall):
                    net.write(_wire.answer_line(ev, self._answer_of(ev, tools)), timeout=read)
                elif ev is not None:
                    yield lines.result(ev)
                    return
        except (httpcore.NetworkError, httpcore.TimeoutException) as e:
            raise _wire.unreachable(httpx.ReadError(str(e))) from e
        finally:
            net.close()
        raise StockadeError("the stream ended without a report")

    def _answer_of(self, call: HostCall, tools: Optional[_wire.Tools]) -> Dict[str, Any]:
        fn = (tools or {}).get(call.name)
        if fn is None:
            return {"error": f"this client has no tool {call.name!r}"}
        answer, pending = _wire.answer_of(fn, call.args)
        if pending is not None:
            pending.close()
            answer = {"error": f"tool {call.name!r} is async: use the AsyncClient"}
        return answer

    def _answer(self, call: HostCall, tools: Optional[_wire.Tools], session: Optional[str]) -> None:
        answer = self._answer_of(call, tools)
        try:
            self._http.post(_wire.call_path(call, session), json=answer)
        except httpx.TransportError:
            pass  # the server answers the call for it (a timeout error) at the tool's timeout

    def session(
        self,
        runtime: str = "python",
        *,
        mode: Mode = "workspace",
        policy: Optional[str] = None,
        limits: Optional[_wire.Limits] = None,
        idle_timeout_ms: Optional[int] = None,
        max_lifetime_ms: Optional[int] = None,
    ) -> "Session":
        """Opens a session (``POST /v1/sessions``): runs of ``runtime`` that share a workspace
        (``/app``) between them. Keywords: ``mode`` (``"workspace"``: each run a fresh
        interpreter; ``"live"``: one interpreter keeps its variables between runs), ``policy``,
        ``limits`` (for every run), ``idle_timeout_ms``, ``max_lifetime_ms``. Use it with
        ``with``: leaving the block ends the session (``DELETE``)."""
        body = _wire.session_body(
            runtime, mode=mode, policy=policy, limits=limits, idle_timeout_ms=idle_timeout_ms,
            max_lifetime_ms=max_lifetime_ms,
        )
        info = self._request("POST", "/v1/sessions", json_body=body, idempotent=False)
        return Session(self, cast(SessionInfo, dict(info.json())))

    def stream_python(
        self,
        code: str,
        *,
        argv: Optional[Sequence[str]] = None,
        stdin: Union[str, bytes, None] = None,
        files: Optional[_wire.Files] = None,
        limits: Optional[_wire.Limits] = None,
        policy: Optional[str] = None,
        return_files: Union[str, Iterable[str], None] = None,
        tools: Optional[_wire.Tools] = None,
    ) -> Iterator[Event]:
        """:meth:`stream` for Python code."""
        return self.stream(
            "python", code, argv=argv, stdin=stdin, files=files, limits=limits, policy=policy,
            return_files=return_files, tools=tools,
        )

    def stream_js(
        self,
        code: str,
        *,
        argv: Optional[Sequence[str]] = None,
        stdin: Union[str, bytes, None] = None,
        files: Optional[_wire.Files] = None,
        limits: Optional[_wire.Limits] = None,
        policy: Optional[str] = None,
        return_files: Union[str, Iterable[str], None] = None,
        tools: Optional[_wire.Tools] = None,
    ) -> Iterator[Event]:
        """:meth:`stream` for JavaScript."""
        return self.stream(
            "javascript", code, argv=argv, stdin=stdin, files=files, limits=limits, policy=policy,
            return_files=return_files, tools=tools,
        )


class AsyncClient(_Base):
    """The asyncio client: :class:`Client`'s arguments and methods, awaited
    (``async with AsyncClient() as c: r = await c.run_python("print(1)")``; ``async for`` over
    the streams)."""

    def __init__(
        self,
        socket: Optional[str] = None,
        *,
        url: Optional[str] = None,
        token: Optional[str] = None,
        timeout: Optional[float] = _wire.DEFAULT_TIMEOUT,
        retries: int = 2,
    ) -> None:
        super().__init__(socket, url, token, timeout, retries)
        transport = httpx.AsyncHTTPTransport(uds=self._uds) if self._uds else None
        self._http = httpx.AsyncClient(
            base_url=self._base, headers=self._headers, timeout=self._timeout, transport=transport
        )

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the client's connections."""
        await self._http.aclose()

    async def _request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        content: Optional[bytes] = None,
        idempotent: bool = True,
        key: Optional[str] = None,
    ) -> httpx.Response:
        headers = {_wire.KEY_HEADER: key} if key else None
        retry = _wire.Retry(self._retries, idempotent or key is not None)
        while True:
            try:
                response = await self._fetch(method, path, json_body, content, headers)
                if 200 <= response.status_code < 300:
                    return response
                failure: Exception = _wire.error_for(response, response.content)
            except httpx.TransportError as e:
                failure = e
            await asyncio.sleep(retry.after(failure))

    async def _fetch(
        self, method: str, path: str, json_body: Any, content: Optional[bytes], headers: Optional[Dict[str, str]]
    ) -> httpx.Response:
        """See :meth:`Client._fetch`."""
        at = _wire.deadline(self._total)
        async with self._http.stream(method, path, json=json_body, content=content, headers=headers) as r:
            data = bytearray()
            async for chunk in r.aiter_bytes():
                data += chunk
                _wire.past(at)
        return _wire.whole(r, bytes(data))

    async def health(self) -> Health:
        """See :meth:`Client.health`."""
        return cast(Health, dict((await self._request("GET", "/v1/health")).json()))

    async def info(self) -> Info:
        """See :meth:`Client.info`."""
        return cast(Info, dict((await self._request("GET", "/v1/info")).json()))

    async def run(
        self,
        runtime: str,
        code: str,
        *,
        argv: Optional[Sequence[str]] = None,
        stdin: Union[str, bytes, None] = None,
        files: Optional[_wire.Files] = None,
        limits: Optional[_wire.Limits] = None,
        policy: Optional[str] = None,
        return_files: Union[str, Iterable[str], None] = None,
        tools: Optional[_wire.Tools] = None,
        egress_allow: Optional[Sequence[str]] = None,
    ) -> Result:
        """See :meth:`Client.run` (a tool may also be an async function)."""
        if tools:
            b = _wire.body(
                runtime, code=code, argv=argv, stdin=stdin, files=files, limits=limits, policy=policy,
                return_files=return_files, tools=tools, egress_allow=egress_allow,
            )
            return await _alast(self._streamed("/v1/runs", b, tools, None))
        b = _wire.body(
            runtime, code=code, argv=argv, stdin=stdin, files=files, limits=limits, policy=policy,
            return_files=return_files, egress_allow=egress_allow,
        )
        response = await self._request("POST", "/v1/runs", json_body=b, key=_wire.new_key())
        return Result.from_report(response.json())

    async def run_python(
        self,
        code: str,
        *,
        argv: Optional[Sequence[str]] = None,
        stdin: Union[str, bytes, None] = None,
        files: Optional[_wire.Files] = None,
        limits: Optional[_wire.Limits] = None,
        policy: Optional[str] = None,
        return_files: Union[str, Iterable[str], None] = None,
        tools: Optional[_wire.Tools] = None,
    ) -> Result:
        """See :meth:`Client.run_python`."""
        return await self.run(
            "python", code, argv=argv, stdin=stdin, files=files, limits=limits, policy=policy,
            return_files=return_files, tools=tools,
        )

    async def run_js(
        self,
        code: str,
        *,
        argv: Optional[Sequence[str]] = None,
        stdin: Union[str, bytes, None] = None,
        files: Optional[_wire.Files] = None,
        limits: Optional[_wire.Limits] = None,
        policy: Optional[str] = None,
        return_files: Union[str, Iterable[str], None] = None,
        tools: Optional[_wire.Tools] = None,
    ) -> Result:
        """See :meth:`Client.run_js`."""
        return await self.run(
            "javascript", code, argv=argv, stdin=stdin, files=files, limits=limits, policy=policy,
            return_files=return_files, tools=tools,
        )

    async def run_wasm(
        self,
        module: bytes,
        *,
        argv: Optional[Sequence[str]] = None,
        stdin: Union[str, bytes, None] = None,
        files: Optional[_wire.Files] = None,
        limits: Optional[_wire.Limits] = None,
        policy: Optional[str] = None,
        return_files: Union[str, Iterable[str], None] = None,
    ) -> Result:
        """See :meth:`Client.run_wasm`."""
        b = _wire.body(
            "wasm", module=module, argv=argv, stdin=stdin, files=files, limits=limits, policy=policy,
            return_files=return_files,
        )
        response = await self._request("POST", "/v1/runs", json_body=b, key=_wire.new_key())
        return Result.from_report(response.json())

    async def stream(
        self,
        runtime: str,
        code: str,
        *,
        argv: Optional[Sequence[str]] = None,
        stdin: Union[str, bytes, None] = None,
        files: Optional[_wire.Files] = None,
        limits: Optional[_wire.Limits] = None,
        policy: Optional[str] = None,
        return_files: Union[str, Iterable[str], None] = None,
        tools: Optional[_wire.Tools] = None,
    ) -> AsyncIterator[Event]:
        """See :meth:`Client.stream`."""
        b = _wire.body(
            runtime, code=code, argv=argv, stdin=stdin, files=files, limits=limits, policy=policy,
            return_files=return_files, tools=tools,
        )
        async for ev in self._streamed("/v1/runs", b, tools, None):
            yield ev

    async def batch(
        self,
        runtime: str,
        runs: Optional[_wire.BatchEntries] = None,
        *,
        code: Optional[str] = None,
        inputs: Optional[_wire.BatchEntries] = None,
        limits: Optional[_wire.Limits] = None,
        policy: Optional[str] = None,
        compare: Optional[Compare] = None,
    ) -> BatchResult:
        """See :meth:`Client.batch`."""
        b = _wire.batch_body(runtime, runs, code=code, inputs=inputs, limits=limits, policy=policy, compare=compare)
        response = await self._request("POST", "/v1/batches", json_body=b, idempotent=False)
        return BatchResult.from_answer(response.json())

    def batch_stream(
        self,
        runtime: str,
        runs: Optional[_wire.BatchEntries] = None,
        *,
        code: Optional[str] = None,
        inputs: Optional[_wire.BatchEntries] = None,
        limits: Optional[_wire.Limits] = None,
        policy: Optional[str] = None,
        compare: Optional[Compare] = None,
    ) -> "AsyncBatchStream":
        """See :meth:`Client.batch_stream` (``async for i, result in client.batch_stream(...)``)."""
        b = _wire.batch_body(runtime, runs, code=code, inputs=inputs, limits=limits, policy=policy, compare=compare)
        return AsyncBatchStream(self._batch_lines(b))

    async def _batch_lines(self, b: Dict[str, Any]) -> AsyncGenerator[_BatchLine, None]:
        retry = _wire.Retry(self._retries, False)
        while True:
            try:
                async with self._http.stream("POST", "/v1/batches", params={"stream": "ndjson"}, json=b) as response:
                    if response.status_code == 200:
                        async for line in response.aiter_lines():
                            ev = _wire.batch_event(line.encode("utf-8"))
                            if ev is not None:
                                yield ev
                        raise StockadeError("the batch's stream ended without its summary")
                    failure: Exception = _wire.error_for(response, await response.aread())
            except httpx.TransportError as e:
                failure = e
            await asyncio.sleep(retry.after(failure))

    async def _streamed(
        self, path: str, b: Dict[str, Any], tools: Optional[_wire.Tools], session: Optional[str]
    ) -> AsyncIterator[Event]:
        retry = _wire.Retry(self._retries, False)
        upgrade = _wire.UPGRADE if tools else None
        while True:
            try:
                async with self._http.stream("POST", path, params={"stream": "ndjson"}, json=b, headers=upgrade) as response:
                    if response.status_code == 101:
                        async for ev in self._duplex(response, tools):
                            yield ev
                        return
                    if response.status_code == 200:
                        lines = _wire.Stream()
                        async for line in response.aiter_lines():
                            ev = lines.feed(line)
                            if isinstance(ev, Output):
                                yield ev
                            elif isinstance(ev, HostCall):
                                await self._answer(ev, tools, session)
                            elif ev is not None:
                                yield lines.result(ev)
                                return
                        raise StockadeError("the stream ended without a report")
                    failure: Exception = _wire.error_for(response, await response.aread())
            except httpx.TransportError as e:
                failure = e
            await asyncio.sleep(retry.after(failure))

    async def _duplex(self, response: httpx.Response, tools: Optional[_wire.Tools]) -> AsyncIterator[Event]:
        """An upgraded run's events, its calls answered on its own connection."""
        net = response.extensions["network_stream"]
        read = self._timeout.read
        lines = _wire.Stream()
        rest = b""
        try:
            while True:
                chunk = await net.read(65536, timeout=read)
                if not chunk:
                    break
                rest += chunk
                *whole, rest = rest.split(b"\n")
                for line in whole:
                    ev = lines.feed(line.decode("utf-8", "replace"))
                    if isinstance(ev, Output):
                        yield ev
                    elif isinstance(ev, HostCall):
                        await net.write(_wire.answer_line(ev, await self._answer_of(ev, tools)), timeout=read)
                    elif ev is not None:
                        yield lines.result(ev)
                        return
        except (httpcore.NetworkError, httpcore.TimeoutException) as e:
            raise _wire.unreachable(httpx.ReadError(str(e))) from e
        finally:
            await net.aclose()
        raise StockadeError("the stream ended without a report")

    async def _answer_of(self, call: HostCall, tools: Optional[_wire.Tools]) -> Dict[str, Any]:
        fn = (tools or {}).get(call.name)
        if fn is None:
            return {"error": f"this client has no tool {call.name!r}"}
        answer, pending = _wire.answer_of(fn, call.args)
        if pending is not None:
            try:
                answer = _wire.ok(await pending)
            except Exception as e:  # the tool's failure is the run's to see
                answer = _wire.failed(e)
        return answer

    async def _answer(self, call: HostCall, tools: Optional[_wire.Tools], session: Optional[str]) -> None:
        answer = await self._answer_of(call, tools)
        try:
            await self._http.post(_wire.call_path(call, session), json=answer)
        except httpx.TransportError:
            pass  # the server answers the call for it (a timeout error) at the tool's timeout

    async def session(
        self,
        runtime: str = "python",
        *,
        mode: Mode = "workspace",
        policy: Optional[str] = None,
        limits: Optional[_wire.Limits] = None,
        idle_timeout_ms: Optional[int] = None,
        max_lifetime_ms: Optional[int] = None,
    ) -> "AsyncSession":
        """See :meth:`Client.session` (``async with await client.session() as s``)."""
        body = _wire.session_body(
            runtime, mode=mode, policy=policy, limits=limits, idle_timeout_ms=idle_timeout_ms,
            max_lifetime_ms=max_lifetime_ms,
        )
        info = await self._request("POST", "/v1/sessions", json_body=body, idempotent=False)
        return AsyncSession(self, cast(SessionInfo, dict(info.json())))

    def stream_python(
        self,
        code: str,
        *,
        argv: Optional[Sequence[str]] = None,
        stdin: Union[str, bytes, None] = None,
        files: Optional[_wire.Files] = None,
        limits: Optional[_wire.Limits] = None,
        policy: Optional[str] = None,
        return_files: Union[str, Iterable[str], None] = None,
        tools: Optional[_wire.Tools] = None,
    ) -> AsyncIterator[Event]:
        """See :meth:`Client.stream_python`."""
        return self.stream(
            "python", code, argv=argv, stdin=stdin, files=files, limits=limits, policy=policy,
            return_files=return_files, tools=tools,
        )

    def stream_js(
        self,
        code: str,
        *,
        argv: Optional[Sequence[str]] = None,
        stdin: Union[str, bytes, None] = None,
        files: Optional[_wire.Files] = None,
        limits: Optional[_wire.Limits] = None,
        policy: Optional[str] = None,
        return_files: Union[str, Iterable[str], None] = None,
        tools: Optional[_wire.Tools] = None,
    ) -> AsyncIterator[Event]:
        """See :meth:`Client.stream_js`."""
        return self.stream(
            "javascript", code, argv=argv, stdin=stdin, files=files, limits=limits, policy=policy,
            return_files=return_files, tools=tools,
        )


class Session:
    """A session of a :class:`Client` (:meth:`Client.session`): each :meth:`run` is a fresh jail
    and interpreter whose ``/app`` holds the session's files, and the ``/app`` it leaves is the
    next run's; in a live session (``mode="live"``) every run is a turn of one interpreter, which
    keeps its state (``Result.interpreter`` says whether it did). ``id`` is the server's id;
    ``info`` what the server said when it was made."""

    def __init__(self, client: Client, info: SessionInfo) -> None:
        self._client = client
        self.id: str = _wire.checked_id("session", info.get("id"))
        self.info: SessionInfo = info

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(
        self,
        code: str,
        *,
        argv: Optional[Sequence[str]] = None,
        stdin: Union[str, bytes, None] = None,
        files: Optional[_wire.Files] = None,
        limits: Optional[_wire.Limits] = None,
        return_files: Union[str, Iterable[str], None] = None,
        tools: Optional[_wire.Tools] = None,
    ) -> Result:
        """Runs ``code`` in the session: :meth:`Client.run`'s keywords but ``policy`` (a session's
        runs have the session's; ``limits`` may only tighten the session's). ``result.session``
        says what was kept."""
        b = _wire.session_run_body(
            code, argv=argv, stdin=stdin, files=files, limits=limits, return_files=return_files,
            tools=tools,
        )
        if tools:
            return _last(self._client._streamed(f"/v1/sessions/{self.id}/runs", b, tools, self.id))
        r = self._client._request("POST", f"/v1/sessions/{self.id}/runs", json_body=b, key=_wire.new_key())
        return Result.from_report(r.json())

    def upload(self, path: str, data: Union[bytes, str]) -> FileInfo:
        """Writes a file into the workspace (``path`` relative to ``/app``; its directories are
        made)."""
        content = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        r = self._client._request("PUT", _wire.file_path(self.id, path), content=content)
        return FileInfo.from_json(r.json())

    def download(self, path: str) -> bytes:
        """A file of the workspace (:class:`SessionNotFound` when there is none)."""
        return self._client._request("GET", _wire.file_path(self.id, path)).content

    def remove(self, path: str) -> None:
        """Removes a file from the workspace."""
        self._client._request("DELETE", _wire.file_path(self.id, path))

    def files(self) -> List[FileInfo]:
        """The workspace's files, in path order."""
        r = self._client._request("GET", f"/v1/sessions/{self.id}/files")
        return [FileInfo.from_json(f) for f in r.json()["files"]]

    def refresh(self) -> SessionInfo:
        """``GET /v1/sessions/{id}``: the session as the server sees it now."""
        self.info = cast(SessionInfo, dict(self._client._request("GET", f"/v1/sessions/{self.id}").json()))
        return self.info

    def fork(self) -> "Session":
        """``POST /v1/sessions/{id}/fork``: a new session of this client's with a copy of this
        one's workspace, of its interpreter's state (a live ``python`` session's: the fork's
        ``random`` is drawn again) and its own clocks (``info["forked-from"]`` names this one);
        each goes on on its own. :class:`Conflict` (``cannot-hibernate``) when the interpreter
        cannot be copied now (a file it holds open)."""
        info = self._client._request("POST", f"/v1/sessions/{self.id}/fork", idempotent=False)
        return Session(self._client, cast(SessionInfo, dict(info.json())))

    def hibernate(self) -> SessionInfo:
        """``POST /v1/sessions/{id}/hibernate``: a live session's interpreter written to the
        server's state directory and its jail ended (``info["state"]`` is ``"hibernated"``); its
        next run resumes it (``result.interpreter == "resumed"``). One that cannot be written (not
        the python guest's) is ended, its workspace kept; :class:`Conflict` when it cannot be
        now (a file it holds open), and it goes on as it was."""
        self.info = cast(SessionInfo, dict(self._client._request("POST", f"/v1/sessions/{self.id}/hibernate").json()))
        return self.info

    def close(self) -> None:
        """Ends the session (``DELETE``); one that already ended is left as it is."""
        try:
            self._client._request("DELETE", f"/v1/sessions/{self.id}")
        except (SessionNotFound, SessionEnded):
            pass


class AsyncSession:
    """:class:`Session` for an :class:`AsyncClient`: the same methods, awaited."""

    def __init__(self, client: AsyncClient, info: SessionInfo) -> None:
        self._client = client
        self.id: str = _wire.checked_id("session", info.get("id"))
        self.info: SessionInfo = info

    async def __aenter__(self) -> "AsyncSession":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def run(
        self,
        code: str,
        *,
        argv: Optional[Sequence[str]] = None,
        stdin: Union[str, bytes, None] = None,
        files: Optional[_wire.Files] = None,
        limits: Optional[_wire.Limits] = None,
        return_files: Union[str, Iterable[str], None] = None,
        tools: Optional[_wire.Tools] = None,
    ) -> Result:
        """See :meth:`Session.run`."""
        b = _wire.session_run_body(
            code, argv=argv, stdin=stdin, files=files, limits=limits, return_files=return_files,
            tools=tools,
        )
        if tools:
            return await _alast(self._client._streamed(f"/v1/sessions/{self.id}/runs", b, tools, self.id))
        r = await self._client._request("POST", f"/v1/sessions/{self.id}/runs", json_body=b, key=_wire.new_key())
        return Result.from_report(r.json())

    async def upload(self, path: str, data: Union[bytes, str]) -> FileInfo:
        """See :meth:`Session.upload`."""
        content = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        r = await self._client._request("PUT", _wire.file_path(self.id, path), content=content)
        return FileInfo.from_json(r.json())

    async def download(self, path: str) -> bytes:
        """See :meth:`Session.download`."""
        return (await self._client._request("GET", _wire.file_path(self.id, path))).content

    async def remove(self, path: str) -> None:
        """See :meth:`Session.remove`."""
        await self._client._request("DELETE", _wire.file_path(self.id, path))

    async def files(self) -> List[FileInfo]:
        """See :meth:`Session.files`."""
        r = await self._client._request("GET", f"/v1/sessions/{self.id}/files")
        return [FileInfo.from_json(f) for f in r.json()["files"]]

    async def refresh(self) -> SessionInfo:
        """See :meth:`Session.refresh`."""
        self.info = cast(SessionInfo, dict((await self._client._request("GET", f"/v1/sessions/{self.id}")).json()))
        return self.info

    async def fork(self) -> "AsyncSession":
        """See :meth:`Session.fork`."""
        info = await self._client._request("POST", f"/v1/sessions/{self.id}/fork", idempotent=False)
        return AsyncSession(self._client, cast(SessionInfo, dict(info.json())))

    async def hibernate(self) -> SessionInfo:
        """See :meth:`Session.hibernate`."""
        answer = await self._client._request("POST", f"/v1/sessions/{self.id}/hibernate")
        self.info = cast(SessionInfo, dict(answer.json()))
        return self.info

    async def close(self) -> None:
        """See :meth:`Session.close`."""
        try:
            await self._client._request("DELETE", f"/v1/sessions/{self.id}")
        except (SessionNotFound, SessionEnded):
            pass


class BatchStream:
    """A streamed batch (:meth:`Client.batch_stream`): iterated, it yields a :class:`BatchEvent`
    (``index, result``) as each run ends, in the order they end; once it has stopped, ``summary``
    (a :class:`BatchSummary`) and ``batch_id`` say how the batch went (``None`` until then). It is
    iterated once. ``close()``, or leaving its ``with`` block, hangs up: a batch left before its
    end is ended, its jails taking no further run."""

    def __init__(self, lines: Generator[_BatchLine, None, None]) -> None:
        self._lines = lines
        self.batch_id: Optional[str] = None
        self.summary: Optional[BatchSummary] = None

    def __iter__(self) -> "BatchStream":
        return self

    def __next__(self) -> BatchEvent:
        ev = next(self._lines)
        if isinstance(ev, BatchEvent):
            return ev
        self.batch_id, self.summary = ev["batch-id"], cast(BatchSummary, ev["summary"])
        self.close()
        raise StopIteration

    def close(self) -> None:
        """Ends the stream (and, before its end, the batch)."""
        self._lines.close()

    def __enter__(self) -> "BatchStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncBatchStream:
    """:class:`BatchStream` for an :class:`AsyncClient`: ``async for i, result in stream``, then
    ``stream.summary``; ``await stream.aclose()`` or ``async with`` hangs up."""

    def __init__(self, lines: AsyncGenerator[_BatchLine, None]) -> None:
        self._lines = lines
        self.batch_id: Optional[str] = None
        self.summary: Optional[BatchSummary] = None

    def __aiter__(self) -> "AsyncBatchStream":
        return self

    async def __anext__(self) -> BatchEvent:
        ev = await self._lines.__anext__()
        if isinstance(ev, BatchEvent):
            return ev
        self.batch_id, self.summary = ev["batch-id"], cast(BatchSummary, ev["summary"])
        await self.aclose()
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Ends the stream (and, before its end, the batch)."""
        await self._lines.aclose()

    async def __aenter__(self) -> "AsyncBatchStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _last(events: Iterator[Event]) -> Result:
    """The result at the end of a stream (its output is in it)."""
    for ev in events:
        if isinstance(ev, Result):
            return ev
    raise StockadeError("the stream ended without a report")


async def _alast(events: AsyncIterator[Event]) -> Result:
    async for ev in events:
        if isinstance(ev, Result):
            return ev
    raise StockadeError("the stream ended without a report")
