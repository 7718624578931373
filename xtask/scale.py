"""Three `stockade serve` replicas behind HAProxy on loopback, driven through the Python SDK.

Run by `cargo xtask scale` (which builds the server, makes the SDK's venv and finds haproxy):
  1. spread: runs through the balancer land on every replica;
  2. a replica killed (SIGKILL) under load: only runs in flight on it fail (502 from the
     balancer; the SDK does not retry a request that was sent), its health check takes it out,
     and every run after that succeeds; restarted, it rejoins;
  3. sessions, on one state directory shared by the replicas (`sessions.replica-lease-ms`): the
     balancer routes a session's requests by a consistent hash of the id in the path, so each
     session's runs reach one replica (the holder of its lease), while the sessions are spread;
     when the replica holding a live session dies (SIGKILL), the session's next run through the
     balancer reaches another, which takes it over once its lease lapsed and resumes its
     interpreter as of its last answered run (its variables are there), and the workspace
     sessions it held go on with their files;
  4. a replica drained (SIGTERM) under load: it stops listening at once (the balancer's next
     check fails), its runs in flight finish, the balancer sends it nothing new, no run fails.
Then every server is stopped and nothing of theirs may be left (processes, cgroups, sockets).
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import stockade

REPLICAS = ("r1", "r2", "r3")
LEASE_MS = 2000


def log(msg):
    print(msg, flush=True)


class Replica:
    def __init__(self, name, binary, workdir, guests):
        self.name, self.binary, self.guests = name, binary, guests
        # One state directory for all: any replica serves any session.
        self.state = os.path.join(workdir, "state")
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.socket = os.path.join(self.dir, "api.sock")
        self.config = os.path.join(self.dir, "serve.toml")
        with open(self.config, "w") as f:
            f.write(
                "version = 1\n[server]\n"
                f'listen = ["unix:{self.socket}"]\n'
                "concurrency = 1\nqueue = 16\ndrain-timeout-ms = 20000\n"
                '[runtimes.python]\nguest = "python"\nwarm = 1\n'
                f"[sessions]\nreplica-lease-ms = {LEASE_MS}\n"
                '[runtimes.javascript]\nguest = "javascript"\nwarm = 1\n'
            )
        self.proc = None
        self.pids_seen = set()

    def start(self, settle=True):
        env = dict(os.environ, STOCKADE_GUEST_DIR=self.guests)
        self.proc = subprocess.Popen(
            [self.binary, "serve", self.config, "--state-dir", self.state],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        self.pids_seen.add(self.proc.pid)
        ready = threading.Event()

        def pump(stream):
            for line in stream:
                if "listening on" in line:
                    ready.set()
                sys.stderr.write(f"  {self.name}: {line}")

        threading.Thread(target=pump, args=(self.proc.stderr,), daemon=True).start()
        if not ready.wait(120):
            raise SystemExit(f"{self.name} did not start")
        self.listening_at = time.time()
        # Its warm jails fill in the background.
        if settle:
            time.sleep(2)

    def signal(self, sig):
        self.proc.send_signal(sig)


class Balancer:
    def __init__(self, haproxy, workdir, replicas):
        self.stats = os.path.join(workdir, "haproxy-stats.sock")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.config = os.path.join(workdir, "haproxy.cfg")
        servers = "\n".join(f"    server {r.name} {r.socket} check" for r in replicas)
        checks = """    option httpchk
    http-check send meth GET uri /v1/health/ready ver HTTP/1.1 hdr Host stockade
    http-check expect status 200
    default-server inter 200ms fall 2 rise 2"""
        with open(self.config, "w") as f:
            f.write(
                f"""global
    maxconn 512
    stats socket {self.stats} mode 600 level admin
defaults
    mode http
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    # A connection a replica refused never reached it: try another.
    retries 2
    option redispatch
    # A new connection to the replica per request: a draining replica closes its idle
    # keep-alive connections once its runs are done, and a request HAProxy sent on one at that
    # moment would be lost unanswered; a new connection to a replica that stopped listening is
    # refused, and goes to another.
    option http-server-close
