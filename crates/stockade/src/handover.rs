//! Code handed over on stdin to an interpreter started ahead of its run.
//!
//! An interpreter's own start-up (CPython loading its standard library, say) is most of what a
//! short run costs. A jail released ahead of its run ([`Prepared::run_gated`]) starts the
//! interpreter with a small bootstrap that blocks reading stdin; the run's code comes there,
//! framed, followed by the run's own stdin:
//!
//! ```text
//! <code length in bytes, 10 digits> <argument count, 4 digits>\n     (16 bytes)
//! <code>
//! <argument length, 10 digits>\n<argument>                          (once per argument)
//! <the run's stdin, to its end>
//! ```
//!
//! The lengths are fixed-width so the bootstrap reads each part with one read.
//!
//! The bootstrap reads exactly the frame (so the run's stdin is left whole for the code), sets
//! the arguments (`sys.argv[1:]`, `scriptArgs`), and runs the code as `python -c`/`qjs -e` would:
//! in the main module's namespace, with the same exit codes and the same tracebacks (its own
//! frame left out), in `/app` when there is one. Python then ends the way its own exit would as far as a program can tell
//! (threads joined, exit handlers run, the main module's objects released, streams flushed)
//! without the rest of the interpreter's finalization, which costs more than a short run. The same frame serves a run started cold, so a run behaves the same whether
//! a warm jail was ready or not. One jail serves one run: nothing carries over.
//!
//! [`Prepared::run_gated`]: crate::Prepared::run_gated
//!
//! Imports (layers): none.

/// Python's exit-status rule, one for the bootstrap and the live loop (the Python guest's
/// runner, `guests/python/stockade_guest.py`, keeps the same): what ended the code, as its
/// status. `SystemExit` as the code's own (`None` 0, an int its low byte, else printed and 1),
/// any other exception's traceback printed (without the bootstrap's frame) and 1. A function of
/// the module's, deleted from its globals before any code runs.
macro_rules! python_status {
    () => {
        r#"def _status(e):
    import sys
    if isinstance(e, SystemExit):
        if e.code is None:
            return 0
        if isinstance(e.code, int):
            return e.code & 0xFF
        print(e.code, file=sys.stderr)
        return 1
    e.__traceback__ = e.__traceback__.tb_next
    sys.excepthook(type(e), e, e.__traceback__)
    return 1
"#
    };
}

/// What a Python run's code gives back (see [`crate::Report::give`]), one rule for the bootstrap,
/// the live loop and the Python guest (`guests/python/stockade_guest.py` keeps the same): the
/// code run as a notebook cell runs (a last statement that is an expression is evaluated, its
/// value kept), then `_give(value)` writes `{"value": V}` when `V` is JSON (a numpy scalar as its
/// Python number) and reads back equal, else `{"repr": "..."}`, both within 16 KiB; `None` is no
/// value. With matplotlib's pyplot loaded, the figures left open go with it as PNG
/// (`"outputs"`, at most 8 and 2 MiB, what is left out said), and are closed. Written on fd 3 as
/// one line; nothing when there is nothing. Functions of the module's, deleted from its globals
/// before any code runs.
macro_rules! python_give {
    () => {
        r#"def _cell(src):
    from _ast import Expr, Expression
    tree = compile(src, "<string>", "exec", 0x400)
    last = tree.body[-1] if tree.body else None
    if type(last) is Expr:
        del tree.body[-1]
        return compile(tree, "<string>", "exec"), compile(Expression(last.value), "<string>", "eval")
    return compile(tree, "<string>", "exec"), None
def _give(v, fd, end=b""):
    import os, sys
    cap, said = 16384, {}
    try:
        if v is not None:
            import json
            if type(v).__module__ == "numpy" and getattr(v, "ndim", None) == 0:
                v = v.item()
            try:
                text = json.dumps(v, allow_nan=False)
                if len(text) <= cap and json.loads(text) == v:
                    said["value"] = v
            except Exception:
                pass
            if not said:
                try:
                    r = repr(v)
                except Exception as e:
                    r = "<repr failed: %s>" % type(e).__name__
                said["repr"] = r[:cap]
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None:
            import base64, io
            out, total, left = [], 0, 0
            for n in plt.get_fignums():
                b = io.BytesIO()
                plt.figure(n).savefig(b, format="png")
                b = b.getvalue()
                if len(out) == 8 or total + len(b) > 2 << 20:
                    left += 1
                    continue
                total += len(b)
                out.append({"type": "image/png", "base64": base64.b64encode(b).decode()})
            plt.close("all")
            if out:
                said["outputs"] = out
            if left:
                said["left-out"] = "%d figure(s) left out: at most 8 figures and 2 MiB in all are given back" % left
    except BaseException as e:
        said = {"left-out": "the code's value was left out: %s" % type(e).__name__}
    b = end
    if said:
        import json
        b = json.dumps(said).encode() + b"\n" + end
    try:
        while b:
            b = b[os.write(fd, b):]
    except OSError:
        pass
"#
    };
}

