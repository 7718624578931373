// The client against a real `stockade serve` (test/server.mjs): every run method, files both
// ways, limits, streaming, the typed errors, TCP with a token, cancellation with AbortSignal,
// retries only where safe, and the README's quick start verbatim.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import {
  BadRequest,
  Busy,
  Client,
  ERROR_STATUS,
  PolicyNotFound,
  RunFailed,
  RunResult,
  ServerUnavailable,
  StockadeError,
  Unauthorized,
} from "stockade";
import { EXIT_7_WASM, ROOT, Server, sharedServer } from "./server.mjs";

const ctx = sharedServer();

test("every runtime, argv and stdin", async () => {
  const r = await ctx.client.runPython("import sys; print(6 * 7, sys.argv[1:])", { argv: ["a", "b"] });
  assert.ok(r instanceof RunResult);
  assert.equal(r.status, "ok");
  assert.equal(r.ok, true);
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, "42 ['a', 'b']\n");
  assert.ok(r.wallMs > 0 && r.cpuMs >= 0);
  assert.ok(r.enforcement.some((l) => l.layer === "seccomp" && l.status === "enforced"), JSON.stringify(r.enforcement));
  assert.equal((await ctx.client.runJs("console.log([1, 2].map((x) => x * 2).join())")).stdout, "2,4\n");
  assert.equal((await ctx.client.run("javascript", "console.log(scriptArgs.join())", { argv: ["x"] })).stdout, "x\n");
  assert.equal((await ctx.client.runPython("print(input().upper())", { stdin: "piped in" })).stdout, "PIPED IN\n");
  const bytes = await ctx.client.runPython("import sys; print(sys.stdin.buffer.read().hex())", { stdin: new Uint8Array([0, 255]) });
  assert.equal(bytes.stdout, "00ff\n");
  const w = await ctx.client.runWasm(EXIT_7_WASM);
  assert.deepEqual([w.status, w.exitCode], ["exited-nonzero", 7]);
  const raw = await ctx.client.runPython("import sys; sys.stdout.buffer.write(b'\\xff\\xfe'); sys.stderr.write('oops')");
  assert.deepEqual([...raw.stdoutBytes], [0xff, 0xfe]);
  assert.equal(raw.stderr, "oops");
  assert.equal(raw.report["schema-version"], 1);
});

test("a run gives back the value of its last expression", async () => {
  const js = await ctx.client.runJs("[1, 2].map((x) => x * 2)");
  assert.deepEqual([js.value, js.valueRepr, js.outputs], [[2, 4], null, []]);
  const py = await ctx.client.runPython("x = 20\n{'x': x + 1}");
  assert.deepEqual(py.value, { x: 21 });
  const repr = await ctx.client.runPython("(1, 'a')");
  assert.deepEqual([repr.value, repr.valueRepr], [null, "(1, 'a')"]);
  const none = await ctx.client.runJs("console.log(1)");
  assert.deepEqual([none.value, none.valueRepr], [null, null]);
});

test("files go in and come back", async () => {
  const code = "import os\nrows = open('data.csv').read().split(',')\nos.makedirs('out', exist_ok=True)\n" +
    "open('out/sum.txt', 'w').write(str(sum(map(int, rows))))\nopen('out/raw.bin', 'wb').write(bytes([0, 1, 255]))";
  const r = await ctx.client.runPython(code, { files: { "data.csv": "1,2,3", "blob.bin": new Uint8Array([9]) }, returnFiles: "out/*" });
  assert.equal(r.status, "ok", r.stderr);
  assert.deepEqual(Object.keys(r.files).sort(), ["out/raw.bin", "out/sum.txt"]);
  assert.equal(new TextDecoder().decode(r.files["out/sum.txt"]), "6");
  assert.deepEqual([...r.files["out/raw.bin"]], [0, 1, 255]);
  assert.equal(r.filesCapped, false);
});

test("limits, the wall clock and the output caps", async () => {
  const r = await ctx.client.runPython("while True: pass", { limits: { wallTimeoutMs: 300 } });
  assert.equal(r.status, "timeout");
  assert.throws(() => r.raiseForStatus(), (e) => e instanceof RunFailed && e.result === r && e.code === "timeout");
  const big = await ctx.client.runPython("print('x' * 10000)", { limits: { stdoutMaxBytes: 100 } });
  assert.equal(big.stdoutTruncated, true);
  assert.ok(big.stdoutBytes.length <= 100);
  // A key the server does not know is refused before anything is sent.
  await assert.rejects(ctx.client.runPython("1", { limits: { wallTimeout: 5 } }), (e) => e instanceof TypeError && /wallTimeout/.test(e.message));
  await assert.rejects(ctx.client.runPython("1", { limits: { fuel: -1 } }), (e) => e instanceof TypeError && /limits.fuel/.test(e.message));
});

test("bad requests name their field; a missing policy is its own error", async () => {
  await assert.rejects(ctx.client.runPython("1", { limits: { pidsMax: 1e9 } }), (e) => {
    assert.ok(e instanceof BadRequest && e instanceof StockadeError);
    assert.equal(e.field, "limits.pids-max");
    assert.equal(e.status, 400);
    assert.match(e.message, /looser/);
    return true;
  });
  await assert.rejects(ctx.client.runPython("1", { files: { "../escape": "x" } }), (e) => e instanceof BadRequest && e.field === "files[0].path");
  await assert.rejects(ctx.client.runPython("1", { policy: "no-such-policy" }), (e) => e instanceof PolicyNotFound && e.status === 404);
});

