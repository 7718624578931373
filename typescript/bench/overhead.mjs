// The TypeScript SDK's cost, for `cargo xtask bench`: the same requests through a running server,
// interleaved round by round — a bare `node:http` request on the unix socket (the baseline: no
// SDK, a kept-alive connection too) against the SDK's call — medians and the difference:
//   - Python `print(1)` (POST /v1/runs), spaced so the warm pools refill, which goes first
//     alternating round by round;
//   - GET /v1/health back to back (no run: the SDK's own cost alone, as near as it shows);
//   - a host call's round trip answered by the SDK (on the run's upgraded connection), 200 calls
//     in one run timed in the guest (the first 20 left out; QuickJS's os.now() counts microseconds), for the Python and JavaScript guests.
//
// Usage: node bench/overhead.mjs SOCKET ROUNDS SPACED_MS   (after `npm run build`)
import * as http from "node:http";
import { Client } from "../dist/esm/index.js";

const [socket, roundsArg, spacedArg] = process.argv.slice(2);
const rounds = Number(roundsArg ?? 40);
const spaced = Number(spacedArg ?? 150);
const agent = new http.Agent({ keepAlive: true });

function raw(method, path, body) {
  return new Promise((resolve, reject) => {
    const headers = body ? { "content-type": "application/json", "content-length": Buffer.byteLength(body) } : {};
    const req = http.request({ socketPath: socket, path, method, headers, agent }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, body: JSON.parse(Buffer.concat(chunks).toString()) }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const ms = (t) => Number(process.hrtime.bigint() - t) / 1e6;

const client = new Client({ socket });
const body = JSON.stringify({ runtime: "python", code: "print(1)" });
const rawRuns = [];
const sdkRuns = [];
// Which goes first alternates round by round: the second run after a pause fared differently from
// the first (the warm pool's refill, timers), whichever client sent it.
const rawRun = async () => {
  const r = await raw("POST", "/v1/runs", body);
  if (r.status !== 200 || r.body.status !== "ok") throw new Error(JSON.stringify(r.body));
};
const sdkRun = async () => {
  const s = await client.runPython("print(1)");
  if (!s.ok || s.stdout !== "1\n") throw new Error(JSON.stringify(s.report));
};
const timed = async (f) => {
  await sleep(spaced);
  const t = process.hrtime.bigint();
  await f();
  return ms(t);
};
for (let i = 0; i < rounds + 4; i++) {
  let tookRaw;
  let tookSdk;
  if (i % 2 === 0) {
    tookRaw = await timed(rawRun);
    tookSdk = await timed(sdkRun);
  } else {
    tookSdk = await timed(sdkRun);
    tookRaw = await timed(rawRun);
  }
  if (i >= 4) {
    rawRuns.push(tookRaw);
    sdkRuns.push(tookSdk);
  }
}
const rawHealth = [];
const sdkHealth = [];
for (let i = 0; i < 10 * rounds + 20; i++) {
  let t = process.hrtime.bigint();
  await raw("GET", "/v1/health");
  const tookRaw = ms(t);
  t = process.hrtime.bigint();
  await client.health();
  const tookSdk = ms(t);
  if (i >= 20) {
    rawHealth.push(tookRaw);
    sdkHealth.push(tookSdk);
  }
}
const CALLS = {
  python: "import stockade_host as h, time\ntook = []\nfor i in range(200):\n    t = time.perf_counter()\n    assert h.call('echo', i) == i\n    took.append((time.perf_counter() - t) * 1000)\nprint(' '.join('%.4f' % t for t in took))",
  javascript: "const took = []; for (let i = 0; i < 200; i++) { const t = os.now(); host.call('echo', i); took.push((os.now() - t) / 1000); } print(took.map((t) => t.toFixed(4)).join(' '));",
};
const calls = {};
for (const [runtime, code] of Object.entries(CALLS)) {
  const r = await client.run(runtime, code, { tools: { echo: { fn: (x) => x, maxCalls: 200 } } });
  calls[runtime] = r.ok ? median(r.stdout.trim().split(" ").slice(20).map(Number)) : NaN;
}
client.close();
agent.destroy();
const line = (label, v) => console.log(`  ${label.padEnd(44)}${v}`);
const [rr, sr, rh, sh] = [median(rawRuns), median(sdkRuns), median(rawHealth), median(sdkHealth)];
console.log(`python print(1), ${rounds} rounds, ${spaced} ms apart, medians:`);
line("node:http POST on the unix socket (no SDK)", `${rr.toFixed(2)} ms`);
line("stockade Client.runPython", `${sr.toFixed(2)} ms`);
line("the SDK's cost", `${(sr - rr >= 0 ? "+" : "") + (sr - rr).toFixed(2)} ms (${(sr / rr).toFixed(2)}x the bare request)`);
console.log(`GET /v1/health, ${rawHealth.length} rounds back to back, medians:`);
line("node:http GET on the unix socket (no SDK)", `${rh.toFixed(3)} ms`);
line("stockade Client.health", `${sh.toFixed(3)} ms`);
line("the SDK's cost", `${(sh - rh >= 0 ? "+" : "") + (sh - rh).toFixed(3)} ms (${(sh / rh).toFixed(2)}x the bare request)`);
console.log("a host call's round trip answered by the SDK, timed in the run (180 calls after 20), medians:");
for (const [runtime, m] of Object.entries(calls)) line(`${runtime} guest`, `${m.toFixed(3)} ms`);
