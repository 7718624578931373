// stockade/ai, the Vercel AI SDK's tools, against a real server: the tool's `execute` called as
// the SDK calls it (Python and JavaScript, a value, a failing run, a timeout and a refused limit
// as results the model reads, an unreachable server as a throw, a live session, host calls),
// one tool per runtime of `info()`, and `generateText` with a scripted model (the SDK's own mock
// from `ai/test`: no network) that calls the tool and then answers with what it read.
import assert from "node:assert/strict";
import { test } from "node:test";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { Client, ServerUnavailable } from "stockade";
import { DEFAULT_MAX_OUTPUT_CHARS, stockadeTool, stockadeTools } from "stockade/ai";
import { HAS_PYTHON3, sharedServer } from "./server.mjs";

const ctx = sharedServer();

/** Calls a tool as the AI SDK does. */
const call = (t, code, extra = {}) => t.execute({ code }, { toolCallId: "call-1", messages: [], ...extra });

const USAGE = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};

/** A model that answers each step with the next of `steps` (content parts), seeing every prompt. */
function scripted(steps) {
  const prompts = [];
  const offered = [];
  const model = new MockLanguageModelV3({
    doGenerate: async (options) => {
      prompts.push(options.prompt);
      offered.push(options.tools);
      const content = steps[prompts.length - 1];
      assert.ok(content, `the model was asked a step too many: ${prompts.length}`);
      const calls = content.some((p) => p.type === "tool-call");
      return { content, finishReason: { unified: calls ? "tool-calls" : "stop", raw: undefined }, usage: USAGE, warnings: [] };
    },
  });
  return { model, prompts, offered };
}

test("a Python run: its stdout and the value of its last expression", async () => {
  const t = stockadeTool(ctx.client);
  assert.match(t.description, /Python/);
  assert.deepEqual(t.inputSchema.jsonSchema.required, ["code"]);
  const r = await call(t, "import sys\nprint(6 * 7)\nsys.stderr.write('note')\n{'n': sum(range(5))}");
  assert.deepEqual(r, {
    status: "ok",
    exitCode: 0,
    stdout: "42\n",
    stderr: "note",
    stdoutTruncated: false,
    stderrTruncated: false,
    wallMs: r.wallMs,
    value: { n: 10 },
  });
  assert.ok(r.wallMs > 0);
  const repr = await call(t, "(1, 'a')");
  assert.deepEqual([repr.value, repr.valueRepr], [undefined, "(1, 'a')"]);
  // What it returns is JSON all through: the SDK sends it to the model as it is.
  assert.deepEqual(JSON.parse(JSON.stringify(r)), r);
});

test("a JavaScript run", async () => {
  const t = stockadeTool(ctx.client, { runtime: "javascript", description: "Runs JS." });
  assert.equal(t.description, "Runs JS.");
  const r = await call(t, "console.log('hi', 1 + 1); [1, 2].map((x) => x * 2)");
  assert.deepEqual([r.status, r.stdout, r.value, r.reason], ["ok", "hi 2\n", [2, 4], undefined]);
  assert.match(stockadeTool(ctx.client, { runtime: "javascript" }).description, /JavaScript.*console\.log/);
});

test("a failing run, a timeout and a refused limit are results, with a reason", async () => {
  const t = stockadeTool(ctx.client);
  const raised = await call(t, "1 / 0");
  assert.equal(raised.status, "exited-nonzero");
  assert.match(raised.reason, /ZeroDivisionError: division by zero$/);
  assert.match(raised.stderr, /Traceback/);
  const slow = stockadeTool(ctx.client, { limits: { wallTimeoutMs: 300 } });
  const timedOut = await call(slow, "print('started', flush=True)\nwhile True: pass");
  assert.equal(timedOut.status, "timeout");
  assert.match(timedOut.reason, /wall-clock limit/);
  assert.equal(timedOut.stdout, "started\n");
  // A limit looser than the policy's: the server refuses it, naming the field.
  const loose = stockadeTool(ctx.client, { limits: { wallTimeoutMs: 1e9 } });
  const refused = await call(loose, "print(1)");
  assert.equal(refused.status, "refused");
  assert.equal(refused.code, "bad-request");
  assert.equal(refused.field, "limits.wall-timeout-ms");
  assert.match(refused.reason, /wall-timeout-ms/);
  assert.equal(refused.stdout, "");
  const policy = await call(stockadeTool(ctx.client, { policy: "none-such" }), "1");
  assert.deepEqual([policy.status, policy.code], ["refused", "policy-not-found"]);
});

test("output is cut for the model; a server that cannot be reached throws", async () => {
  const t = stockadeTool(ctx.client, { maxOutputChars: 10 });
  const r = await call(t, "print('x' * 25)");
  assert.equal(r.stdoutTruncated, true);
  assert.match(r.stdout, /^x{10}\n\[\.\.\. 16 more characters cut\]$/);
  assert.equal(DEFAULT_MAX_OUTPUT_CHARS, 16384);
  const capped = await call(stockadeTool(ctx.client, { limits: { stdoutMaxBytes: 4096 } }), "print('y' * 5000)");
  assert.deepEqual([capped.status, capped.stdoutTruncated], ["output-limit", true]);
  const gone = new Client({ socket: "/nonexistent/api.sock", retries: 0 });
  await assert.rejects(call(stockadeTool(gone), "1"), ServerUnavailable);
  await assert.rejects(stockadeTool(gone).execute({ source: "1" }, { toolCallId: "x", messages: [] }), TypeError);
  gone.close();
  // The step's abortSignal cancels the run.
  const ac = new AbortController();
  const pending = call(stockadeTool(ctx.client), "while True: pass", { abortSignal: ac.signal });
  setTimeout(() => ac.abort(), 100);
  await assert.rejects(pending, (e) => e.name === "AbortError");
});

