"""LangChain tools that run code in stockade jails (``langchain-core`` only).

>>> from stockade.integrations.langchain import StockadeTool, stockade_tools
>>> tool = StockadeTool(client=client)                      # Python, a fresh jail per call
>>> print(tool.invoke({"code": "print(6 * 7)"}))
status: ok
stdout:
42
>>> tools = stockade_tools(client)                          # one per runtime the server lists
>>> model.bind_tools(tools)

A tool given a :class:`stockade.Session` (``client=session``) runs every call in it, so a live
session keeps the code's variables from one call to the next. ``ainvoke`` awaits an
``async_client`` (:class:`stockade.AsyncClient` or :class:`stockade.AsyncSession`) when the tool
has one, else runs the synchronous one on a thread.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

from .._client import AsyncClient, AsyncSession, Client, Session
from .._types import Result, StockadeError
from .._wire import Limits
from ._common import (
    MAX_STREAM_CHARS,
    check_code,
    code_runtimes,
    default_description,
    describe,
    import_error,
    run_async,
    run_sync,
    runtime_words,
    target_runtime,
    tool_name,
    words,
)

try:
    from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
    from langchain_core.tools import BaseTool, ToolException
    from pydantic import BaseModel, ConfigDict, Field, model_validator
except ImportError as e:  # pragma: no cover - the extra is not installed
    raise import_error("langchain-core", "langchain") from e

__all__ = ["StockadeTool", "StockadeInput", "stockade_tools"]

class StockadeInput(BaseModel):
    """What the model gives a stockade tool: the code."""

    code: str = Field(description="The whole program to run. Print what you want to see.")


class StockadeTool(BaseTool):
    """A LangChain tool running the model's code in stockade: ``client`` (a
    :class:`stockade.Client`, or a :class:`stockade.Session` to keep state) for ``invoke``,
    ``async_client`` (:class:`stockade.AsyncClient` or :class:`stockade.AsyncSession`) for
    ``ainvoke``; at least one. ``runtime`` (``python`` by default; a session's own), ``limits``
    (each run's, only tighter). The answer is text (:func:`describe`); with
    ``response_format="content_and_artifact"`` the :class:`stockade.Result` is its artifact. A
    refusal of the server's is the tool's text too (``handle_tool_error``)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = "stockade_python"
    description: str = default_description(words("python"))
    args_schema: Any = StockadeInput
    handle_tool_error: Any = True
    client: Optional[Union[Client, Session]] = None
    async_client: Optional[Union[AsyncClient, AsyncSession]] = None
    runtime: Optional[str] = None
    limits: Optional[Any] = None
    max_output_chars: int = MAX_STREAM_CHARS

    @model_validator(mode="before")
    @classmethod
    def _named(cls, data: Any) -> Any:
        """Names and describes the tool after its runtime, unless given."""
        if not isinstance(data, dict):
            return data
        target = data.get("client") if data.get("client") is not None else data.get("async_client")
        if target is None:
            raise ValueError("client: give a stockade Client or Session (or async_client for ainvoke)")
        runtime = target_runtime(target, data.get("runtime"))
        data = {**data, "runtime": runtime}
        data.setdefault("name", tool_name(runtime))
        data.setdefault("description", default_description(words(runtime), target))
        return data

    @model_validator(mode="after")
    def _checked(self) -> "StockadeTool":
        for other in (self.client, self.async_client):
            if other is not None:
                target_runtime(other, self.runtime)
        if self.max_output_chars < 100:
            raise ValueError(f"max_output_chars: at least 100, not {self.max_output_chars}")
        return self

    def _answer(self, result: Result) -> Union[str, Tuple[str, Result]]:
        text = describe(result, max_chars=self.max_output_chars)
        return (text, result) if self.response_format == "content_and_artifact" else text

    def _run(self, code: str, run_manager: Optional[CallbackManagerForToolRun] = None) -> Any:
        if self.client is None:
            raise ValueError(f"client: tool {self.name!r} has only an async_client: use ainvoke")
        try:
            result = run_sync(self.client, str(self.runtime), check_code(code), self.limits)
        except StockadeError as e:
            raise ToolException(f"stockade refused the run: {e}") from e
        return self._answer(result)

    async def _arun(self, code: str, run_manager: Optional[AsyncCallbackManagerForToolRun] = None) -> Any:
        target = self.async_client if self.async_client is not None else self.client
        assert target is not None  # the validator saw to it
        try:
            result = await run_async(target, str(self.runtime), check_code(code), self.limits)
        except StockadeError as e:
            raise ToolException(f"stockade refused the run: {e}") from e
        return self._answer(result)


def stockade_tools(
    client: Client,
    *,
    async_client: Optional[AsyncClient] = None,
    runtimes: Optional[List[str]] = None,
    limits: Optional[Limits] = None,
    **kwargs: Any,
) -> List[StockadeTool]:
    """One :class:`StockadeTool` per runtime ``client``'s server lists that runs code (``wasm``
    and unavailable runtimes left out), named ``stockade_<runtime>`` and described from
    ``info()``; ``runtimes`` picks some by name. ``kwargs`` go to each tool."""
    if not isinstance(client, Client):
        raise TypeError(f"client: a stockade.Client (its server lists the runtimes), not {type(client).__name__}")
    tools = []
    for rt in code_runtimes(client, runtimes):
        name = str(rt["name"])
        extra: Dict[str, Any] = {"description": default_description(runtime_words(rt))}
        extra.update(kwargs)
        tools.append(
            StockadeTool(client=client, async_client=async_client, runtime=name, limits=limits, **extra)
        )
    return tools
