"""LangChain tools on a real server: invoked directly, and in a tool-call loop driven by a fake
chat model (langchain-core's GenericFakeChatModel)."""

from __future__ import annotations

import asyncio
from typing import Any, List, Sequence

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

import stockade
from stockade.integrations.langchain import StockadeTool, stockade_tools


class ToolCallingFake(GenericFakeChatModel):
    """GenericFakeChatModel that takes ``bind_tools`` (its replies are scripted anyway)."""

    bound: List[str] = []

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> "ToolCallingFake":
        self.bound = [t.name for t in tools]
        return self


def call(name: str, code: str, id: str = "call-1") -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": {"code": code}, "id": id, "type": "tool_call"}])


def loop(model: Any, tools: List[StockadeTool], question: str) -> List[BaseMessage]:
    """The smallest agent: ask, run each tool call, answer it, until the model stops calling."""
    by_name = {t.name: t for t in tools}
    messages: List[BaseMessage] = [HumanMessage(question)]
    for _ in range(5):
        reply = model.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            return messages
        for tc in reply.tool_calls:
            messages.append(by_name[tc["name"]].invoke(tc))
    raise AssertionError("the model did not stop")


def test_invoke_gives_the_run_as_text(client: stockade.Client) -> None:
    tool = StockadeTool(client=client)
    assert tool.name == "stockade_python" and tool.args == {"code": tool.args["code"]}
    text = tool.invoke({"code": "import sys\nprint('out')\nprint('err', file=sys.stderr)\n6 * 7"})
    assert text == "status: ok\nstdout:\nout\nstderr:\nerr\nvalue: 42"
    failed = tool.invoke({"code": "raise SystemExit(3)"})
    assert failed.startswith("status: exited-nonzero (the program exited with code 3)")
    js = StockadeTool(client=client, runtime="javascript")
    assert js.invoke({"code": "console.log([1, 2].map(x => x * 2).join(','))"}) == "status: ok\nstdout:\n2,4"


def test_timeouts_and_refusals_are_text(client: stockade.Client) -> None:
    tool = StockadeTool(client=client, limits={"wall_timeout_ms": 300})
    text = tool.invoke({"code": "while True:\n    pass"})
    assert text.startswith("status: timeout (the run passed its wall-clock limit (300 ms) and was killed")
    looser = StockadeTool(client=client, limits={"wall_timeout_ms": 10_000_000})
    refused = looser.invoke({"code": "print(1)"})
    assert refused.startswith("stockade refused the run: bad-request:") and "wall-timeout-ms" in refused
    capped = StockadeTool(client=client, limits={"stdout_max_bytes": 10}).invoke({"code": "print('x' * 100)"})
    assert capped.startswith("status: output-limit (the run's output passed its cap")
    assert "stdout: (cut at the output cap)\nxxxxxxxxxx" in capped


def test_a_fake_model_calls_the_tools(client: stockade.Client) -> None:
    tools = stockade_tools(client)
    assert [t.name for t in tools] == ["stockade_javascript", "stockade_python", "stockade_python3"]
    assert "/usr/bin/python3" in tools[2].description
    model = ToolCallingFake(messages=iter([
        call("stockade_python3", "import sys\nprint(sys.implementation.name, 2 ** 100)"),
        AIMessage(content="2**100 is 1267650600228229401496703205376."),
    ])).bind_tools(tools)
    messages = loop(model, tools, "What is 2**100?")
    assert model.bound == [t.name for t in tools]
    answer = messages[2]
    assert isinstance(answer, ToolMessage) and answer.tool_call_id == "call-1"
    assert "stdout:\ncpython 1267650600228229401496703205376" in answer.content
    assert str(messages[-1].content).startswith("2**100 is")


def test_a_live_session_keeps_state_across_calls(client: stockade.Client) -> None:
    with client.session("python", mode="live") as session:
        tool = StockadeTool(client=session)
        assert "kept between calls" in tool.description
        model = GenericFakeChatModel(messages=iter([
            call("stockade_python", "total = 40", "c1"),
            call("stockade_python", "total + 2", "c2"),
            AIMessage(content="42"),
        ]))
        messages = loop(model, [tool], "Add.")
        assert messages[4].content == "status: ok\nvalue: 42"
        with pytest.raises(ValueError, match="runtime"):
            StockadeTool(client=session, runtime="javascript")


def test_ainvoke_awaits_the_async_client(client: stockade.Client, async_client: stockade.AsyncClient) -> None:
    async def go() -> List[Any]:
        async with async_client:
            tool = StockadeTool(async_client=async_client)
            both = StockadeTool(client=client, response_format="content_and_artifact")
            text = await tool.ainvoke({"code": "print('async')"})
            msg = await both.ainvoke({"name": both.name, "args": {"code": "[1, 2]"}, "id": "x", "type": "tool_call"})
            with pytest.raises(ValueError, match="ainvoke"):
                tool.invoke({"code": "1"})
            return [text, msg]

    text, msg = asyncio.run(go())
    assert text == "status: ok\nstdout:\nasync"
    assert msg.content == "status: ok\nvalue: [1, 2]" and isinstance(msg.artifact, stockade.Result)
    with pytest.raises(ValueError, match="client"):
        StockadeTool()
    with pytest.raises(ValueError, match="runtimes"):
        stockade_tools(client, runtimes=["cobol"])