test("a live session keeps the interpreter between calls; host calls reach this process", async () => {
  const s = await ctx.client.session("python", { mode: "live" });
  try {
    const t = stockadeTool(ctx.client, { session: s });
    assert.match(t.description, /persist between calls/);
    assert.equal((await call(t, "x = 41")).interpreter, "started");
    const again = await call(t, "x + 1");
    assert.deepEqual([again.value, again.interpreter], [42, "kept"]);
    assert.throws(() => stockadeTool(ctx.client, { session: s, runtime: "javascript" }), TypeError);
    assert.throws(() => stockadeTool(ctx.client, { session: s, policy: "default" }), TypeError);
  } finally {
    await s.close();
  }
  const tools = { lookup: (args) => ({ capital: args.country === "France" ? "Paris" : "?" }) };
  const t = stockadeTool(ctx.client, { tools });
  assert.match(t.description, /stockade_host\.call\(name, args\): lookup/);
  const r = await call(t, "import stockade_host\nstockade_host.call('lookup', {'country': 'France'})['capital']");
  assert.deepEqual([r.status, r.value], ["ok", "Paris"], r.stderr);
});

test("one tool per runtime the server has", async () => {
  const all = await stockadeTools(ctx.client);
  const names = ["run_javascript", "run_python", ...(HAS_PYTHON3 ? ["run_python3"] : [])];
  assert.deepEqual(Object.keys(all).sort(), names);
  assert.match(all.run_javascript.description, /JavaScript/);
  if (HAS_PYTHON3) {
    assert.match(all.run_python3.description, /Python/);
    assert.equal((await call(all.run_python3, "import sys; sys.version_info[0]")).value, 3);
  }
  assert.equal((await call(all.run_javascript, "6 * 7")).value, 42);
  const some = await stockadeTools(ctx.client, { runtimes: ["python"], name: (rt) => `exec-${rt}` });
  assert.deepEqual(Object.keys(some), ["exec-python"]);
  await assert.rejects(stockadeTools(ctx.client, { runtimes: ["cobol"] }), /no runtime cobol/);
});

test("generateText: the model calls the tool, reads the run, and answers", async () => {
  const code = "import math\nprint(math.factorial(20))\nmath.factorial(5)";
  const { model, prompts, offered } = scripted([
    [{ type: "tool-call", toolCallId: "call-1", toolName: "run_python", input: JSON.stringify({ code }) }],
    [{ type: "text", text: "20! is 2432902008176640000." }],
  ]);
  const result = await generateText({
    model,
    tools: { run_python: stockadeTool(ctx.client) },
    stopWhen: stepCountIs(2),
    prompt: "What is 20 factorial?",
  });
  assert.equal(result.text, "20! is 2432902008176640000.");
  assert.equal(result.steps.length, 2);
  const [tr] = result.steps[0].toolResults;
  assert.deepEqual([tr.toolName, tr.input], ["run_python", { code }]);
  assert.deepEqual([tr.output.status, tr.output.stdout, tr.output.value], ["ok", "2432902008176640000\n", 120]);
  // What the model was given on its second step: the run's result as the tool's JSON output.
  const answer = prompts[1].find((m) => m.role === "tool").content.find((p) => p.type === "tool-result");
  assert.equal(answer.toolCallId, "call-1");
  assert.equal(answer.output.type, "json");
  assert.equal(answer.output.value.stdout, "2432902008176640000\n");
  assert.equal(answer.output.value.value, 120);
  // The tool was offered to the model with its description and schema.
  const [fn] = offered[0];
  assert.deepEqual([fn.type, fn.name, fn.inputSchema.required], ["function", "run_python", ["code"]]);
  assert.match(fn.description, /Runs Python code in an isolated sandbox/);
});

test("generateText: a refused run reaches the model as a result, an input not { code } as an error", async () => {
  const { model, prompts } = scripted([
    [
      { type: "tool-call", toolCallId: "c-a", toolName: "run", input: JSON.stringify({ code: "print(1)" }) },
      { type: "tool-call", toolCallId: "c-b", toolName: "run", input: JSON.stringify({ source: "print(1)" }) },
    ],
    [{ type: "text", text: "The sandbox refused: its limit is too loose." }],
  ]);
  const result = await generateText({
    model,
    tools: { run: stockadeTool(ctx.client, { limits: { wallTimeoutMs: 1e9 } }) },
    stopWhen: stepCountIs(2),
    prompt: "Run print(1).",
  });
  assert.equal(result.steps[0].toolResults[0].output.status, "refused");
  const answers = prompts[1].find((m) => m.role === "tool").content;
  const a = answers.find((p) => p.toolCallId === "c-a");
  assert.deepEqual([a.output.value.status, a.output.value.field], ["refused", "limits.wall-timeout-ms"]);
  const b = answers.find((p) => p.toolCallId === "c-b");
  assert.equal(b.output.type, "error-text");
  assert.match(b.output.value, /the input is \{ "code": string \}/);
  assert.equal(result.steps[0].content.find((p) => p.type === "tool-error")?.toolCallId, "c-b");
  assert.match(result.text, /refused/);
});
