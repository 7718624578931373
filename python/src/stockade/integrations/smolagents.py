"""smolagents on stockade: a ``CodeAgent`` whose code runs in a live session of a jailed Python.

>>> from smolagents import CodeAgent
>>> from stockade.integrations.smolagents import StockadeExecutor
>>> with CodeAgent(tools=[...], model=model, executor=StockadeExecutor(client)) as agent:
...     agent.run("How many primes are below 1000?")

Each step's code is a turn of one interpreter (``client.session(runtime, mode="live")``), so what
a step defines the next one sees. The agent's tools stay in this process: the session gets a
stub per tool that calls it back (``stockade_host.call(name, args)``), and each step's run
answers those calls with the real tool. ``final_answer`` is such a call too: its stub ends the
step (``FinalAnswerException``) and the executor returns the answer the host received.
"""

from __future__ import annotations

import io
import json
from typing import Any, Dict, List, Mapping, Optional

from .._client import Client, Session
from .._types import Result, Tool
from .._wire import Limits
from ._common import clip, import_error, reason

try:
    from smolagents.local_python_executor import CodeOutput, PythonExecutor  # type: ignore[import-untyped]
except ImportError as e:  # pragma: no cover - the extra is not installed
    raise import_error("smolagents", "smolagents") from e

__all__ = ["StockadeExecutor", "StockadeExecutionError"]

#: The most tools one run may declare (the server's cap), ``final_answer`` included.
MAX_TOOLS = 16

#: The most bytes a call's request may take (the server's cap): a long final answer fits.
_MAX_REQUEST_BYTES = 1 << 20

# Defined in the session before the tools' stubs: the one function they share, and the exception
# final_answer() ends its step with. Plain source, so it runs in any Python the runtime has.
_PRELUDE = '''
import json as _stockade_json
import stockade_host as _stockade_host


class FinalAnswerException(BaseException):
    """Ends the step: the agent has its final answer (the host holds it)."""


def _stockade_call(_name, _params, args, kwargs, _any=False):
    if len(args) == 1 and not kwargs and isinstance(args[0], dict) and args[0] \\
            and all(k in _params for k in args[0]):
        call = dict(args[0])
    else:
        if len(args) > len(_params):
            raise TypeError(f"{_name}() takes {len(_params)} positional arguments but {len(args)} were given")
        call = dict(zip(_params, args))
        for k, v in kwargs.items():
            if k in call:
                raise TypeError(f"{_name}() got multiple values for argument {k!r}")
            call[k] = v
    for k, v in call.items():
        try:
            _stockade_json.dumps(v)
        except (TypeError, ValueError):
            if not _any:
                raise TypeError(
                    f"{_name}(): argument {k!r} is a {type(v).__name__}; only JSON values (str, int, "
                    "float, bool, None, list, dict) reach the tool"
                ) from None
            call[k] = repr(v)
    return _stockade_host.call(_name, call)["value"]
'''

_STUB = '''
def {name}(*args, **kwargs):
    {doc}
    return _stockade_call({name!r}, {params!r}, args, kwargs)
'''

_FINAL_STUB = '''
def final_answer(*args, **kwargs):
    {doc}
    _stockade_call("final_answer", {params!r}, args, kwargs, _any=True)
    raise FinalAnswerException()
'''


class StockadeExecutionError(Exception):
    """A step's code failed in the jail: the message has its output and traceback (the agent
    shows it to the model)."""


