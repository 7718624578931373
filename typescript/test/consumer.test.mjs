// The package as a project that has never seen this repository gets it: `npm pack`, installed
// from the tarball into a fresh project (offline: it needs nothing else), imported from ESM and
// from CommonJS, a TypeScript file using it type-checked with --strict and run (`await using`
// included); and the quick starts of typescript/README.md and the README run verbatim against a
// server started as the README starts it (the shipped defaults on ~/api.sock); and stockade/ai:
// absent `ai` only it fails, with `ai` it imports from both, and the README's example type-checks.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { ROOT, rawGet, stockadeBin } from "./server.mjs";

const SDK = join(ROOT, "typescript");
let home;
let server;
let project;

function npm(args, cwd) {
  return execFileSync("npm", args, { cwd, encoding: "utf8", env: { ...process.env, npm_config_update_notifier: "false" } });
}

function node(args, cwd) {
  return execFileSync(process.execPath, args, { cwd, encoding: "utf8", env: { ...process.env, HOME: home }, timeout: 60_000 });
}

before(async () => {
  home = mkdtempSync(join(tmpdir(), "stockade-ts-home-"));
  server = spawn(stockadeBin(), ["serve", "--listen", `unix:${home}/api.sock`], {
    env: { ...process.env, HOME: home },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const end = Date.now() + 60_000;
  for (;;) {
    try {
      if ((await rawGet(join(home, "api.sock"), "/v1/health")).body.status === "ok") break;
    } catch {}
    assert.ok(Date.now() < end && server.exitCode === null, "the server did not start");
    await new Promise((r) => setTimeout(r, 100));
  }
  project = join(home, "consumer");
  execFileSync("mkdir", ["-p", project]);
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  npm(["pack", "--pack-destination", home], SDK);
  const tarball = readdirSync(home).find((f) => f.endsWith(".tgz"));
  assert.ok(tarball, "npm pack made a tarball");
  npm(["install", "--offline", "--no-audit", "--no-fund", join(home, tarball)], project);
});

after(async () => {
  server?.kill("SIGTERM");
  await new Promise((r) => (server?.exitCode !== null ? r() : server.on("exit", r)));
  rmSync(home, { recursive: true, force: true });
});

test("the tarball holds the builds and the types, nothing else of the repository", () => {
  const listed = JSON.parse(npm(["pack", "--dry-run", "--json", "--ignore-scripts"], SDK))[0].files.map((f) => f.path);
  const built = ["index", "ai"].flatMap((m) => ["esm", "cjs"].flatMap((d) => [`dist/${d}/${m}.js`, `dist/${d}/${m}.d.ts`]));
  for (const f of ["package.json", "README.md", ...built]) {
    assert.ok(listed.includes(f), `${f} in ${listed}`);
  }
  assert.ok(!listed.some((f) => f.startsWith("src/") || f.startsWith("test/") || f.startsWith("scripts/")), `${listed}`);
  const pkg = JSON.parse(readFileSync(join(project, "node_modules", "stockade", "package.json"), "utf8"));
  assert.deepEqual(Object.keys(pkg.dependencies ?? {}), [], "no runtime dependency");
  assert.deepEqual([Object.keys(pkg.peerDependencies), pkg.peerDependenciesMeta.ai.optional], [["ai"], true]);
});

test("imported from ESM and from CommonJS", () => {
  writeFileSync(
    join(project, "esm.mjs"),
    'import { Client, BadRequest } from "stockade";\nimport { homedir } from "node:os";\n' +
      'const c = new Client({ socket: `${homedir()}/api.sock` });\n' +
      'const r = await c.runJs("console.log(6 * 7)");\n' +
      'try { await c.runPython("1", { limits: { wallTimeoutMs: 1e9 } }); } catch (e) { console.log(e instanceof BadRequest, e.field); }\n' +
      "console.log(r.stdout.trim()); c.close();\n",
  );
  assert.equal(node(["esm.mjs"], project), "true limits.wall-timeout-ms\n42\n");
  writeFileSync(
    join(project, "cjs.cjs"),
    'const { Client, RunResult } = require("stockade");\nconst { homedir } = require("node:os");\n' +
      'const c = new Client({ socket: `${homedir()}/api.sock` });\n' +
      'c.runPython("print(7 * 6)").then((r) => { console.log(r instanceof RunResult, r.stdout.trim()); c.close(); });\n',
  );
  assert.equal(node(["cjs.cjs"], project), "true 42\n");
});

test("a TypeScript file type-checks with --strict and runs", () => {
  const ts = `import { Client, RunResult, StockadeError, type StreamEvent, type Limits, type BatchInput, BatchResult, type Verdict } from "stockade";
import { homedir } from "node:os";

const client = new Client({ socket: \`\${homedir()}/api.sock\` });
const limits: Limits = { wallTimeoutMs: 5000 };
const r: RunResult = await client.runPython("print(6 * 7)", { limits });
const code: number | null = r.exitCode;
{
  await using s = await client.session("python", { mode: "live" });
  await s.run("x = 41");
  const again = await s.run("print(x + 1)");
  console.log(r.stdout.trim(), code, again.stdout.trim(), again.interpreter);
}
const events: StreamEvent[] = [];
for await (const ev of client.streamJs("console.log('s')")) events.push(ev);
const done = events.at(-1);
if (done?.type === "result") console.log(done.result.stdout.trim());
const answered = await client.runJs("console.log(host.call('up', 'ok'))", {
  tools: { up: async (t: unknown) => String(t).toUpperCase() },
});
console.log(answered.stdout.trim(), answered.hostCalls[0]?.outcome);
const inputs: BatchInput[] = [{ stdin: "1", expect: "2" }, { stdin: "2", expect: "5" }];
const judged: BatchResult = await client.batch({ runtime: "python", code: "print(int(input()) * 2)", inputs });
const verdict: Verdict | null = judged.results[1]?.verdict ?? null;
const batch = client.batchStream({ runtime: "javascript", runs: [{ code: "console.log(1)", expect: "1" }] });
for await (const { index, result } of batch) console.log(index, result.stdout.trim(), result.verdict);
console.log(judged.verdicts.join(), verdict, batch.summary?.runs);
try {
  await client.runPython("1", { policy: "none-such" });
} catch (e) {
  if (e instanceof StockadeError) console.log(e.name, e.status);
}
client.close();
`;
  writeFileSync(join(project, "main.ts"), ts);
  const tsc = join(SDK, "node_modules", "typescript", "bin", "tsc");
  execFileSync(
    process.execPath,
    [tsc, "--strict", "--target", "ES2022", "--lib", "ES2022,ESNext.Disposable", "--module", "NodeNext", "--moduleResolution", "NodeNext",
      "--types", "node", "--typeRoots", join(SDK, "node_modules", "@types"), "--outDir", "out", "main.ts"],
    { cwd: project, encoding: "utf8" },
  );
  // A mistake in a consumer's use is caught by the types.
  writeFileSync(join(project, "bad.ts"), 'import { Client } from "stockade";\nnew Client().runPython("1", { limits: { wallTimeout: 5 } });\n');
  assert.throws(
    () => execFileSync(process.execPath, [tsc, "--strict", "--noEmit", "--module", "NodeNext", "--moduleResolution", "NodeNext",
      "--types", "node", "--typeRoots", join(SDK, "node_modules", "@types"), "bad.ts"], { cwd: project, encoding: "utf8" }),
    (e) => /wallTimeout/.test(e.stdout),
  );
  assert.equal(node([join("out", "main.js")], project), "42 0 42 kept\ns\nOK ok\n0 1 accepted\naccepted,wrong-answer wrong-answer 1\nPolicyNotFound 404\n");
});

test("the quick starts run verbatim", () => {
  for (const readme of [join(SDK, "README.md"), join(ROOT, "README.md")]) {
    const m = /```js\n([\s\S]*?)```/.exec(readFileSync(readme, "utf8"));
    assert.ok(m, `no js block in ${readme}`);
    writeFileSync(join(project, "quick.mjs"), m[1]);
    assert.match(node(["quick.mjs"], project), /^ok 42 /, readme);
  }
});

test("stockade/ai: without ai only it fails; with ai it imports from both and the README's example type-checks", () => {
  // The consumer has no `ai` (an optional peer dependency is not installed): the core is whole.
  writeFileSync(join(project, "noai.mjs"), 'import("stockade/ai").catch((e) => console.log(e.code, /\'ai\'/.test(e.message)));\n');
  assert.equal(node(["noai.mjs"], project), "ERR_MODULE_NOT_FOUND true\n");
  // The SDK's own `ai` (its devDependency), linked in: nothing fetched.
  symlinkSync(join(SDK, "node_modules", "ai"), join(project, "node_modules", "ai"), "dir");
  writeFileSync(
    join(project, "ai.mjs"),
    'import { stockadeTool } from "stockade/ai";\nimport { Client } from "stockade";\nimport { homedir } from "node:os";\n' +
      'const c = new Client({ socket: `${homedir()}/api.sock` });\n' +
      'const r = await stockadeTool(c).execute({ code: "print(6 * 7)\\n6 * 7" }, { toolCallId: "1", messages: [] });\n' +
      "console.log(r.status, r.stdout.trim(), r.value); c.close();\n",
  );
  assert.equal(node(["ai.mjs"], project), "ok 42 42\n");
  writeFileSync(join(project, "ai.cjs"), 'const { stockadeTools } = require("stockade/ai");\nconsole.log(typeof stockadeTools);\n');
  assert.equal(node(["ai.cjs"], project), "function\n");
  const m = /## Vercel AI SDK[\s\S]*?```ts\n([\s\S]*?)```/.exec(readFileSync(join(SDK, "README.md"), "utf8"));
  assert.ok(m, "no ts block in the README's Vercel AI SDK section");
  writeFileSync(join(project, "ai-readme.ts"), m[1]);
  // --skipLibCheck: `ai`'s own declarations name the DOM's types (a consumer's usual setting).
  const tsc = join(SDK, "node_modules", "typescript", "bin", "tsc");
  execFileSync(
    process.execPath,
    [tsc, "--strict", "--noEmit", "--skipLibCheck", "--target", "ES2022", "--module", "NodeNext", "--moduleResolution", "NodeNext",
      "--types", "node", "--typeRoots", join(SDK, "node_modules", "@types"), "ai-readme.ts"],
    { cwd: project, encoding: "utf8" },
  );
});
