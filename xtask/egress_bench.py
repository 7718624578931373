"""The egress row of `cargo xtask bench` (`--egress-only`): what a connection through a jail's egress
proxy costs. One host server on loopback sends 1 MiB on each connection; the same python3 client,
jailed by the same policy (wrap-python), opens 20 connections a run and times each: its connect (for
the proxy: TCP to 127.0.0.1:3128 and the CONNECT answered) and its 1 MiB. Through the proxy
(`network.egress-allow` lists the server) against without it (the same policy with the host's
network: `namespaces.net = false`, `network` and `unix-connect` allowed), runs interleaved.

usage: egress_bench.py STOCKADE ROOT [ROUNDS]
"""
import json, os, socket, statistics, subprocess, sys, tempfile, threading

binary, root = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 10
MIB = 1 << 20
PER_RUN = 20

def serve(listener):
    payload = b"x" * MIB
    while True:
        c, _ = listener.accept()
        def one(c=c):
            try:
                if c.recv(1):
                    c.sendall(payload)
            finally:
                c.close()
        threading.Thread(target=one, daemon=True).start()

listener = socket.create_server(("127.0.0.1", 0), backlog=64)
port = listener.getsockname()[1]
threading.Thread(target=serve, args=(listener,), daemon=True).start()

CLIENT = r'''
import json, socket, sys, time
mode, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
out = []
for _ in range(n):
    t0 = time.perf_counter()
    if mode == "proxy":
        s = socket.create_connection(("127.0.0.1", 3128))
        s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % port)
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(4096)
        got = len(head.split(b"\r\n\r\n", 1)[1])
    else:
        s = socket.create_connection(("127.0.0.1", port))
        got = 0
    t1 = time.perf_counter()
    s.sendall(b"G")
    while got < 1 << 20:
        d = s.recv(1 << 16)
        if not d:
            break
        got += len(d)
    t2 = time.perf_counter()
    s.close()
    assert got == 1 << 20, got
    out.append((t1 - t0, t2 - t1))
print(json.dumps(out))
'''

d = tempfile.mkdtemp(prefix="egress-bench-")
wrap = open(os.path.join(root, "policies/examples/wrap-python.toml")).read()
proxy_policy = os.path.join(d, "proxy.toml")
open(proxy_policy, "w").write(wrap + f'\n[network]\negress-allow = ["127.0.0.1:{port}"]\n')
direct_policy = os.path.join(d, "direct.toml")
direct = wrap.replace("net = true ", "net = false").replace("[seccomp]\n", "[seccomp]\nallow = [\"network\", \"unix-connect\"]\n", 1)
direct = "\n".join(l for l in direct.splitlines() if not (l.startswith("allow = []")))
open(direct_policy, "w").write(direct + "\n")
client = os.path.join(d, "client.py")
open(client, "w").write(CLIENT)
os.chmod(d, 0o755)
os.chmod(client, 0o644)

def run(mode, policy):
    p = subprocess.run([binary, "run", "-q", "--policy", policy, "--ro", client, "--", "/usr/bin/python3", client,
                        mode, str(port), str(PER_RUN)], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{mode}: exit {p.returncode}: {p.stderr[-2000:]}")
    return json.loads(p.stdout)

times = {"direct": [], "proxy": []}
for _ in range(rounds):
    times["direct"] += run("direct", direct_policy)
    times["proxy"] += run("proxy", proxy_policy)

def med(mode, i):
    return statistics.median(t[i] for t in times[mode]) * 1000

print(f"egress: {rounds} rounds x {PER_RUN} connections each way, interleaved (medians, ms)")
print("| | connect | 1 MiB | connect + 1 MiB |")
print("|---|---|---|---|")
rows = {}
for mode in ("direct", "proxy"):
    c, t = med(mode, 0), med(mode, 1)
    both = statistics.median(sum(x) for x in times[mode]) * 1000
    rows[mode] = (c, t, both)
    label = "without the proxy (the host's network)" if mode == "direct" else "through the egress proxy"
    print(f"| {label} | {c:.3f} | {t:.3f} | {both:.3f} |")
(c0, t0, b0), (c1, t1, b1) = rows["direct"], rows["proxy"]
print(f"| proxy / direct | {c1 / c0:.2f}x | {t1 / t0:.2f}x | {b1 / b0:.2f}x |")

# What the list costs a run that opens nothing: `stockade run -- /bin/true`, with and without one.
import time
runs = {"without": [], "with": []}
for _ in range(rounds * 2):
    for which, extra in (("without", []), ("with", ["--egress", f"127.0.0.1:{port}"])):
        t = time.perf_counter()
        subprocess.run([binary, "run", "-q", *extra, "--", "/bin/true"], check=True)
        runs[which].append(time.perf_counter() - t)
w0, w1 = (statistics.median(runs[k]) * 1000 for k in ("without", "with"))
print(f"stockade run -- /bin/true: {w0:.2f} ms, with an egress list {w1:.2f} ms ({w1 / w0:.2f}x, {rounds * 2} rounds interleaved)")