class StockadeExecutor(PythonExecutor):  # type: ignore[misc]  # smolagents has no types
    """A smolagents ``PythonExecutor`` running each step in a live stockade session.

    ``client``: a :class:`stockade.Client` (``None``: ``Client()``, closed by :meth:`cleanup`).
    ``runtime``: ``python`` (CPython for WASI, the default) or ``python3`` (the host's
    interpreter, its packages and figures), or another Python runtime the server has with live
    sessions. ``policy``, ``limits``, ``idle_timeout_ms``, ``max_lifetime_ms``: the session's.
    ``step_limits``: each step's (only tighter, e.g. ``{"wall_timeout_ms": 5000}``).
    ``tool_timeout_ms``, ``tool_max_calls``: each tool's budgets in one step (the server's caps:
    60 s, 1000 calls). The session opens here and ends with :meth:`cleanup` (the agent's, or
    ``with``).
    """

    def __init__(
        self,
        client: Optional[Client] = None,
        *,
        runtime: str = "python",
        policy: Optional[str] = None,
        limits: Optional[Limits] = None,
        idle_timeout_ms: Optional[int] = None,
        max_lifetime_ms: Optional[int] = None,
        step_limits: Optional[Limits] = None,
        tool_timeout_ms: int = 60_000,
        tool_max_calls: Optional[int] = None,
    ) -> None:
        if client is not None and not isinstance(client, Client):
            raise TypeError(f"client: a stockade.Client, not {type(client).__name__}")
        if runtime in ("javascript", "wasm"):
            raise ValueError(f"runtime: smolagents writes Python; {runtime!r} does not run it")
        if not isinstance(tool_timeout_ms, int) or tool_timeout_ms <= 0:
            raise ValueError(f"tool_timeout_ms: a positive number of milliseconds, not {tool_timeout_ms!r}")
        self._own_client = client is None
        self.client: Client = client if client is not None else Client()
        self.runtime = runtime
        self.step_limits = step_limits
        self.tool_timeout_ms = tool_timeout_ms
        self.tool_max_calls = tool_max_calls
        self.tools: Dict[str, Any] = {}
        self.variables: Dict[str, Any] = {}
        #: The results of this executor's runs, oldest first (each step's, and the setup's).
        self.results: List[Result] = []
        self._final: Optional[List[Any]] = None
        self._defined = False  # the interpreter has the stubs and the variables
        self._alive = False  # the interpreter holds the state of earlier runs
        try:
            self.session: Optional[Session] = self.client.session(
                runtime, mode="live", policy=policy, limits=limits, idle_timeout_ms=idle_timeout_ms,
                max_lifetime_ms=max_lifetime_ms,
            )
        except BaseException:
            if self._own_client:
                self.client.close()
            raise

    # -- PythonExecutor -------------------------------------------------------------------------

    def send_tools(self, tools: Mapping[str, Any]) -> None:
        """Takes the agent's tools (``final_answer`` among them): before the next step the
        session gets a stub for each, which calls the tool here. A tool's requirements are this
        process's: nothing is installed in the jail."""
        checked: Dict[str, Any] = {}
        for name, tool in tools.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"tools: {name!r} is not a Python identifier")
            if not callable(tool):
                raise TypeError(f"tools[{name!r}]: a smolagents Tool (callable), not {type(tool).__name__}")
            checked[name] = tool
        if len(checked) > MAX_TOOLS:
            raise ValueError(f"tools: {len(checked)} tools, but a run may call at most {MAX_TOOLS} (final_answer included)")
        self.tools = checked
        self._defined = False

    def send_variables(self, variables: Mapping[str, Any]) -> None:
        """Takes the agent's variables (its ``state``, ``additional_args``), set in the session
        before the next step: JSON values only, a ``TypeError`` naming one that is not."""
        for name, value in variables.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"variables: {name!r} is not a Python identifier")
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                raise TypeError(
                    f"variables[{name!r}]: a {type(value).__name__} cannot cross into the jail (JSON values only)"
                ) from None
        if variables:
            self.variables.update(variables)
            self._defined = False

    def __call__(self, code_action: str) -> CodeOutput:
        """Runs one step's code (smolagents calls this)."""
        return self.run_code_raise_errors(code_action)

    def run_code_raise_errors(self, code: str) -> CodeOutput:
        """Runs ``code`` as one turn of the session: its print output as ``logs``, the value of
        its last expression (or its figures, as PIL images) as ``output``, ``is_final_answer``
        once ``final_answer`` was called. A failed step raises :class:`StockadeExecutionError`."""
        if not isinstance(code, str):
            raise TypeError(f"code: a string of Python source, not {type(code).__name__}")
        note = "" if self._defined else self._define()
        self._final = None
        result = self._session().run(code, limits=self.step_limits, tools=self._host_tools())
        self.results.append(result)
        note += self._observe(result)
        logs = result.stdout
        if result.stderr and result.ok:
            logs += result.stderr  # warnings, say: a failed step's stderr is its error
        logs += note
        if self._final is not None:
            return CodeOutput(output=self._final[0], logs=logs, is_final_answer=True)
        if not result.ok:
            raise StockadeExecutionError(_error_text(result, logs))
        return CodeOutput(output=_output(result), logs=logs, is_final_answer=False)

    def install_packages(self, additional_imports: List[str]) -> List[str]:
        """Not done: the jail has no network to install from. Use a runtime whose interpreter has
        them (``python3`` with the host's packages, or its ``venv``)."""
        if additional_imports:
            raise NotImplementedError(
                f"additional_imports: stockade does not install packages ({additional_imports}); "
                "use a runtime that has them (e.g. runtime='python3')"
            )
        return []

    def cleanup(self) -> None:
        """Ends the session (and the client, when the executor made it); idempotent."""
        session, self.session = self.session, None
        try:
            if session is not None:
                session.close()
        finally:
            if self._own_client:
                self.client.close()

    def __enter__(self) -> "StockadeExecutor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    # -- inside ---------------------------------------------------------------------------------

    def _session(self) -> Session:
        if self.session is None:
            raise RuntimeError("this StockadeExecutor was cleaned up: make a new one")
        return self.session

    def _define(self) -> str:
        """Defines the stubs and the variables in the session; a note for the logs when the
        interpreter's state was lost since the last step."""
        code = _stubs_code(self.tools)
        if self.variables:
            code += _variables_code(self.variables)
        result = self._session().run(code)
        self.results.append(result)
        if not result.ok:
            raise StockadeExecutionError("stockade: defining the tools failed in the session\n" + _error_text(result, ""))
        note = self._observe(result)
        self._defined = True
        return note

    def _observe(self, result: Result) -> str:
        """After a run: was the interpreter's state lost, in it or before it? Then the stubs are
        defined again before the next step, and the step's logs say so."""
        state = result.interpreter
        if state == "restarted" and result.interpreter_reason is None:
            self._alive = self._defined = False
            return (
                f"\n[stockade: the sandbox's interpreter ended in this step ({reason(result)}); variables "
                "and functions from earlier steps are gone, the tools come back]\n"
            )
        lost = state == "restarted" or (state == "started" and self._alive)
        self._alive = True
        if not lost:
            return ""
        self._defined = False
        why = result.interpreter_reason or "it was lost"
        return (
            f"\n[stockade: the sandbox's interpreter was restarted before this step ({why}); variables "
            "and functions from earlier steps are gone]\n"
        )

    def _host_tools(self) -> Dict[str, Tool]:
        return {
            name: Tool(
                self._answerer(name, tool), max_calls=self.tool_max_calls, timeout_ms=self.tool_timeout_ms,
                max_request_bytes=_MAX_REQUEST_BYTES,
            )
            for name, tool in self.tools.items()
        }

    def _answerer(self, name: str, tool: Any) -> Any:
        def answer(args: Any) -> Any:
            if not isinstance(args, dict):
                raise TypeError(f"{name}: the call's arguments are a {type(args).__name__}, not an object")
            value = tool(**args)
            if name == "final_answer":
                if self._final is None:
                    self._final = [value]
                value = None
            # Wrapped: an answer is never a bare null, which the server takes for no answer.
            return {"value": _jsonable(value)}

        return answer