/// `python -c` bootstrap (Python ≥ 3.8, CPython for WASI as well).
pub const PYTHON_BOOTSTRAP: &str = concat!(
    python_status!(),
    python_give!(),
    r#"def _stockade():
    import os, sys
    g = globals()
    del g["_stockade"]
    _status, _cell, _give = g.pop("_status"), g.pop("_cell"), g.pop("_give")
    host = g.pop("_host")
    # A figure is drawn, never shown: matplotlib's non-interactive backend.
    os.environ.setdefault("MPLBACKEND", "Agg")
    # The compiler's first use is slow under Wasm (4 ms): pay it before the run.
    compile("pass", "<string>", "exec")
    # A Wasm guest starts in "/": its work directory is /app, as a native runtime's is.
    if sys.platform == "wasi" and os.path.isdir("/app"):
        os.chdir("/app")
    def exact(n, first=False):
        b = bytearray()
        while len(b) < n:
            c = os.read(0, n - len(b))
            if not c:
                raise SystemExit(0 if first and not b else 125)
            b += c
        return bytes(b)
    calls = os.environ.get("STOCKADE_HOST_CALLS")
    ends = [1, 2, 3] + ([int(f) for f in calls.split(",")] if calls else [])
    if calls:
        host(sys, os, calls)
    try:
        import resource
    except ImportError:
        resource = None
    # The runtime's own arguments: its venv (its site-packages on the path) and the modules to
    # import before the code arrives; a module that fails to import ends the interpreter.
    if len(sys.argv) > 1:
        venv, preload = sys.argv[1], sys.argv[2:]
        if venv:
            import site
            site.addsitedir(os.path.join(venv, "lib", "python%d.%d" % sys.version_info[:2], "site-packages"))
        for m in preload:
            __import__(m)
        del sys.argv[1:]
    n, argc = map(int, exact(16, True).split())
    src = exact(n).decode("utf-8")
    sys.argv[1:] = [exact(int(exact(11))).decode("utf-8", "surrogateescape") for _ in range(argc)]
    code, value = 0, None
    try:
        body, last = _cell(src)
        exec(body, g)
        if last is not None:
            value = eval(last, g)
    except BaseException as e:
        code = _status(e)
    _give(value, 3)
    value = None
    # The interpreter's own finalization takes longer than a short run (5 ms natively, more
    # under Wasm): do what of it a program can see -- wait for its threads, run its exit
    # handlers, release the main module's objects (so its files are closed), flush the standard
    # streams -- and leave.
    t = sys.modules.get("threading")
    if t is not None and hasattr(t, "_shutdown"):
        t._shutdown()
    a = sys.modules.get("atexit")
    if a is not None:
        a._run_exitfuncs()
    g.clear()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass
    # Its end said on fd 3 (`exit STATUS PEAK-RSS-BYTES`) and its fds closed: the supervisor can
    # take the run as over there, before the kernel has taken down its memory.
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 if resource else 0
    try:
        os.write(3, b"exit %d %d\n" % (code, rss))
    except OSError:
        pass
    for fd in ends:
        try:
            os.close(fd)
        except OSError:
            pass
    os._exit(code)
def _host(sys, os, calls):
    # `import stockade_host`: host calls through the channel the jail was built with.
    import json, struct, types
    req, ans = map(int, calls.split(","))
    m = types.ModuleType("stockade_host")
    class ToolError(Exception):
        """A host call that failed: the tool's error, a refusal (no such tool, past a budget)
        or its timeout, in words."""
    def read(n):
        b = bytearray()
        while len(b) < n:
            c = os.read(ans, n - len(b))
            if not c:
                raise ToolError("host calls are closed for this run")
            b += c
        return bytes(b)
    def call(name, args=None):
        """Calls the host's tool `name` with `args` (anything JSON can say) and returns its
        answer, parsed; raises ToolError with the reason when it fails."""
        body = json.dumps({"name": name, "args": args}).encode()
        frame = struct.pack(">I", len(body)) + body
        try:
            while frame:
                frame = frame[os.write(req, frame):]
        except OSError:
            raise ToolError("this run has no host calls") from None
        answer = json.loads(read(struct.unpack(">I", read(4))[0]))
        if "error" in answer:
            raise ToolError(answer["error"])
        return answer["ok"]
    ToolError.__module__, ToolError.__qualname__ = "stockade_host", "ToolError"
    m.call, m.ToolError = call, ToolError
    sys.modules["stockade_host"] = m
    del os.environ["STOCKADE_HOST_CALLS"]
_stockade()
"#
);

