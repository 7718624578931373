"""smolagents' CodeAgent with its code in a live stockade session, driven by a scripted model."""

from __future__ import annotations

import os
from typing import Any, List

import pytest
from PIL import Image
from smolagents import CodeAgent, Tool
from smolagents.models import ChatMessage, MessageRole, Model

import stockade
from stockade.integrations.smolagents import StockadeExecutor


class Scripted(Model):
    """Answers each step with the next canned reply; keeps what it was shown."""

    def __init__(self, replies: List[str]) -> None:
        super().__init__(model_id="scripted")
        self.replies = list(replies)
        self.seen: List[str] = []

    def generate(self, messages: List[Any], stop_sequences: Any = None, **kwargs: Any) -> ChatMessage:
        self.seen.append("\n".join(text(m) for m in messages))
        return ChatMessage(role=MessageRole.ASSISTANT, content=self.replies.pop(0))


class Counter(Tool):
    name = "bump"
    description = "Adds `by` to the host's counter and returns the new total."
    inputs = {"by": {"type": "integer", "description": "how much to add"}}
    output_type = "integer"

    def __init__(self) -> None:
        super().__init__()
        self.total = 0
        self.pids: List[int] = []

    def forward(self, by: int) -> int:
        self.total += by
        self.pids.append(os.getpid())
        return self.total


def text(message: Any) -> str:
    """A message's text, as the model reads it."""
    content = message.content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content)
    return str(content or "")


def step(code: str) -> str:
    return f"Thought: next.\n<code>\n{code}\n</code>"


def test_two_steps_keep_state_and_call_the_host(client: stockade.Client) -> None:
    counter = Counter()
    model = Scripted([
        step("import os, stockade_host\nx = bump(by=5)\njail_pid = os.getpid()\nprint('x is', x, 'pid', jail_pid)"),
        step("y = bump(x)\nfinal_answer({'y': y, 'x': x, 'pid': jail_pid})"),
    ])
    with CodeAgent(tools=[counter], model=model, executor=StockadeExecutor(client), max_steps=4) as agent:
        answer = agent.run("Count twice.")
        executor = agent.python_executor
        assert isinstance(executor, StockadeExecutor)
        session = executor.session
        assert session is not None
    assert answer == {"y": 10, "x": 5, "pid": answer["pid"]}
    assert counter.total == 10 and counter.pids == [os.getpid(), os.getpid()]  # the tool ran here
    assert answer["pid"] != os.getpid()  # the code did not
    assert "x is 5 pid" in model.seen[1]  # step 1's print reached the model
    assert [r.interpreter for r in executor.results] == ["started", "kept", "kept"]
    assert all(r.report["host-calls"] for r in executor.results[1:])
    with pytest.raises(stockade.SessionNotFound):  # the agent's cleanup ended the session
        session.refresh()


def test_an_error_reaches_the_next_step(client: stockade.Client) -> None:
    model = Scripted([
        step("items = [1, 2, 3]\nprint('before')\nitems[7]"),
        step("len(items)"),
        step("final_answer(sum(items))"),
    ])
    with CodeAgent(tools=[], model=model, executor=StockadeExecutor(client), max_steps=4) as agent:
        assert agent.run("Sum them.") == 6
    assert "IndexError: list index out of range" in model.seen[1]
    assert "before" in model.seen[1]
    assert "Last output from code snippet:\n3" in model.seen[2]  # a value comes back


def test_a_timeout_says_the_state_is_gone_and_the_tools_come_back(client: stockade.Client) -> None:
    counter = Counter()
    model = Scripted([
        step("kept = 1\nwhile True:\n    pass"),
        step("print(bump(by=2))\nprint('kept' in globals())"),
        step("final_answer('done')"),
    ])
    executor = StockadeExecutor(client, step_limits={"wall_timeout_ms": 500})
    with CodeAgent(tools=[counter], model=model, executor=executor, max_steps=4) as agent:
        assert agent.run("Loop.") == "done"
    assert "timeout" in model.seen[1] and "variables and functions from earlier steps are gone" in model.seen[1]
    assert "2\nFalse" in model.seen[2]
    assert counter.total == 2


def test_tool_errors_and_arguments(client: stockade.Client) -> None:
    class Fails(Tool):
        name = "fails"
        description = "Always fails."
        inputs = {"why": {"type": "string", "description": "the reason"}}
        output_type = "string"

        def forward(self, why: str) -> str:
            raise ValueError(f"no: {why}")

    with StockadeExecutor(client) as executor:
        executor.send_tools({"fails": Fails()})
        executor.send_variables({"limit": 3, "names": ["a", "b"]})
        with pytest.raises(Exception, match="ValueError: no: because"):
            executor("fails('because')")
        with pytest.raises(Exception, match="only JSON values"):
            executor("fails(object())")
        out = executor("limit * len(names)")
        assert (out.output, out.is_final_answer) == (6, False)
        assert executor("print('hi')\n{1, 2}").output == "{1, 2}"  # not JSON: its repr
    with pytest.raises(TypeError, match=r"variables\['v'\]"):
        StockadeExecutor.send_variables(executor, {"v": object()})
    with pytest.raises(ValueError, match="runtime"):
        StockadeExecutor(client, runtime="javascript")
    with pytest.raises(TypeError, match="client"):
        StockadeExecutor("not a client")  # type: ignore[arg-type]


def test_python3_runtime_and_its_figures(client: stockade.Client) -> None:
    model = Scripted([
        step("import sys\nimport matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nv = sys.implementation.name"),
        step("final_answer(v + '!')"),
    ])
    executor = StockadeExecutor(client, runtime="python3")
    with CodeAgent(tools=[], model=model, executor=executor, max_steps=3) as agent:
        assert agent.run("Which Python? Draw something.") == "cpython!"
        figure = agent.memory.steps[1].action_output
    assert isinstance(figure, Image.Image) and figure.format == "PNG" and figure.width > 100
