// Host calls through the SDK against a real server: a run calls plain (and async) functions of
// this process, a tool's error reaches the run as `ToolError`, the budgets are the server's,
// JavaScript's `host.call`, a session's run (a live one too), and a stream with tools.
import assert from "node:assert/strict";
import { test } from "node:test";
import { BadRequest } from "stockade";
import { HAS_PYTHON3, sharedServer } from "./server.mjs";

const ctx = sharedServer();

const CODE = `
import stockade_host as h
print(h.call("search", {"q": "jails"}))
try:
    h.call("broken")
except h.ToolError as e:
    print("error:", e)
`;

test("a run calls this process's functions", async () => {
  const seen = [];
  const tools = {
    search: async (args) => {
      seen.push(args);
      await new Promise((r) => setTimeout(r, 10));
      return { hits: [args.q, "sandboxes"] };
    },
    broken: () => {
      throw new RangeError("the index is down");
    },
  };
  const r = await ctx.client.runPython(CODE, { tools });
  assert.equal(r.stdout, "{'hits': ['jails', 'sandboxes']}\nerror: RangeError: the index is down\n", r.stderr);
  assert.deepEqual(seen, [{ q: "jails" }]);
  assert.deepEqual(r.hostCalls.map((c) => [c.name, c.outcome]), [["search", "ok"], ["broken", "error"]]);
  // The server's budgets: past maxCalls, refused in the run.
  const capped = await ctx.client.runPython(
    "import stockade_host as h\nfor i in range(3):\n    try: print(h.call('t', i))\n    except h.ToolError as e: print('no')",
    { tools: { t: { fn: (i) => i * 2, maxCalls: 2 } } },
  );
  assert.equal(capped.stdout, "0\n2\nno\n");
  await assert.rejects(
    ctx.client.runJs("1", { tools: { t: { fn: () => 1, timeoutMs: 600_000 } } }),
    (e) => e instanceof BadRequest && e.field === "tools[0].timeout-ms",
  );
  if (HAS_PYTHON3) {
    const host = await ctx.client.run("python3", "import stockade_host as h\nprint(h.call('search', {'q': 'py3'})['hits'][0])", { tools });
    assert.equal(host.stdout, "py3\n");
  }
});

test("JavaScript calls back too, and a stream answers its calls on the way", async () => {
  const r = await ctx.client.runJs(
    "print(JSON.stringify(host.call('add', {a: 40, b: 2})));\ntry { host.call('nope') } catch (e) { print(e.name + ': ' + e.message) }",
    { tools: { add: ({ a, b }) => a + b } },
  );
  assert.equal(r.stdout.split("\n")[0], "42");
  assert.match(r.stdout, /ToolError: no tool "nope"/);
  const events = [];
  for await (const ev of ctx.client.streamPython("import stockade_host as h\nprint('asking', flush=True)\nprint(h.call('echo', [1]))", {
    tools: { echo: (a) => a },
  })) {
    events.push(ev);
  }
  assert.equal(events[0].type, "output");
  assert.equal(events.at(-1).result.stdout, "asking\n[1]\n");
});

test("a session's runs call back, a live one's each with its own tools", async () => {
  const s = await ctx.client.session("python", { mode: "live" });
  const a = await s.run("import stockade_host as h\nx = h.call('add', [40, 2])", { tools: { add: (v) => v[0] + v[1] } });
  assert.deepEqual([a.ok, a.interpreter], [true, "started"]);
  const b = await s.run("print(x)\ntry:\n    h.call('add', [1, 1])\nexcept h.ToolError as e:\n    print(e)");
  assert.deepEqual([b.stdout, b.interpreter], ["42\nthis run has no host calls\n", "kept"]);
  await s.close();
  const w = await ctx.client.session("javascript");
  const r = await w.run("console.log(host.call('up', 'x'))", { tools: { up: (t) => t.toUpperCase() } });
  assert.equal(r.stdout, "X\n");
  await w.close();
});
