"""The Python SDK's cost, for `cargo xtask bench`: Python `print(1)` through a running server,
interleaved round by round, spaced so the warm pools refill — a bare httpx POST on the unix
socket (the baseline: the same request, no SDK) against `Client.run_python` — medians and the
difference.

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
        for i in range(rounds + 3):
            time.sleep(spaced)
            t = time.perf_counter()
            r = raw.post("/v1/runs", json=body)
            report = r.json()
            took_raw = time.perf_counter() - t
            assert r.status_code == 200 and report["status"] == "ok", report
            time.sleep(spaced)
            t = time.perf_counter()
            result = sdk.run_python("print(1)")
            took_sdk = time.perf_counter() - t
            assert result.ok and result.stdout == "1\n", result
            if i >= 3:  # the first rounds warm the connections up
                raw_times.append(took_raw * 1000)
                sdk_times.append(took_sdk * 1000)
    raw_ms, sdk_ms = statistics.median(raw_times), statistics.median(sdk_times)
    print("python print(1), {} rounds, {:.0f} ms apart, medians:".format(rounds, spaced * 1000))
    print("  httpx POST on the unix socket (no SDK)   {:7.2f} ms".format(raw_ms))
    print("  stockade.Client.run_python               {:7.2f} ms".format(sdk_ms))
    print("  the SDK's cost                           {:+7.2f} ms ({:.2f}x the bare request)".format(sdk_ms - raw_ms, sdk_ms / raw_ms))


if __name__ == "__main__":
    main()