/// The JavaScript guest's `host` (its host calls, see `wasm/p1calls.rs`), one line, so that code
/// it comes before keeps its line numbers: `host.call(name, args)` sends `{"name", "args"}`
/// (JSON) as a length-framed request on the guest's request fd and returns the answer's `ok`,
/// parsed; an `error` answer, a closed channel or a run without host calls throws
/// `host.ToolError` with the reason.
macro_rules! js_host_value {
    () => {
        r#"(() => { const REQ = 0x7FFFFF00, ANS = 0x7FFFFF01; class ToolError extends Error { constructor(m) { super(m); this.name = "ToolError"; } } const utf8 = (s) => { const b = unescape(encodeURIComponent(s)), u = new Uint8Array(b.length); for (let i = 0; i < b.length; i++) u[i] = b.charCodeAt(i); return u; }; const text = (u) => { let s = ""; for (let i = 0; i < u.length; i += 8192) s += String.fromCharCode.apply(null, u.subarray(i, i + 8192)); return decodeURIComponent(escape(s)); }; const exact = (n) => { const b = new Uint8Array(n); for (let got = 0; got < n;) { const k = os.read(ANS, b.buffer, got, n - got); if (!(k > 0)) throw new ToolError("host calls are closed for this run"); got += k; } return b; }; function call(name, args) { const body = utf8(JSON.stringify({ name: String(name), args: args === undefined ? null : args })); const f = new Uint8Array(4 + body.length); new DataView(f.buffer).setUint32(0, body.length); f.set(body, 4); for (let off = 0; off < f.length;) { const k = os.write(REQ, f.buffer, off, f.length - off); if (!(k > 0)) throw new ToolError("this run has no host calls"); off += k; } const a = JSON.parse(text(exact(new DataView(exact(4).buffer).getUint32(0)))); if ("error" in a) throw new ToolError(String(a.error)); return a.ok; } return Object.freeze({ call, ToolError }); })()"#
    };
}

/// `host` defined when first used, one line: most runs make no host call, and parsing `host`
/// costs a JavaScript run about 0.4 ms of CPU (measured: `stockade run --js`'s run time with it
/// put before the code, against without). The code sees a `host` property of the global object
/// as before: assigning it replaces it; a global object frozen before the first use still gives
/// it. Its code is evaluated at the first use, in the global scope; it comes in the guest's
/// environment ([`JS_HOST_VAR`], taken out before the code runs), not as a literal of the
/// bootstrap, whose scanning cost a run about 35 µs.
macro_rules! js_host_lazy {
    () => {
        r#"(() => { const ev = eval, src = std.getenv("STOCKADE_JS_HOST"); std.unsetenv("STOCKADE_JS_HOST"); let made; const put = (value) => { try { Object.defineProperty(globalThis, "host", { value, writable: true, enumerable: true, configurable: true }); } catch {} }; Object.defineProperty(globalThis, "host", { enumerable: true, configurable: true, get() { if (made === undefined) { made = ev(src); put(made); } return made; }, set: put }); })(); "#
    };
}

