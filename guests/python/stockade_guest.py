"""The entry point of stockade's pre-initialized Python guest.

componentize-py imports this module while it builds the guest, runs CPython's start-up and
this module's top level, and snapshots the heap: every run starts from that snapshot, in a
fresh instance, and calls `run`. It behaves as stockade's `python -c` bootstrap does (see
crates/stockade/src/handover.rs): the same frame on stdin, the same exit codes, the same tracebacks.
"""

import os
import sys

import wit_world

# Paid at build time: the compiler's first use, and what a traceback needs.
compile("pass", "<string>", "exec")
import traceback  # noqa: E402  (sys.excepthook imports it on first use)

# The standard streams as CPython makes them for pipes (componentize-py's are unbuffered: each
# `print` would be two writes): stdout block-buffered, stderr line-buffered, stdin buffered.
import io  # noqa: E402


def _stream(fd, mode, **kwargs):
    raw = io.FileIO(fd, mode, closefd=False)
    buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
    return io.TextIOWrapper(buffered, encoding="utf-8", **kwargs)


sys.stdin = sys.__stdin__ = _stream(0, "r", errors="strict")
sys.stdout = sys.__stdout__ = _stream(1, "w", errors="strict")
sys.stderr = sys.__stderr__ = _stream(2, "w", errors="backslashreplace", line_buffering=True)

# In stockade's jails the network is off, and a network attempt says so (WASI's own answer
# is an opaque resolver error).
import _socket  # noqa: E402


def _network_off(*args, **kwargs):
    raise OSError(101, "Network is unreachable: the network is off in this stockade jail")


for _name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr", "getnameinfo"):
    setattr(_socket, _name, _network_off)
del _socket, _name


# Loaded once, here, rather than by every run: the standard library's modules for data work that
# `policies/examples/python-allowlist.toml` lists (all but `uuid` and `platform`, which ask the
# host about itself), and what they import. A module a run loads
# itself costs it a directory scan and a bytecode read through WASI (`import json`: 15 ms).
import json, csv, statistics, fractions, decimal, numbers  # noqa: E401,E402
import datetime, calendar, locale, heapq, string, pprint  # noqa: E401,E402
import difflib, hashlib, base64, struct  # noqa: E401,E402

# None of these may be part of every run: under a module list (`wasm.python-modules`) a module
# is out of reach only if the snapshot has not loaded it. A build that loaded one fails here.
_NEVER = (
    "socket", "subprocess", "shutil", "tempfile", "ctypes",
    "urllib.request", "http.client", "ssl", "select",
)
_loaded = sorted(m for m in _NEVER if m in sys.modules)
if _loaded:
    raise ImportError(f"the snapshot must not load {_loaded}")
del _NEVER, _loaded


import _ast  # noqa: E402
from wit_world.imports import host as _host  # noqa: E402


# `import stockade_host`: host calls (the WIT world's `host` import), in every run's view.
def _host_module():
    import types
    from componentize_py_types import Err
    from wit_world.imports import host

    m = types.ModuleType("stockade_host")

    class ToolError(Exception):
        """A host call that failed: the tool's error, a refusal (no such tool, past a budget) or
        its timeout, in words."""

    ToolError.__module__ = "stockade_host"

    def call(name, args=None):
        """Calls the host's tool `name` with `args` (anything JSON can say) and returns its
        answer, parsed; raises ToolError with the reason when it fails."""
        try:
            return json.loads(host.call(str(name), json.dumps(args)))
        except Err as e:
            raise ToolError(e.value) from None

    m.call, m.ToolError = call, ToolError
    sys.modules["stockade_host"] = m


_host_module()
del _host_module


def _fresh(env):
    """What the snapshot fixed at build time and a run must not share with another: the
    environment (the run's, `env`) and the `random` module's state (drawn again from the run's
    own entropy)."""
    # Key by key: `clear` and `update` are the generic mapping methods (one `popitem` per
    # variable, an abstract-base-class check of `env` that is slow the first time).
    environ = os.environ
    for k in list(environ):
        del environ[k]
    for k, v in env:
        environ[k] = v
    r = sys.modules.get("random")
    if r is not None:
        r.seed()


def _exact(n, first=False):
    b = bytearray()
    while len(b) < n:
        c = os.read(0, n - len(b))
        if not c:
            raise SystemExit(0 if first and not b else 125)
        b += c
    return bytes(b)


def _framed():
    n, argc = map(int, _exact(16, True).split())
    src = _exact(n).decode("utf-8")
    args = [_exact(int(_exact(11))).decode("utf-8", "surrogateescape") for _ in range(argc)]
    return src, args


