"""Agent frameworks on stockade, each an optional extra imported only when asked for.

- :mod:`stockade.integrations.smolagents`: ``StockadeExecutor``, a ``CodeAgent`` executor whose
  code runs in a live session and reaches the agent's tools as host calls
  (``pip install 'stockade[smolagents]'``).
- :mod:`stockade.integrations.langchain`: ``StockadeTool`` and ``stockade_tools``, LangChain tools
  that run code (``pip install 'stockade[langchain]'``).
- :mod:`stockade.integrations.openai_agents`: ``stockade_function_tool``, a function tool of the
  OpenAI Agents SDK (``pip install 'stockade[openai-agents]'``).

``import stockade`` imports none of them, nor any framework.
"""
