// Batches through the SDK against a real server (test/server.mjs): a judge's batch (one program
// against many inputs, one of them answered wrong), each run's own code and its ending, the
// verdicts and their counts, a streamed batch yielding every index once (and hanging up early),
// the refusals naming their field.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { BadRequest, BatchResult, BatchStream, PolicyNotFound, RunResult } from "stockade";
import { ROOT, sharedServer } from "./server.mjs";

const ctx = sharedServer();

const SQUARE = "n = int(input())\nprint(n * n)";

test("a judge runs one program against many inputs", async () => {
  // Input 7 is expected to print 50: the program is right, the expectation is not.
  const inputs = Array.from({ length: 20 }, (_, i) => ({ stdin: `${i}\n`, expect: `${i === 7 ? 50 : i * i}\n` }));
  inputs.push({ stdin: new TextEncoder().encode("20\n"), expect: "400" }); // bytes; no newline expected
  inputs.push({ stdin: "21" }); // no expect: no verdict
  const b = await ctx.client.batch({ runtime: "python", code: SQUARE, inputs });
  assert.ok(b instanceof BatchResult);
  assert.match(b.batchId, /^b-/);
  assert.equal(b.results.length, 22);
  assert.ok(b.results.every((r) => r instanceof RunResult));
  // In the inputs' order, each a run of the batch's.
  assert.deepEqual(b.results.map((r) => r.stdout), Array.from({ length: 22 }, (_, i) => `${i * i}\n`));
  for (const r of b.results) assert.deepEqual([r.jail, r.batchId, r.status], ["batch", b.batchId, "ok"]);
  assert.deepEqual(b.verdicts, [...Array(7).fill("accepted"), "wrong-answer", ...Array(13).fill("accepted"), null]);
  assert.equal(b.results[7].verdict, "wrong-answer");
  assert.equal(b.results[21].verdict, null);
  assert.equal(b.summary.runs, 22);
  assert.deepEqual(b.summary.statuses, { ok: 22 });
  assert.deepEqual(b.summary.verdicts, { accepted: 20, "wrong-answer": 1 });
  assert.ok(b.summary.jails >= 1 && b.summary["wall-ms"] > 0, JSON.stringify(b.summary));
  assert.equal(b.answer["batch-id"], b.batchId);
});

test("each run has its own code and its own ending", async () => {
  const runs = [
    { code: "print(1)", expect: "1" },
    { code: "print(2)", expect: "3" },
    { code: "raise ValueError('no')", expect: "" },
    { code: "while True: pass", limits: { wallTimeoutMs: 300 }, expect: "" },
    { code: "print('x' * 100000)", limits: { stdoutMaxBytes: 1000 }, expect: "" },
    { code: "import sys; print(sys.argv[1:], sys.stdin.read())", argv: ["a", "b"], stdin: "in" },
    { code: "print(7 * 6)", expect: "42" },
  ];
  const b = await ctx.client.batch({ runtime: "python", runs, limits: { wallTimeoutMs: 5000 } });
  assert.deepEqual(
    b.results.map((r) => [r.status, r.verdict]),
    [
      ["ok", "accepted"],
      ["ok", "wrong-answer"],
      ["exited-nonzero", "runtime-error"],
      ["timeout", "timeout"],
      ["output-limit", "output-limit"],
      ["ok", null],
      ["ok", "accepted"],
    ],
  );
  assert.deepEqual([b.results[3].report["wall-timeout-ms"], b.results[0].report["wall-timeout-ms"]], [300, 5000]);
  assert.equal(b.results[4].stdoutTruncated, true);
  assert.equal(b.results[5].stdout, "['a', 'b'] in\n");
  assert.deepEqual(b.summary.verdicts, { accepted: 2, "wrong-answer": 1, "runtime-error": 1, timeout: 1, "output-limit": 1 });
  assert.deepEqual(b.summary.statuses, { ok: 4, "exited-nonzero": 1, timeout: 1, "output-limit": 1 });
  // Exact: the newline console.log adds must be expected too.
  const exact = await ctx.client.batch({
    runtime: "javascript",
    code: "console.log(6 * 7)",
    inputs: [{ expect: "42" }, { expect: "42\n" }],
    compare: "exact",
  });
  assert.deepEqual(exact.verdicts, ["wrong-answer", "accepted"]);
});

test("a streamed batch yields every index once, then its summary", async () => {
  const runs = Array.from({ length: 30 }, (_, i) => ({ code: `print(${i})`, expect: String(i === 5 ? -1 : i) }));
  const stream = ctx.client.batchStream({ runtime: "python", runs });
  assert.ok(stream instanceof BatchStream);
  assert.deepEqual([stream.summary, stream.batchId], [undefined, undefined]);
  const seen = new Map();
  for await (const { index, result } of stream) {
    assert.ok(result instanceof RunResult);
    assert.ok(!seen.has(index), `index ${index} twice`);
    seen.set(index, result);
  }
  assert.deepEqual([...seen.keys()].sort((a, b) => a - b), Array.from({ length: 30 }, (_, i) => i));
  for (const [i, r] of seen) assert.equal(r.stdout, `${i}\n`);
  assert.equal(seen.get(5).verdict, "wrong-answer");
  assert.match(stream.batchId, /^b-/);
  assert.deepEqual(new Set([...seen.values()].map((r) => r.batchId)), new Set([stream.batchId]));
  assert.equal(stream.summary.runs, 30);
  assert.deepEqual(stream.summary.verdicts, { accepted: 29, "wrong-answer": 1 });
  const again = [];
  for await (const ev of stream) again.push(ev);
  assert.deepEqual(again, [], "a stream is iterated once");
  // One program against many inputs, streamed.
  const events = [];
  const inputs = Array.from({ length: 5 }, (_, i) => ({ stdin: `${i}\n` }));
  for await (const ev of ctx.client.batchStream({ runtime: "javascript", code: "console.log(std.in.getline())", inputs })) {
    events.push([ev.index, ev.result.stdout]);
  }
  assert.deepEqual(events.sort((a, b) => a[0] - b[0]), Array.from({ length: 5 }, (_, i) => [i, `${i}\n`]));
});

