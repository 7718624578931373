"""stockade: run untrusted code through ``stockade serve``.

>>> import stockade
>>> with stockade.Client() as client:              # /run/stockade/api.sock
...     print(client.run_python("print(6 * 7)").stdout)
42
"""

from ._client import AsyncClient, AsyncSession, Client, Session
from ._types import (
    BadRequest,
    Busy,
    Figure,
    FileInfo,
    Health,
    HostCall,
    Info,
    LayerReport,
    Limits,
    Mode,
    SessionState,
    Output,
    PolicyInfo,
    PolicyLimits,
    PolicyNotFound,
    Readiness,
    RequestsInfo,
    Result,
    RunFailed,
    RunLimits,
    RuntimeInfo,
    RuntimeRuns,
    ServerUnavailable,
    SessionBusy,
    SessionEnded,
    SessionInfo,
    SessionNotFound,
    SessionsInfo,
    StockadeError,
    Tool,
    Unauthorized,
    Warm,
    WorkspaceUse,
)

__version__ = "0.1.0"

# Written out whole (not `*_types.__all__`): a type checker reads the names a package exports here.
__all__ = [
    "Client",
    "AsyncClient",
    "Session",
    "AsyncSession",
    "Limits",
    "Result",
    "Output",
    "Figure",
    "StockadeError",
    "BadRequest",
    "Unauthorized",
    "PolicyNotFound",
    "Busy",
    "ServerUnavailable",
    "RunFailed",
    "SessionNotFound",
    "SessionEnded",
    "SessionBusy",
    "FileInfo",
    "Tool",
    "HostCall",
    "Readiness",
    "Mode",
    "SessionState",
    "Warm",
    "Health",
    "RunLimits",
    "PolicyLimits",
    "PolicyInfo",
    "LayerReport",
    "RuntimeRuns",
    "RuntimeInfo",
    "RequestsInfo",
    "SessionsInfo",
    "Info",
    "WorkspaceUse",
    "SessionInfo",
]