/// What a JavaScript run's code gives back (see [`crate::Report::give`]), one line, so that the
/// loops it comes before keep their shape: `give(v)` writes the script's completion value as
/// `{"value": V}` when it is plain data (strings, finite numbers, booleans, `null`, arrays
/// without holes and plain objects of them; at most 100,000 of them, 64 deep) within 16 KiB as
/// JSON, else `{"repr": String(v)}` cut at 16 KiB; `undefined` and `null` are no value. Written
/// on the guest's fd for it (`wasm/p1calls.rs`'s `GUEST_GIVEN`), which the runner keeps.
macro_rules! js_give_value {
    () => {
        r#"(v) => { const CAP = 16384; let seen = 0; const plain = (x, d) => { if (++seen > 100000 || d > 64) return false; if (x === null || typeof x === "string" || typeof x === "boolean") return true; if (typeof x === "number") return Number.isFinite(x); if (typeof x !== "object") return false; if (Array.isArray(x)) { for (let i = 0; i < x.length; i++) if (!(i in x) || !plain(x[i], d + 1)) return false; return Object.getPrototypeOf(x) === Array.prototype; } const p = Object.getPrototypeOf(x); if ((p !== Object.prototype && p !== null) || Object.getOwnPropertySymbols(x).length) return false; for (const k of Object.keys(x)) if (!plain(x[k], d + 1)) return false; return true; }; const bytes = (t) => { const b = unescape(encodeURIComponent(t)), u = new Uint8Array(b.length); for (let i = 0; i < b.length; i++) u[i] = b.charCodeAt(i); return u; }; let said; try { if (plain(v, 0)) { const t = bytes('{"value":' + JSON.stringify(v) + "}\n"); if (t.length <= CAP + 11) said = t; } } catch (e) {} if (said === undefined) { let r; try { r = String(v); } catch (e) { r = "<String() failed: " + (e && e.name) + ">"; } if (r.length > CAP) r = r.slice(0, CAP); try { said = bytes(JSON.stringify({ repr: r }) + "\n"); } catch (e) { return; } } for (let off = 0; off < said.length;) { const k = os.write(0x7FFFFF03, said.buffer, off, said.length - off); if (!(k > 0)) return; off += k; } }"#
    };
}

/// `give` made when first given a value, one line: its source comes in the guest's environment
/// ([`JS_GIVE_VAR`], taken out before the code runs), so that a run whose code has no value
/// (most: `console.log(...)`) parses none of it (about 85 µs of a run's CPU, measured in the
/// guest: `std.evalScript` of it against an empty function).
macro_rules! js_give {
    () => {
        r#"const give = ((ev, src) => { let f; return (v) => { if (v === undefined || v === null) return; if (f === undefined) f = ev(src); f(v); }; })(eval, std.getenv("STOCKADE_JS_GIVE")); std.unsetenv("STOCKADE_JS_GIVE");"#
    };
}

/// The variables a JavaScript guest's environment carries its bootstrap's sources in (see
/// [`js_environment`]): each read and taken out by the bootstrap before the code runs.
pub const JS_HOST_VAR: &str = "STOCKADE_JS_HOST";
pub const JS_GIVE_VAR: &str = "STOCKADE_JS_GIVE";

/// A JavaScript guest's environment: `env` (the policy's) and the sources [`JS_HOST`] and `give`
/// evaluate when first used, so that code that uses neither parses neither.
pub fn js_environment(env: &[(String, String)]) -> Vec<(String, String)> {
    let mut out = env.to_vec();
    out.push((JS_HOST_VAR.into(), js_host_value!().into()));
    out.push((JS_GIVE_VAR.into(), js_give_value!().into()));
    out
}