def _status(e):
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code & 0xFF
    print(e.code, file=sys.stderr)
    return 1


def _flush():
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:
            pass


def _cell(src):
    """`src` compiled as a notebook cell runs: its body, and its last statement apart when that
    is an expression (its value is the cell's), as stockade's bootstrap does
    (crates/stockade/src/handover.rs, `python_give`)."""
    tree = compile(src, "<string>", "exec", 0x400)
    last = tree.body[-1] if tree.body else None
    if type(last) is _ast.Expr:
        del tree.body[-1]
        return compile(tree, "<string>", "exec"), compile(_ast.Expression(last.value), "<string>", "eval")
    return compile(tree, "<string>", "exec"), None


def _give(v):
    """Gives the host the code's value `v` (the bootstrap's rule): `{"value": V}` when it is JSON
    and reads back equal, else `{"repr": ...}`, within 16 KiB; `None` is no value."""
    if v is None:
        return
    cap = 16384
    try:
        try:
            text = json.dumps(v, allow_nan=False)
            said = {"value": v} if len(text) <= cap and json.loads(text) == v else None
        except Exception:
            said = None
        if said is None:
            try:
                r = repr(v)
            except Exception as e:
                r = "<repr failed: %s>" % type(e).__name__
            said = {"repr": r[:cap]}
        given = json.dumps(said)
    except BaseException as e:
        given = json.dumps({"left-out": "the code's value was left out: %s" % type(e).__name__})
    _host.give(given)


def _finish():
    t = sys.modules.get("threading")
    if t is not None and hasattr(t, "_shutdown"):
        t._shutdown()
    a = sys.modules.get("atexit")
    if a is not None:
        a._run_exitfuncs()
    _flush()


# A live session's main module, made at its first turn (see `turn`).
_live = None


def _turn(code, stdin, env):
    global _live
    if _live is None:
        _fresh(env)
        if os.path.isdir("/app"):
            os.chdir("/app")
        # The host resources every live interpreter's first turn makes, in this order (its
        # preopened directories above, then its stdout and stderr streams): a hibernated one's
        # image holds their handles, and a resumed one makes them again the same way.
        os.write(1, b"")
        os.write(2, b"")
        sys.argv = ["-c"]
        _live = type(sys)("__main__")
        _live.__dict__.update({"__name__": "__main__", "__builtins__": __builtins__, "__doc__": None})
        sys.modules["__main__"] = _live
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    status, value = 0, None
    try:
        body, last = _cell(code)
        exec(body, _live.__dict__)
        if last is not None:
            value = eval(last, _live.__dict__)
    except SystemExit as e:
        status = _status(e)
    except BaseException as e:
        e.__traceback__ = e.__traceback__.tb_next
        sys.excepthook(type(e), e, e.__traceback__)
        status = 1
    _give(value)
    return status


class WitWorld(wit_world.WitWorld):
    def turn(self, code, stdin, env):
        # Everything is caught: an exception escaping an export aborts the instance.
        try:
            status = _turn(code, stdin, env)
        except SystemExit as e:
            status = _status(e)
        except BaseException:
            try:
                traceback.print_exc()
            except BaseException:
                pass
            status = 125
        _flush()
        return status

    def run(self, code, args, env):
        # Everything is caught: an exception escaping an export aborts the instance.
        status = 0
        try:
            _fresh(env)
            if os.path.isdir("/app"):
                os.chdir("/app")
            if code is None:
                code, args = _framed()
            sys.argv = ["-c", *args]
            g = {"__name__": "__main__", "__builtins__": __builtins__, "__doc__": None}
            sys.modules["__main__"] = type(sys)("__main__")
            sys.modules["__main__"].__dict__.update(g)
            g = sys.modules["__main__"].__dict__
            value = None
            try:
                body, last = _cell(code)
                exec(body, g)
                if last is not None:
                    value = eval(last, g)
            except SystemExit as e:
                status = _status(e)
            except BaseException as e:
                e.__traceback__ = e.__traceback__.tb_next
                sys.excepthook(type(e), e, e.__traceback__)
                status = 1
            _give(value)
            value = None
            _finish()
            g.clear()
        except SystemExit as e:
            status = _status(e)
        except BaseException:
            try:
                traceback.print_exc()
            except BaseException:
                pass
            status = 125
        return status


# Every object made so far is the snapshot's: kept out of the cyclic collector's passes, so a
# run's collection neither walks nor writes to (and copies) the snapshot's pages.
import gc  # noqa: E402

gc.freeze()