test("a stream left early hangs up, and the server goes on", async () => {
  const slow = "import time\nt = time.time()\nwhile time.time() - t < 0.05: pass\nprint('x')";
  const t0 = Date.now();
  // 200 runs of 50 ms on at most two jails: 5 s and more, were it read to its end.
  const stream = ctx.client.batchStream({ runtime: "python", runs: Array(200).fill({ code: slow }) });
  const first = [];
  for await (const ev of stream) {
    first.push(ev.result.stdout);
    if (first.length === 3) break;
  }
  assert.ok(Date.now() - t0 < 4000, "leaving the stream waited for the batch");
  assert.deepEqual(first, ["x\n", "x\n", "x\n"]);
  assert.equal(stream.summary, undefined, "a stream left early has no summary");
  // close() before the loop ends it too (nothing is sent).
  const unread = ctx.client.batchStream({ runtime: "python", runs: [{ code: "print(1)" }] });
  await unread.close();
  const none = [];
  for await (const ev of unread) none.push(ev);
  assert.deepEqual(none, []);
  assert.equal((await ctx.client.runPython("print(5)")).stdout, "5\n");
});

test("a bad batch is refused naming its field", async () => {
  const one = [{ code: "print(1)" }];
  const streamed = async (o) => {
    for await (const _ of ctx.client.batchStream(o));
  };
  for (const call of [(o) => ctx.client.batch(o), streamed]) {
    await assert.rejects(call({ runtime: "python", runs: [{ code: "1", limits: { memoryMaxBytes: 1 << 28 } }] }), (e) => {
      assert.ok(e instanceof BadRequest);
      assert.deepEqual([e.status, e.code, e.field], [400, "bad-request", "runs[0].limits.memory-max-bytes"]);
      assert.match(e.message, /a batch's runs share their jail's memory/);
      return true;
    });
  }
  // The batch's own memory limit is its jails'.
  const ok = await ctx.client.batch({ runtime: "python", runs: one, limits: { memoryMaxBytes: 1 << 28 } });
  assert.equal(ok.results[0].stdout, "1\n");
  const cases = [
    [{ runs: [] }, "runs"],
    [{ runs: one, code: "print(1)", inputs: [{}] }, "runs"],
    [{ inputs: [{}] }, "code"],
    [{ code: "print(1)", inputs: [{ stdin: "a" }, { code: "print(2)" }] }, "inputs[1].code"],
    [{ runs: [{ code: "1" }, { code: "1", limits: { pidsMax: 10 } }] }, "runs[1].limits.pids-max"],
    [{ runs: [{ code: "1", limits: { wallTimeoutMs: 2000 } }], limits: { wallTimeoutMs: 1000 } }, "runs[0].limits.wall-timeout-ms"],
    [{ runs: one, limits: { wallTimeoutMs: 1e9 } }, "limits.wall-timeout-ms"],
    [{ runs: one, compare: "fuzzy" }, "compare"],
  ];
  for (const [o, field] of cases) {
    await assert.rejects(
      ctx.client.batch({ runtime: "python", ...o }),
      (e) => e instanceof BadRequest && e.status === 400 && e.field === field,
      JSON.stringify(o),
    );
  }
  await assert.rejects(ctx.client.batch({ runtime: "cobol", runs: one }), (e) => e instanceof BadRequest && e.field === "runtime");
  await assert.rejects(
    ctx.client.batch({ runtime: "python", runs: one, policy: "no-such-policy" }),
    (e) => e instanceof PolicyNotFound && e.status === 404 && e.field === "policy",
  );
  // What this client cannot send is refused before anything is sent.
  await assert.rejects(
    ctx.client.batch({ runtime: "python", runs: [{ code: "1" }, { code: "1", nope: 1 }] }),
    (e) => e instanceof TypeError && /runs\[1\]: unknown key "nope"/.test(e.message),
  );
  await assert.rejects(ctx.client.batch({ runtime: "python", runs: "print(1)" }), (e) => e instanceof TypeError && /runs is a list/.test(e.message));
  assert.throws(() => ctx.client.batchStream({ runtime: "python", runs: [{ code: "1", limits: { wallTimeout: 5 } }] }), TypeError);
});

test("a batch's run and its result have the schemas' keys", () => {
  const schemas = JSON.parse(readFileSync(join(ROOT, "docs", "openapi.json"), "utf8")).components.schemas;
  // The helper types' keys are the schema's (stdin as bytes is stdin-base64).
  const run = new Set(Object.keys(schemas.BatchRunBody.properties));
  assert.deepEqual(run, new Set(["code", "argv", "stdin", "stdin-base64", "limits", "expect"]));
  assert.ok(["verdict", "jail", "batch-id"].every((k) => k in schemas.RunResult.properties));
  assert.deepEqual(new Set(schemas.Compare.oneOf.map((a) => a.const)), new Set(["exact", "trailing-whitespace"]));
});
