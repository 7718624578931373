"""A function tool of the OpenAI Agents SDK (``openai-agents``) that runs code in stockade.

>>> from agents import Agent, Runner
>>> from stockade.integrations.openai_agents import stockade_function_tool
>>> agent = Agent(name="coder", tools=[stockade_function_tool(client)])
>>> Runner.run_sync(agent, "What is 2**100?")

The tool runs where it is pointed: a client (a fresh jail per call) or a session, whose state a
live session (``client.session("python", mode="live")``) keeps from call to call; its owner
closes it. An :class:`stockade.AsyncClient` or :class:`stockade.AsyncSession` is awaited on the
agent's loop, a synchronous one runs on a thread.
"""

from __future__ import annotations

from typing import Optional

from .._types import StockadeError
from .._wire import Limits
from ._common import (
    MAX_STREAM_CHARS,
    Target,
    check_code,
    default_description,
    describe,
    import_error,
    run_async,
    target_runtime,
    tool_name,
    words,
)

try:
    from agents import FunctionTool, function_tool
except ImportError as e:  # pragma: no cover - the extra is not installed
    raise import_error("openai-agents", "openai-agents") from e

__all__ = ["stockade_function_tool"]


def stockade_function_tool(
    client: Target,
    *,
    runtime: Optional[str] = None,
    limits: Optional[Limits] = None,
    name: Optional[str] = None,
    description: Optional[str] = None,
    max_output_chars: int = MAX_STREAM_CHARS,
) -> FunctionTool:
    """A ``FunctionTool`` taking ``{"code": str}`` and answering the run as text (status and why
    when not ok, stdout, stderr, the value of the last expression). ``client``: a
    :class:`stockade.Client`, :class:`stockade.AsyncClient`, or a session of either (its runtime
    is the tool's); ``runtime`` (``python`` by default), ``limits`` (each run's, only tighter),
    ``name`` (``stockade_<runtime>``), ``description`` (from the runtime). A refusal of the
    server's (a looser limit, a full queue) is the tool's answer, in words."""
    rt = target_runtime(client, runtime)
    if max_output_chars < 100:
        raise ValueError(f"max_output_chars: at least 100, not {max_output_chars}")

    async def run_code(code: str) -> str:
        """Runs code.

        Args:
            code: The whole program to run. Print what you want to see.
        """
        try:
            result = await run_async(client, rt, check_code(code), limits)
        except StockadeError as e:
            return f"stockade refused the run: {e}"
        return describe(result, max_chars=max_output_chars)

    return function_tool(
        run_code,
        name_override=name or tool_name(rt),
        description_override=description or default_description(words(rt), client),
    )