def _stubs_code(tools: Mapping[str, Any]) -> str:
    """The session's side of the tools: the prelude, then a stub per tool."""
    parts = [_PRELUDE]
    for name, tool in tools.items():
        params = [str(p) for p in (getattr(tool, "inputs", None) or {})]
        doc = repr(str(getattr(tool, "description", "") or f"The agent's tool {name}."))
        if name == "final_answer":
            parts.append(_FINAL_STUB.format(doc=doc, params=params or ["answer"]))
        else:
            parts.append(_STUB.format(name=name, doc=doc, params=params))
    return "".join(parts)


def _variables_code(variables: Mapping[str, Any]) -> str:
    """Sets ``variables`` (JSON values) in the session's globals."""
    return f"\nglobals().update(__import__('json').loads({json.dumps(dict(variables))!r}))\n"


def _error_text(result: Result, logs: str) -> str:
    """A failed step as the model reads it: its output, then the traceback or why it ended."""
    parts = [logs.rstrip("\n")] if logs.strip() else []
    parts.append("Executing code yielded an error:")
    if result.status != "exited-nonzero":
        parts.append(f"{result.status}: {reason(result)}")
    if result.stderr.strip():
        parts.append(clip(result.stderr).rstrip("\n"))
    elif result.status == "exited-nonzero":
        parts.append(f"the code exited with code {result.exit_code}")
    return "\n".join(parts)


def _output(result: Result) -> Any:
    """A step's output: the value of its last expression (its ``repr`` when it is not JSON), else
    the figures it left open as PIL images (one, or a list), else ``None``."""
    if result.value is not None:
        return result.value
    if result.value_repr is not None:
        return result.value_repr
    if not result.outputs:
        return None
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - smolagents depends on pillow
        return [f.data for f in result.outputs] if len(result.outputs) > 1 else result.outputs[0].data
    images = [Image.open(io.BytesIO(f.data)) for f in result.outputs]
    return images[0] if len(images) == 1 else images


def _jsonable(value: Any) -> Any:
    """A tool's return value as the jail gets it: itself when it is JSON, else its ``str``."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value