/// [`JS_BOOTSTRAP`]'s `host`, for code run as `qjs --std -e` with host calls (put before it), the
/// same: a served run's and the CLI's `host` behave alike.
pub const JS_HOST: &str = js_host_lazy!();

/// `qjs --std -e` bootstrap (QuickJS with its `std` module), with `host`.
pub const JS_BOOTSTRAP: &str = concat!(
    js_host_lazy!(),
    r#"
(() => {
  "#,
    js_give!(),
    r#"
  // The work directory is /app (a Wasm guest starts in "/").
  os.chdir("/app");
  const head = std.in.getline();
  if (head === null) std.exit(0);
  const [n, argc] = head.split(" ").map(Number);
  const src = n > 0 ? std.in.readAsString(n) : "";
  const args = [];
  for (let i = 0; i < argc; i++) {
    const k = Number(std.in.getline());
    args.push(k > 0 ? std.in.readAsString(k) : "");
  }
  scriptArgs.push(...args);
  let value;
  try {
    value = std.evalScript(src, { backtrace_barrier: true });
  } catch (e) {
    // The stack as `qjs -e` shows it, without the bootstrap's frame names.
    if (e instanceof Error && typeof e.stack === "string") {
      e.stack = e.stack.replaceAll("(<evalScript>:", "(<cmdline>:").replaceAll("at <eval> (", "at <anonymous> (");
    }
    throw e;
  }
  give(value);
})();
"#
);

/// A live session's interpreter under the host's python3 (see [`crate::TurnEnd::Read`]): the
/// code of its bootstrap's frame, a loop that runs each turn's code in the same main module, so
/// that what one turn defines the next one sees. A turn comes framed on stdin ([`turn_frame`]):
/// its code and its stdin (`sys.stdin` for the turn). When the code is done (an exception's
/// traceback printed, `SystemExit` caught as its status), the loop flushes the standard streams,
/// writes the turn's status on fd 3 (`STATUS\n`) and reads the next frame: that read, seen by
/// the supervisor with the turn's bytes all read, is the turn's end, and the jail is frozen
/// until the next. The code can write fd 3 and read fd 0 too: it can end its own turn early or
/// say another status, nothing more (its output and its time are its turn's, as its clock says).
/// The interpreter's end (end of file) ends the loop.
pub const PYTHON_LIVE: &str = concat!(
    python_status!(),
    python_give!(),
    r#"def _stockade_live():
    import io, os, sys
    g = globals()
    del g["_stockade_live"]
    _status, _cell, _give = g.pop("_status"), g.pop("_cell"), g.pop("_give")
    os.environ.setdefault("MPLBACKEND", "Agg")
    def exact(n, first=False):
        b = bytearray()
        while len(b) < n:
            c = os.read(0, n - len(b))
            if not c:
                raise SystemExit(0 if first and not b else 125)
            b += c
        return bytes(b)
    while True:
        n, k, _ = exact(43, True).split()
        src = exact(int(n)).decode("utf-8")
        sys.stdin = io.TextIOWrapper(io.BytesIO(exact(int(k))), encoding="utf-8")
        status, value = 0, None
        try:
            body, last = _cell(src)
            exec(body, g)
            if last is not None:
                value = eval(last, g)
        except BaseException as e:
            status = _status(e)
        for f in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                f.flush()
            except BaseException:
                pass
        _give(value, 3, b"%d\n" % status)
        value = None
_stockade_live()
"#
);