test("every error code of the API has its HTTP status", () => {
  // Every code docs/openapi.json lists (a new one fails here until the table has it), and no other.
  const schemas = JSON.parse(readFileSync(join(ROOT, "docs", "openapi.json"), "utf8")).components.schemas;
  const codes = schemas.ErrorCode.oneOf.flatMap((alt) => alt.enum ?? [alt.const]);
  assert.ok(codes.length > 0 && codes.every((c) => typeof c === "string"));
  assert.deepEqual(Object.keys(ERROR_STATUS).sort(), [...new Set(codes)].sort());
  for (const [code, status] of Object.entries(ERROR_STATUS)) {
    assert.ok(Number.isInteger(status) && status >= 400 && status < 600, `${code}: ${status}`);
  }
  assert.deepEqual([ERROR_STATUS["bad-request"], ERROR_STATUS["session-ended"], ERROR_STATUS.draining], [400, 410, 503]);
  assert.ok(Object.isFrozen(ERROR_STATUS));
});

test("TCP needs the token", async () => {
  const c = new Client({ url: ctx.server.url, token: ctx.server.token });
  assert.equal((await c.runPython("print('over tcp')")).stdout, "over tcp\n");
  c.close();
  for (const token of [undefined, "not-the-token"]) {
    const bad = new Client({ url: ctx.server.url, token });
    await assert.rejects(bad.runPython("1"), (e) => e instanceof Unauthorized && (e.status === 401 || e.status === 403));
    bad.close();
  }
  assert.throws(() => new Client({ socket: "/x", url: "http://127.0.0.1:1" }), TypeError);
});

test("info and health", async () => {
  const h = await ctx.client.health();
  assert.equal(h.status, "ok");
  const info = await ctx.client.info();
  assert.ok(info.runtimes.some((r) => r.name === "python"));
});

test("streaming gives the output as it happens", async () => {
  const events = [];
  const t0 = Date.now();
  for await (const ev of ctx.client.streamPython("import time\nprint('first', flush=True)\ntime.sleep(0.4)\nprint('second')")) {
    events.push([ev, Date.now() - t0]);
  }
  const outputs = events.filter(([e]) => e.type === "output");
  assert.equal(outputs[0][0].text, "first\n");
  assert.equal(outputs[0][0].stream, "stdout");
  const [done, at] = events.at(-1);
  assert.equal(done.type, "result");
  assert.equal(done.result.stdout, "first\nsecond\n");
  assert.ok(at - outputs[0][1] >= 300, "the first line came before the run ended");
  const js = [];
  for await (const ev of ctx.client.streamJs("console.log('j')")) js.push(ev);
  assert.equal(js.at(-1).result.stdout, "j\n");
});

test("AbortSignal cancels a call", async () => {
  const ac = new AbortController();
  const t0 = Date.now();
  setTimeout(() => ac.abort(), 200);
  await assert.rejects(ctx.client.runPython("import time; time.sleep(5)", { signal: ac.signal }), (e) => e.name === "AbortError");
  assert.ok(Date.now() - t0 < 3000);
  // Already aborted: nothing is sent.
  await assert.rejects(ctx.client.health({ signal: AbortSignal.abort() }), (e) => e.name === "AbortError");
  // A stream, mid-way.
  const stream = new AbortController();
  const seen = [];
  await assert.rejects(
    (async () => {
      for await (const ev of ctx.client.streamPython("import time\nprint('a', flush=True)\ntime.sleep(5)", { signal: stream.signal })) {
        seen.push(ev);
        stream.abort();
      }
    })(),
    (e) => e.name === "AbortError",
  );
  assert.equal(seen.length, 1);
  // The client still works.
  assert.equal((await ctx.client.runJs("console.log(1)")).stdout, "1\n");
});

test("an unreachable server, and the client's timeout", async () => {
  const c = new Client({ socket: "/nonexistent/stockade.sock", retries: 1 });
  await assert.rejects(c.runPython("print(1)"), (e) => e instanceof ServerUnavailable && e.status === undefined);
  c.close();
  const slow = new Client({ socket: ctx.server.socket, timeoutMs: 500 });
  await assert.rejects(slow.runPython("import time; time.sleep(3)"), (e) => e instanceof ServerUnavailable && /timeout/.test(e.message));
  slow.close();
});

test("a full server says busy, and a retry waits its turn", async () => {
  const one = await Server.start({ server: "concurrency = 1\nqueue = 0" });
  try {
    const first = new Client({ socket: one.socket }).runPython("import time; time.sleep(1.5); print('done')");
    await new Promise((r) => setTimeout(r, 500));
    const noRetry = new Client({ socket: one.socket, retries: 0 });
    await assert.rejects(noRetry.runJs("console.log(1)"), (e) => {
      assert.ok(e instanceof Busy);
      assert.deepEqual([e.status, e.code, e.retryAfter], [429, "queue-full", 1]);
      return true;
    });
    noRetry.close();
    // Refused before it ran: tried again after Retry-After, it runs once the slot is free.
    const patient = new Client({ socket: one.socket, retries: 3 });
    assert.equal((await patient.runJs("console.log('after')")).stdout, "after\n");
    patient.close();
    assert.equal((await first).stdout, "done\n");
  } finally {
    await one.stop();
  }
});
