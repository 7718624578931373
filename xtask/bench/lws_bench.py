# Times llm-wasm-sandbox print(1) for `cargo xtask bench`: ARGV[1] rounds, a fresh sandbox each
# (as its README uses it), only the execute() call timed; prints the seconds as a JSON list.
import sys, time, json
from sandbox import create_sandbox, RuntimeType
n = int(sys.argv[1])
out = []
for _ in range(n):
    sb = create_sandbox(runtime=RuntimeType.PYTHON)
    t = time.perf_counter()
    r = sb.execute("print(1)")
    out.append(time.perf_counter() - t)
    assert r.stdout.strip() == "1", r
print(json.dumps(out))
