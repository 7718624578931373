// Sessions through the SDK against a real server: a file uploaded, transformed by Python,
// downloaded; a fork that goes on on its own; two turns of a live session, ended by its disposer;
// one run at a time; a session is its token's; the session errors.
import assert from "node:assert/strict";
import { test } from "node:test";
import { BadRequest, Client, Session, SessionBusy, SessionEnded, SessionNotFound, Unauthorized } from "stockade";
import { rawPost, sharedServer } from "./server.mjs";

const ctx = sharedServer();

test("a file round trip and two turns of a workspace session", async () => {
  const s = await ctx.client.session("python");
  assert.match(s.id, /^s-[0-9a-f]{32}$/);
  assert.equal(s.info.mode, "workspace");
  const up = await s.upload("in/temps.csv", "12,15,11");
  assert.deepEqual([up.path, up.bytes], ["in/temps.csv", 8]);
  const r = await s.run("t = [int(x) for x in open('in/temps.csv').read().split(',')]\nopen('out.txt', 'w').write(str(max(t)))");
  assert.equal(r.status, "ok", r.stderr);
  assert.equal(r.session.id, s.id);
  assert.equal(new TextDecoder().decode(await s.download("out.txt")), "15");
  const second = await s.run("print(open('out.txt').read())");
  assert.equal(second.stdout, "15\n");
  assert.deepEqual((await s.files()).map((f) => f.path), ["in/temps.csv", "out.txt"]);
  await s.upload("bin.dat", new Uint8Array([0, 255, 1]));
  assert.deepEqual([...(await s.download("bin.dat"))], [0, 255, 1]);
  await s.remove("bin.dat");
  await assert.rejects(s.download("bin.dat"), (e) => e instanceof SessionNotFound && e.status === 404);
  await assert.rejects(s.upload("../escape", "x"), (e) => e instanceof BadRequest);
  await assert.rejects(s.run("1", { policy: "default" }), TypeError);
  const refreshed = await s.refresh();
  assert.equal(refreshed.id, s.id);
  await s.close();
  await assert.rejects(s.run("1"), (e) => e instanceof SessionNotFound);
  await s.close(); // an ended session is left as it is
});

test("a fork has a copy of the workspace and goes on on its own", async () => {
  const s = await ctx.client.session("python");
  await s.upload("n.txt", "1");
  const f = await s.fork();
  assert.notEqual(f.id, s.id);
  assert.deepEqual([f.info["forked-from"], f.info.runs], [s.id, 0]);
  assert.equal((await f.run("open('n.txt', 'w').write('2')")).status, "ok");
  const text = async (x) => new TextDecoder().decode(await x.download("n.txt"));
  assert.deepEqual([await text(s), await text(f)], ["1", "2"]);
  await f.close();
  const live = await ctx.client.session("python", { mode: "live" });
  await live.run("x = 41");
  const info = await live.hibernate();
  assert.equal(info.state, "hibernated");
  assert.ok(info["image-bytes"] > 0);
  const g = await live.fork();
  const r = await g.run("print(x + 1)");
  assert.deepEqual([r.stdout, r.interpreter], ["42\n", "resumed"]);
  assert.ok(r.resumeMs > 0);
  const back = await live.run("print(x)");
  assert.deepEqual([back.stdout, back.interpreter], ["41\n", "resumed"]);
  await assert.rejects(s.hibernate(), (e) => e instanceof BadRequest && e.field === "mode");
  await g.close();
  await live.close();
  await s.close();
});

test("a live session keeps its variables; disposing of it ends it", async () => {
  // `await using s = ...` calls this at the block's end (the consumer test compiles one:
  // Node 20 runs the TypeScript compiler's output, not the syntax).
  const s = await ctx.client.session("python", { mode: "live" });
  const a = await s.run("x = 41\ndef f(a): return a + 1");
  assert.equal(a.interpreter, "started");
  const b = await s.run("print(f(x))");
  assert.deepEqual([b.stdout, b.interpreter], ["42\n", "kept"]);
  const c = await s.run("while True: pass", { limits: { wallTimeoutMs: 300 } });
  assert.deepEqual([c.status, c.interpreter], ["timeout", "restarted"]);
  const d = await s.run("print('x' in globals())");
  assert.deepEqual([d.stdout, d.interpreter], ["False\n", "started"]);
  await s[Symbol.asyncDispose]();
  await assert.rejects(s.refresh(), (e) => e instanceof SessionNotFound);
  const js = await ctx.client.session("javascript", { mode: "live" });
  await js.run("globalThis.n = 20");
  assert.equal((await js.run("console.log(n + 1)")).stdout, "21\n");
  await js.close();
});

test("an error inside a stream is thrown as its class", async () => {
  // A live session's interpreter holds its memory limit for its life: a run asking another is
  // refused inside the run, which streams (it has a tool), so the refusal is the stream's last
  // event, not an HTTP status. It is thrown as the HTTP refusal would be.
  const s = await ctx.client.session("python", { mode: "live" });
  const body = { code: "1", limits: { "memory-max-bytes": 50_000_000 }, tools: [{ name: "t" }] };
  const raw = await rawPost(ctx.server.socket, `/v1/sessions/${s.id}/runs?stream=ndjson`, body);
  assert.equal(raw.status, 200, raw.text);
  assert.equal(JSON.parse(raw.text.trim().split("\n").at(-1)).error.code, "bad-request", raw.text);
  const tools = { t: (a) => a };
  await assert.rejects(s.run("print(1)", { limits: { memoryMaxBytes: 50_000_000 }, tools }), (e) => {
    assert.ok(e instanceof BadRequest, `${e.name}: ${e.message}`);
    assert.deepEqual([e.status, e.code, e.field], [400, "bad-request", "limits.memory-max-bytes"]);
    assert.match(e.message, /live session/);
    return true;
  });
  // Nothing ran; the session goes on.
  assert.equal((await s.run("print(2)", { tools })).stdout, "2\n");
  await s.close();
});

test("one run at a time, and a session is its token's", async () => {
  const s = await ctx.client.session("python");
  const long = s.run("import time; time.sleep(1)");
  const end = Date.now() + 10_000;
  while ((await s.refresh()).running == null && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  const running = s.info.running;
  await assert.rejects(s.run("print(1)"), (e) => e instanceof SessionBusy && e.status === 409 && e.run === running);
  await long;
  const tcp = new Client({ url: ctx.server.url, token: ctx.server.token });
  const mine = await tcp.session("python", { idleTimeoutMs: 60_000 });
  assert.equal((await mine.run("print('mine')")).stdout, "mine\n");
  // The unix socket's clients do not reach a token's session; an unknown token reaches nothing.
  await assert.rejects(new Session(ctx.client, mine.info).run("1"), (e) => e instanceof SessionNotFound && e.status === 404);
  const unknown = new Client({ url: ctx.server.url, token: "a-token-the-server-does-not-know" });
  await assert.rejects(new Session(unknown, mine.info).refresh(), (e) => e instanceof Unauthorized && e.status === 403);
  unknown.close();
  await mine.close();
  tcp.close();
  await s.close();
});

test("a session's clock ends it", async () => {
  const s = await ctx.client.session("python", { idleTimeoutMs: 300 });
  await new Promise((r) => setTimeout(r, 900));
  await assert.rejects(s.run("1"), (e) => e instanceof SessionEnded && e.status === 410 && /idle/.test(e.message));
});
