"""The Python SDK's cost, for `cargo xtask bench`: Python `print(1)` through a running server,
interleaved round by round (which goes first alternating), spaced so the warm pools refill — a
bare httpx POST on the unix socket (the baseline: the same request, no SDK) against
`Client.run_python` — medians and the difference.

Then a run that calls one tool (`print(h.call("echo", 1))`, answered by the SDK) against a plain
`print(1)`, both through `Client.run`, interleaved and spaced the same way: a run with tools takes
a warm jail as a plain one does.

And a host call's round trip (the run asks, the server sends the call to the SDK, the SDK calls a
plain function and posts its answer, the run gets it), timed in the run, against a bare httpx GET
of /v1/health/live in the same run.

Usage: sdk_bench.py SOCKET ROUNDS SPACED_MS
"""

import statistics
import sys
import time

import httpx

import stockade


def main() -> None:
    socket, rounds, spaced = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) / 1000
    body = {"runtime": "python", "code": "print(1)"}
    raw_times, sdk_times = [], []
    with httpx.Client(transport=httpx.HTTPTransport(uds=socket), base_url="http://localhost") as raw, stockade.Client(
        socket=socket
    ) as sdk:
        def bare() -> float:
            time.sleep(spaced)
            t = time.perf_counter()
            r = raw.post("/v1/runs", json=body)
            report = r.json()
            took = time.perf_counter() - t
            assert r.status_code == 200 and report["status"] == "ok", report
            return took

        def through_sdk() -> float:
            time.sleep(spaced)
            t = time.perf_counter()
            result = sdk.run_python("print(1)")
            took = time.perf_counter() - t
            assert result.ok and result.stdout == "1\n", result
            return took

        # Which goes first alternates round by round: the second run after a pause fares
        # differently from the first, whoever sends it.
        for i in range(rounds + 4):
            if i % 2 == 0:
                took_raw, took_sdk = bare(), through_sdk()
            else:
                took_sdk = through_sdk()
                took_raw = bare()
            if i >= 4:  # the first rounds warm the connections up
                raw_times.append(took_raw * 1000)
                sdk_times.append(took_sdk * 1000)
    raw_ms, sdk_ms = statistics.median(raw_times), statistics.median(sdk_times)
    print("python print(1), {} rounds, {:.0f} ms apart, medians:".format(rounds, spaced * 1000))
    print("  httpx POST on the unix socket (no SDK)   {:7.2f} ms".format(raw_ms))
    print("  stockade.Client.run_python               {:7.2f} ms".format(sdk_ms))
    print("  the SDK's cost                           {:+7.2f} ms ({:.2f}x the bare request)".format(sdk_ms - raw_ms, sdk_ms / raw_ms))
    one_call(socket, rounds, spaced)
    host_calls(socket)


def one_call(socket: str, rounds: int, spaced: float) -> None:
    tools = {"echo": stockade.Tool(lambda x: x)}
    plain, called = [], []
    with stockade.Client(socket=socket) as sdk:
        def run(code: str, with_tools: bool) -> float:
            time.sleep(spaced)
            t = time.perf_counter()
            r = sdk.run("python", code, tools=tools) if with_tools else sdk.run("python", code)
            took = time.perf_counter() - t
            assert r.ok and r.stdout == "1\n", r
            return took * 1000

        for i in range(rounds + 4):
            pair = [("print(1)", False), ("import stockade_host as h\nprint(h.call('echo', 1))", True)]
            if i % 2:
                pair.reverse()
            took = {w: run(c, w) for c, w in pair}
            if i >= 4:
                plain.append(took[False])
                called.append(took[True])
    p, c = statistics.median(plain), statistics.median(called)
    print("python through Client.run, {} rounds, {:.0f} ms apart, medians:".format(rounds, spaced * 1000))
    print("  print(1)                                 {:7.2f} ms".format(p))
    print("  one host call answered by the SDK        {:7.2f} ms ({:.2f}x the plain run)".format(c, c / p))


CALLS = """
import stockade_host as h, time
took = []
for i in range(200):
    t = time.perf_counter()
    assert h.call("echo", i) == i
    took.append(time.perf_counter() - t)
print(" ".join("%.6f" % t for t in took))
"""


def host_calls(socket: str) -> None:
    with stockade.Client(socket=socket) as sdk, httpx.Client(
        transport=httpx.HTTPTransport(uds=socket), base_url="http://localhost"
    ) as raw:
        names = {r["name"] for r in sdk.info()["runtimes"]}
        bare = []
        for _ in range(200):
            t = time.perf_counter()
            raw.get("/v1/health/live")
            bare.append((time.perf_counter() - t) * 1000)
        bare50 = statistics.median(bare[20:])
        print("host calls: 180 calls in one run answered by the SDK (after 20 to warm up), medians,")
        print("against a bare httpx GET of /v1/health/live in the same run ({:.2f} ms):".format(bare50))
        for runtime in ("python", "python3"):
            if runtime not in names:
                print("  {:<8} skipped (the server has no such runtime)".format(runtime))
                continue
            r = sdk.run(runtime, CALLS, tools={"echo": stockade.Tool(lambda x: x, max_calls=200)})
            assert r.ok, r
            took = sorted(float(t) * 1000 for t in r.stdout.split()[20:])
            p50 = statistics.median(took)
            print(
                "  {:<8} a host call's round trip, timed in the run: {:6.2f} ms (p90 {:.2f}), {:.2f}x the bare GET".format(
                    runtime, p50, took[int(len(took) * 0.9)], p50 / bare50
                )
            )


if __name__ == "__main__":
    main()