/// The live loop of QuickJS under the Wasm runner, run as `qjs --std -e` (after [`JS_HOST`]):
/// each turn's code evaluated as a global script (its `var`s, functions and top-level `let`s
/// stay); a turn's stdin is not given to it. Its stdin is the runner's: a turn's frame
/// ([`turn_frame`]), whole; its status goes to the runner on fd [`JS_STATUS_FD`] before it reads
/// the next one, and the runner, seeing it back in its read with the turn's bytes all read,
/// says the turn returned (see `wasm/turns.rs`).
pub const JS_LIVE: &str = concat!(
    r#"(() => {
  "#,
    js_give!(),
    r#"
  const STATUS = 0x7FFFFF02;
  const say = (s) => { const t = String(s) + "\n", b = new Uint8Array(t.length); for (let i = 0; i < t.length; i++) b[i] = t.charCodeAt(i); os.write(STATUS, b.buffer, 0, b.length); };
  for (;;) {
    const head = std.in.getline();
    if (head === null) std.exit(0);
    const [n, k] = head.split(" ");
    const src = Number(n) > 0 ? std.in.readAsString(Number(n)) : "";
    if (Number(k) > 0) std.in.readAsString(Number(k));
    let status = 0, value;
    try {
      value = std.evalScript(src, { backtrace_barrier: true });
    } catch (e) {
      let text = String(e);
      if (e instanceof Error && typeof e.stack === "string") {
        text += "\n" + e.stack.replaceAll("(<evalScript>:", "(<cmdline>:").replaceAll("at <eval> (", "at <anonymous> (");
      }
      std.err.puts(text.endsWith("\n") ? text : text + "\n");
      status = 1;
    }
    std.out.flush();
    std.err.flush();
    give(value);
    value = undefined;
    say(status);
  }
})();
"#
);

/// The JavaScript guest's fd for its turn's status (see [`JS_LIVE`]), a WASI fd number its
/// table never hands out.
pub const JS_STATUS_FD: u32 = 0x7FFF_FF02;

/// The length of a turn's head ([`turn_frame`]).
pub const TURN_HEAD_LEN: usize = 43;

/// One turn of a live interpreter: `<code length, 10 digits> <stdin length, 10 digits> <fuel,
/// 20 digits (0: the session's)>\n<code><stdin>`.
pub fn turn_frame(code: &str, stdin: &[u8], fuel: Option<u64>) -> Vec<u8> {
    let mut out = format!("{:010} {:010} {:020}\n", code.len(), stdin.len(), fuel.unwrap_or(0)).into_bytes();
    out.extend_from_slice(code.as_bytes());
    out.extend_from_slice(stdin);
    out
}

/// The frame that asks a live Python guest's runner for its image (in place of a turn's; it is
/// never one: its lengths are not numbers). The runner writes the image, says so on its summary
/// channel as a turn's account, and waits for the next frame.
pub const HIBERNATE_FRAME: &[u8; TURN_HEAD_LEN] = b"hibernate! 0000000000 00000000000000000000\n";

/// A turn's head read back: its code's and stdin's lengths, its fuel (`None`: the session's).
pub fn parse_turn_head(head: &[u8]) -> Option<(usize, usize, Option<u64>)> {
    let text = std::str::from_utf8(head).ok()?.strip_suffix('\n')?;
    let mut it = text.split(' ');
    let (n, k, fuel) = (it.next()?.parse().ok()?, it.next()?.parse().ok()?, it.next()?.parse::<u64>().ok()?);
    (it.next().is_none() && head.len() == TURN_HEAD_LEN).then_some((n, k, (fuel > 0).then_some(fuel)))
}

/// The length of a batch run's head ([`batch_frame`]).
pub const BATCH_HEAD_LEN: usize = 85;

/// One run of a batch, as its jail's runner reads it (see `wasm/batch.rs`): its head, then the
/// run's own frame ([`frame`], its code and arguments) and its stdin, which the run's fresh
/// instance reads as a waiting interpreter's. Its own limits, each `None` for the jail's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchLimits {
    pub wall_ms: u64,
    pub fuel: Option<u64>,
    pub wasm_memory_max_bytes: Option<u64>,
}

/// A batch run's frame: `<frame length, 10 digits> <stdin length, 10 digits> <wall ms, 20> <fuel,
/// 20 (0: the jail's)> <linear memory bytes, 20 (0: the jail's)>\n<frame><stdin>`.
pub fn batch_frame(code: &str, args: &[String], stdin: &[u8], limits: BatchLimits) -> Vec<u8> {
    let run = frame(code, args);
    let mut out = format!(
        "{:010} {:010} {:020} {:020} {:020}\n",
        run.len(),
        stdin.len(),
        limits.wall_ms,
        limits.fuel.unwrap_or(0),
        limits.wasm_memory_max_bytes.unwrap_or(0)
    )
    .into_bytes();
    out.extend_from_slice(&run);
    out.extend_from_slice(stdin);
    out
}

