"""The replicas' row of `cargo xtask bench --hibernate-only`: live Python turns (`x += 1`) on a server alone
and on a replica (`sessions.replica-lease-ms`, which writes each answered live run's image before its answer),
60 interleaved turns 50 ms apart, a fresh interpreter or one holding 50 MiB (`big`).

usage: replica_turns.py STOCKADE [big]
"""
import http.client, json, os, shutil, socket, subprocess, sys, tempfile, time

class UH(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost"); self.path = path
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX); self.sock.connect(self.path)

def start(binary, lease):
    d = tempfile.mkdtemp(prefix="rt-")
    sock = os.path.join(d, "api.sock")
    cfg = os.path.join(d, "serve.toml")
    extra = f"[sessions]\nreplica-lease-ms = {lease}\n" if lease else ""
    open(cfg, "w").write(f'version = 1\n[server]\nlisten = ["unix:{sock}"]\n{extra}[runtimes.python]\nguest = "python"\nwarm = 1\n')
    p = subprocess.Popen([binary, "serve", cfg, "--state-dir", os.path.join(d, "state")], stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        if "listening on" in line: break
    time.sleep(1.5)
    return p, sock, d

def post(sock, path, body):
    c = UH(sock); c.request("POST", path, json.dumps(body), {"content-type": "application/json"})
    r = c.getresponse(); v = json.loads(r.read()); c.close(); return r.status, v

binary = sys.argv[1]
servers = [start(binary, 0), start(binary, 5000)]
ids = []
for p, s, _ in servers:
    st, v = post(s, "/v1/sessions", {"runtime": "python", "mode": "live"}); ids.append(v["id"])
    post(s, f"/v1/sessions/{v['id']}/runs", {"code": "x = 0\ndata = list(range(1_300_000))" if len(sys.argv) > 2 else "x = 0"})
times = [[], []]
for i in range(60):
    for k, ((p, s, _), sid) in enumerate(zip(servers, ids)):
        t = time.perf_counter(); st, v = post(s, f"/v1/sessions/{sid}/runs", {"code": "x += 1"}); times[k].append(time.perf_counter() - t)
        assert st == 200 and v["session"]["interpreter"] == "kept", v
        time.sleep(0.05)
med = [sorted(t)[len(t) // 2] * 1000 for t in times]
print(f"live turn p50: alone {med[0]:.2f} ms, replica {med[1]:.2f} ms ({med[1] / med[0]:.2f}x)" + (" [50 MiB held]" if len(sys.argv) > 2 else " [fresh]"))
for p, _, d in servers:
    p.terminate()
    p.wait()
    shutil.rmtree(d, ignore_errors=True)
