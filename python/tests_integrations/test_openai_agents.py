"""The OpenAI Agents SDK's Runner with a scripted Model (no OpenAI API, tracing off) calling the
stockade function tool on a real server."""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator, List

from agents import Agent, FunctionTool, Runner, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

import stockade
from stockade.integrations.openai_agents import stockade_function_tool

set_tracing_disabled(True)


class Scripted(Model):
    """Calls the tool with each piece of code in turn, then answers with text; keeps its inputs."""

    def __init__(self, tool: str, codes: List[str]) -> None:
        self.tool = tool
        self.codes = list(codes)
        self.inputs: List[Any] = []
        self.tools_seen: List[str] = []

    async def get_response(self, system_instructions: Any, input: Any, model_settings: Any, tools: Any,
                           output_schema: Any, handoffs: Any, tracing: Any, **kwargs: Any) -> ModelResponse:
        self.inputs.append(input)
        self.tools_seen = [t.name for t in tools]
        n = len(self.inputs)
        if self.codes:
            item: Any = ResponseFunctionToolCall(
                type="function_call", id=f"fc_{n}", call_id=f"call_{n}", name=self.tool, status="completed",
                arguments=json.dumps({"code": self.codes.pop(0)}),
            )
        else:
            item = ResponseOutputMessage(
                id=f"msg_{n}", type="message", role="assistant", status="completed",
                content=[ResponseOutputText(type="output_text", text="done", annotations=[])],
            )
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("scripted: no streaming")


def outputs(model: Scripted) -> List[str]:
    """The tool outputs the model was given, in order."""
    return [
        str(item["output"]) for item in model.inputs[-1]
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


def test_runner_calls_the_tool(client: stockade.Client) -> None:
    tool = stockade_function_tool(client)
    assert isinstance(tool, FunctionTool) and tool.name == "stockade_python"
    assert tool.params_json_schema["required"] == ["code"]
    model = Scripted("stockade_python", ["import os\nprint('pid', os.getpid())\n2 ** 10"])
    result = asyncio.run(Runner.run(Agent(name="coder", model=model, tools=[tool]), "Compute."))
    assert result.final_output == "done"
    assert model.tools_seen == ["stockade_python"]
    assert outputs(model) == ["status: ok\nstdout:\npid 42\nvalue: 1024"]  # the Wasm guest's pid


def test_a_live_async_session_keeps_state(async_client: stockade.AsyncClient) -> None:
    async def go() -> Scripted:
        async with async_client:
            async with await async_client.session("python3", mode="live") as session:
                model = Scripted("py", ["import sys\nseen = [sys.implementation.name]", "print(seen * 2)"])
                tool = stockade_function_tool(session, name="py")
                assert "kept between calls" in tool.description
                await Runner.run(Agent(name="coder", model=model, tools=[tool]), "Remember.")
                return model

    model = asyncio.run(go())
    assert outputs(model) == ["status: ok\n(no output)", "status: ok\nstdout:\n['cpython', 'cpython']"]


def test_refusals_and_failures_reach_the_model(client: stockade.Client) -> None:
    tool = stockade_function_tool(client, runtime="javascript", limits={"memory_max_bytes": 1})
    model = Scripted("stockade_javascript", ["console.log(1)"])
    asyncio.run(Runner.run(Agent(name="coder", model=model, tools=[tool]), "Try."))
    [refused] = outputs(model)
    assert refused.startswith("stockade refused the run: bad-request:") and "memory-max-bytes" in refused
    tool = stockade_function_tool(client, limits={"wall_timeout_ms": 300})
    model = Scripted("stockade_python", ["while True:\n    pass"])
    asyncio.run(Runner.run(Agent(name="coder", model=model, tools=[tool]), "Loop."))
    assert outputs(model)[0].startswith("status: timeout (the run passed its wall-clock limit (300 ms)")