/// A batch run's head read back: its frame's and stdin's lengths and its limits.
pub fn parse_batch_head(head: &[u8]) -> Option<(usize, usize, BatchLimits)> {
    let text = std::str::from_utf8(head).ok()?.strip_suffix('\n')?;
    let n: Vec<u64> = text.split(' ').map(str::parse).collect::<Result<_, _>>().ok()?;
    let [frame, stdin, wall_ms, fuel, memory] = n[..] else { return None };
    let some = |v: u64| (v > 0).then_some(v);
    let limits = BatchLimits { wall_ms, fuel: some(fuel), wasm_memory_max_bytes: some(memory) };
    (head.len() == BATCH_HEAD_LEN).then_some((usize::try_from(frame).ok()?, usize::try_from(stdin).ok()?, limits))
}

/// The frame of one run's code and arguments (see the module's documentation); the run's stdin
/// follows it.
///
/// At most 9,999 arguments (a server allows far fewer): the rest are not framed.
pub fn frame(code: &str, args: &[String]) -> Vec<u8> {
    let args = &args[..args.len().min(MAX_ARGS)];
    let mut out = format!("{:010} {:04}\n", code.len(), args.len()).into_bytes();
    out.extend_from_slice(code.as_bytes());
    for a in args {
        out.extend_from_slice(format!("{:010}\n", a.len()).as_bytes());
        out.extend_from_slice(a.as_bytes());
    }
    out
}

/// The most arguments a frame carries.
pub const MAX_ARGS: usize = 9_999;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_javascript_bootstraps_take_out_the_variables_their_environment_brings() {
        for (name, text) in [("JS_HOST", JS_HOST), ("JS_BOOTSTRAP", JS_BOOTSTRAP), ("JS_LIVE", JS_LIVE)] {
            let vars: &[&str] = if name == "JS_HOST" { &[JS_HOST_VAR] } else { &[JS_GIVE_VAR] };
            for var in vars {
                let (read, out) = (format!("std.getenv(\"{var}\")"), format!("std.unsetenv(\"{var}\")"));
                assert!(text.contains(&read) && text.contains(&out), "{name} reads and takes out {var}");
            }
            assert!(!text.contains('\n') || name != "JS_HOST", "JS_HOST is one line");
        }
        let env = js_environment(&[("PATH".into(), "/bin".into())]);
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["PATH", JS_HOST_VAR, JS_GIVE_VAR]);
    }

    #[test]
    fn a_turn_head_reads_back() {
        let f = turn_frame("print('é')", b"in", Some(7));
        assert_eq!(parse_turn_head(&f[..TURN_HEAD_LEN]), Some((11, 2, Some(7))));
        assert_eq!(parse_turn_head(&turn_frame("", b"", None)[..TURN_HEAD_LEN]), Some((0, 0, None)));
        assert_eq!(parse_turn_head(b"1 2 3\n"), None);
    }

    #[test]
    fn a_batch_head_reads_back() {
        let limits = BatchLimits { wall_ms: 250, fuel: None, wasm_memory_max_bytes: Some(1 << 20) };
        let f = batch_frame("print(1)", &["a".into()], b"in", limits);
        let (n, k, l) = parse_batch_head(&f[..BATCH_HEAD_LEN]).expect("a head");
        assert_eq!((n, k, l), (frame("print(1)", &["a".into()]).len(), 2, limits));
        assert_eq!(&f[BATCH_HEAD_LEN + n..], b"in");
        assert_eq!(parse_batch_head(&f[..BATCH_HEAD_LEN - 1]), None);
    }

    #[test]
    fn frame_counts_bytes_not_chars() {
        let f = frame("print('é')", &["a b".into(), String::new()]);
        assert_eq!(f, "0000000011 0002\nprint('é')0000000003\na b0000000000\n".as_bytes());
    }
}