frontend api
    bind 127.0.0.1:{self.port}
    # A session's requests (/v1/sessions/ID/...) by a consistent hash of /v1/sessions/ID: each
    # session stays warm on one replica, and when that one is out only its sessions move.
    use_backend sessions if {{ path_beg /v1/sessions/ }}
    default_backend stockade
backend stockade
    balance roundrobin
{checks}
{servers}
backend sessions
    balance uri path-only depth 4
    hash-type consistent
{checks}
{servers}
"""
            )
        self.proc = subprocess.Popen([haproxy, "-f", self.config, "-db"], stdin=subprocess.DEVNULL)
        end = time.time() + 20
        while time.time() < end:
            try:
                if all(self.state(r.name) == "UP" for r in replicas):
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise SystemExit("haproxy did not see every replica up")

    def stat(self):
        """Per server: (status, sessions in total), from the stats socket."""
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(self.stats)
            s.sendall(b"show stat\n")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        lines = data.decode().splitlines()
        head = lines[0].lstrip("# ").split(",")
        out = {}
        for line in lines[1:]:
            row = dict(zip(head, line.split(",")))
            if row.get("pxname") == "stockade" and row.get("svname") in REPLICAS:
                out[row["svname"]] = (row["status"].split(" ")[0], int(row["stot"] or 0))
        return out

    def state(self, name):
        return self.stat()[name][0]

    def wait_state(self, name, want, secs=10):
        t0 = time.time()
        while time.time() - t0 < secs:
            if self.state(name) == want:
                return time.time() - t0
            time.sleep(0.02)
        raise SystemExit(f"haproxy never saw {name} {want} (it says {self.state(name)})")


class Load:
    """Client threads running jobs through the balancer with the SDK until stopped."""

    def __init__(self, url, clients, code):
        self.url, self.code = url, code
        self.ok, self.failed = 0, []
        self.stop_flag = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.loop, daemon=True) for _ in range(clients)]
        for t in self.threads:
            t.start()

    def loop(self):
        client = stockade.Client(url=self.url, timeout=60)
        while not self.stop_flag.is_set():
            t = time.time()
            try:
                r = client.run_python(self.code)
                good = r.status == "ok" and r.stdout == "1\n"
                with self.lock:
                    if good:
                        self.ok += 1
                    else:
                        self.failed.append((t, time.time(), f"status {r.status}"))
            except stockade.StockadeError as e:
                with self.lock:
                    self.failed.append((t, time.time(), f"{type(e).__name__} {e.status} {e}"))
            except Exception as e:  # anything else is a failure too, not a silent end of the client
                with self.lock:
                    self.failed.append((t, time.time(), f"{type(e).__name__} {e}"))

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(90)


def check(cond, msg):
    if not cond:
        raise SystemExit(f"FAILED: {msg}")
    log(f"  ok: {msg}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stockade", required=True)
    ap.add_argument("--guests", required=True)
    ap.add_argument("--haproxy", required=True)
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()
    replicas = [Replica(n, a.stockade, a.dir, a.guests) for n in REPLICAS]
    for r in replicas:
        r.start()
    lb = Balancer(a.haproxy, a.dir, replicas)
    url = f"http://127.0.0.1:{lb.port}"
    log(f"three replicas on unix sockets behind haproxy at {url} (health checks: GET /v1/health/ready every 200 ms)")
    by_name = {r.name: r for r in replicas}
    try:
        scenario(lb, url, by_name)
    finally:
        lb.proc.terminate()
        lb.proc.wait(10)
        for r in replicas:
            if r.proc.poll() is None:
                r.signal(signal.SIGTERM)
        for r in replicas:
            if r.proc.poll() is None:
                r.proc.wait(60)
    left(replicas)


def scenario(lb, url, rep):
    client = stockade.Client(url=url, timeout=60)

    # 1. Spread.
    before = lb.stat()
    n = 60
    results = []

    def some(k):
        c = stockade.Client(url=url, timeout=60)
        for i in range(k):
            r = c.run_js("console.log(1)") if i % 2 else c.run_python("print(1)")
            results.append(r.status == "ok" and r.stdout == "1\n")

    threads = [threading.Thread(target=some, args=(n // 3,)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = lb.stat()
    spread = {k: after[k][1] - before[k][1] for k in REPLICAS}
    log(f"1. spread: {n} runs (Python and JS, 3 clients): per replica {spread}")
    check(all(results) and len(results) == n, f"all {n} runs succeeded")
    check(all(v >= n // 6 for v in spread.values()), "every replica served at least a sixth of them")

    # 2. A replica killed under load.
    load = Load(url, 4, "import time; time.sleep(0.1); print(1)")
    time.sleep(1.5)
    t_kill = time.time()
    rep["r2"].signal(signal.SIGKILL)
    # SIGKILL is not instant: until the kernel has torn the process down its listening
    # socket still takes connections into its backlog, and those are cut when it closes.
    # The process is gone (every fd closed) once it is reaped.
    rep["r2"].proc.wait(10)
    t_dead = time.time()
    lb.wait_state("r2", "DOWN")
    out_after = time.time() - t_kill
    time.sleep(1.0)
    with load.lock:
        ok_at_down, failed_at_down = load.ok, list(load.failed)
    time.sleep(2.0)
    load.stop()
    log(
        f"2. r2 killed (SIGKILL) under 4 clients: haproxy took it out after {out_after * 1000:.0f} ms; "
        f"{load.ok} runs ok, {len(load.failed)} failed; it was gone (reaped) {(t_dead - t_kill) * 1000:.1f} ms after the kill"
    )
    for t0, t1, why in load.failed:
        log(f"     failed: sent {t0 - t_kill:+.3f} s from the kill, answered {t1 - t_kill:+.3f} s: {why}")
    check(len(load.failed) <= 4, "at most the runs in flight on r2 failed (4 clients: at most 4)")
    check(
        all(t0 <= t_dead and ("502" in why or "lost after the request was sent" in why) for t0, _, why in load.failed),
        "each failure was sent before r2 was gone and cut by it (502, or the connection closed unanswered); "
        "the SDK did not retry it: it had been sent",
    )
    check(load.failed == failed_at_down and load.ok > ok_at_down, "no run failed once r2 was out, runs went on")
    rep["r2"].start(settle=False)
    lb.wait_state("r2", "UP", 20)
    log(f"   r2 restarted: back in the balancer {(time.time() - rep['r2'].listening_at) * 1000:.0f} ms after it listened")
    time.sleep(2)
    check(client.run_python("print(1)").stdout == "1\n", "a run through the balancer after the restart")

    # 3. Sessions: each on its replica.
    sessions(lb, url, rep)

    # 4. A replica drained under load.
    load = Load(url, 4, "import time; time.sleep(0.3); print(1)")
    time.sleep(1.5)
    rep["r3"].signal(signal.SIGTERM)
    out_after = lb.wait_state("r3", "DOWN")
    sessions_out = lb.stat()["r3"][1]
    time.sleep(2.0)
    load.stop()
    code = rep["r3"].proc.wait(30)
    sessions_end = lb.stat()["r3"][1]
    log(
        f"4. r3 drained (SIGTERM) under 4 clients: haproxy took it out after {out_after * 1000:.0f} ms; "
        f"{load.ok} runs ok, {len(load.failed)} failed; r3 exited {code}"
    )
    for t0, t1, why in load.failed:
        log(f"     failed: {why}")
    check(not load.failed, "no run failed: r3 finished what it had, the others took the rest")
    check(code == 0, "the drained replica exited 0 (it stops listening at SIGTERM: the next check fails)")
    check(sessions_end == sessions_out, "the balancer sent r3 nothing once it was out")


def holder(rep, state, sid):
    """The replica that holds session `sid`'s lease (its file names the holder's pid)."""
    d = os.path.join(state, "sessions", sid)
    leases = sorted((int(f.split(".")[1]), f) for f in os.listdir(d) if f.startswith("lease."))
    with open(os.path.join(d, leases[-1][1])) as f:
        pid = int(f.read().split(":")[1])
    return next((name for name, r in rep.items() if r.proc.pid == pid), None)


def sessions(lb, url, rep):
    """Sessions through the balancer: each one's runs on one replica; a killed replica's go on."""
    client = stockade.Client(url=url, timeout=60)
    state = rep["r1"].state
    opened = [client.session("python") for _ in range(8)]
    live = [client.session("python", mode="live") for _ in range(4)]
    bump = "import os\nn = int(open('n.txt').read()) if os.path.exists('n.txt') else 0\nopen('n.txt', 'w').write(str(n + 1))\nprint(n + 1)"
    wrong = []
    for turn in range(1, 4):
        for s in opened:
            r = s.run(bump)
            if r.stdout != f"{turn}\n":
                wrong.append(f"{s.id} turn {turn}: {r.stdout!r}")
        for s in live:
            r = s.run("x = globals().get('x', 0) + 1\nprint(x)")
            if r.stdout != f"{turn}\n":
                wrong.append(f"{s.id} live turn {turn}: {r.stdout!r}")
    check(not wrong, f"every turn saw the files (or the variables) of the turns before it {wrong}")
    where = {s.id: holder(rep, state, s.id) for s in live}
    held = {name: sum(1 for v in where.values() if v == name) for name in rep}
    log(f"3. sessions on one shared state directory: 8 workspace and 4 live sessions, 3 runs each through the balancer; live sessions held per replica {held}")
    check(all(where.values()), "each live session is held by one replica")
    check(sum(1 for v in held.values() if v) >= 2, "the sessions are spread")
    victim = where[live[0].id]
    theirs = [s for s in live if where[s.id] == victim]
    rep[victim].signal(signal.SIGKILL)
    rep[victim].proc.wait(10)
    t_kill = time.time()
    lb.wait_state(victim, "DOWN")
    r = live[0].run("x += 1\nprint(x)")
    took = time.time() - t_kill
    now = holder(rep, state, live[0].id)
    log(f"   {victim} killed with SIGKILL: its live session's next run through the balancer, on {now}, {took * 1000:.0f} ms after the kill (lease {LEASE_MS} ms): interpreter {r.interpreter}, stdout {r.stdout!r}")
    check(r.stdout == "4\n" and r.interpreter == "resumed", "the killed replica's live session resumed on another with its variables, as of its last answered run")
    check(now not in (None, victim), "another replica holds it now")
    check(all(s.run("x += 1\nprint(x)").stdout == "4\n" for s in live[1:]), f"every other live session goes on ({len(theirs) - 1} of them the killed replica's)")
    check(all(s.run(bump).stdout == "4\n" for s in opened), "every workspace session goes on with its files, the killed replica's too")
    rep[victim].start(settle=False)
    lb.wait_state(victim, "UP", 20)
    time.sleep(2)
    # Back in the ring, the replica gets its sessions back: handed over between runs.
    check(all(s.run(bump).stdout == "5\n" for s in opened), "after the restart, each workspace session still has its files")
    for s in opened + live:
        s.close()


def left(replicas):
    """Nothing of the servers left: processes, cgroups, sockets."""
    time.sleep(0.5)
    pids = set().union(*(r.pids_seen for r in replicas))
    binary = os.path.realpath(replicas[0].binary)
    procs = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            try:
                exe = os.readlink(f"/proc/{p}/exe")
            except OSError:
                exe = ""
            # The servers, their jails, and any jail left reparented after a SIGKILL.
            if int(p) in pids or ppid in pids or exe == binary:
                procs.append(p)
    cgroups = []
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        for d in dirs:
            if any(d.startswith(f"stockade-{pid}-") for pid in pids):
                cgroups.append(os.path.join(root, d))
        if root.count("/") > 12:
            dirs[:] = []
    sockets = [r.socket for r in replicas if os.path.exists(r.socket)]
    log(f"left behind: {len(procs)} processes, {len(cgroups)} cgroups, {len(sockets)} sockets")
    for c in cgroups:
        log(f"  {c}")
    check(not procs and not cgroups and not sockets, "nothing of the servers is left")


if __name__ == "__main__":
    main()
