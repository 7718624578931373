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

/// `python -c` bootstrap (Python ≥ 3.8, CPython for WASI as well).
pub const PYTHON_BOOTSTRAP: &str = r#"def _stockade():
    import os, sys
    g = globals()
    del g["_stockade"]
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
    n, argc = map(int, exact(16, True).split())
    src = exact(n).decode("utf-8")
    sys.argv[1:] = [exact(int(exact(11))).decode("utf-8", "surrogateescape") for _ in range(argc)]
    code = 0
    try:
        exec(compile(src, "<string>", "exec"), g)
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code & 0xFF
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException as e:
        e.__traceback__ = e.__traceback__.tb_next
        sys.excepthook(type(e), e, e.__traceback__)
        code = 1
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
    os._exit(code)
_stockade()
"#;

/// `qjs --std -e` bootstrap (QuickJS with its `std` module).
pub const JS_BOOTSTRAP: &str = r#"(() => {
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
  try {
    std.evalScript(src, { backtrace_barrier: true });
  } catch (e) {
    // The stack as `qjs -e` shows it, without the bootstrap's frame names.
    if (e instanceof Error && typeof e.stack === "string") {
      e.stack = e.stack.replaceAll("(<evalScript>:", "(<cmdline>:").replaceAll("at <eval> (", "at <anonymous> (");
    }
    throw e;
  }
})();
"#;

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
    fn frame_counts_bytes_not_chars() {
        let f = frame("print('é')", &["a b".into(), String::new()]);
        assert_eq!(f, "0000000011 0002\nprint('é')0000000003\na b0000000000\n".as_bytes());
    }
}
