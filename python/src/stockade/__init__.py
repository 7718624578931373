"""stockade: run untrusted code through ``stockade serve``.

>>> import stockade
>>> with stockade.Client() as client:              # /run/stockade/api.sock
...     print(client.run_python("print(6 * 7)").stdout)
42
"""

from . import _types
from ._client import AsyncClient, AsyncSession, Client, Session
from ._types import (
    BadRequest,
    Busy,
    FileInfo,
    HostCall,
    Limits,
    Output,
    PolicyNotFound,
    Result,
    RunFailed,
    ServerUnavailable,
    SessionBusy,
    SessionEnded,
    SessionNotFound,
    StockadeError,
    Tool,
    Unauthorized,
)

__version__ = "0.1.0"

__all__ = ["Client", "AsyncClient", "Session", "AsyncSession", *_types.__all__]
