// The playground in a real browser: Debian's Chromium, headless, driven by puppeteer-core, against
// a real `stockade serve --ui` built from this repository (never a mock). It loads the page, gives
// it the token it asks for, types code and runs it (Ctrl-Enter), sees its output, value and the
// report's layers, a refused limit's message, a live session's second run seeing the first's
// variable, a fork, a PNG figure drawn by the host's python3 with matplotlib, and takes a
// screenshot whose size it checks. The page must log no error and break no CSP rule.
//
// The binary is $STOCKADE_BIN, else target/debug/stockade; the guests come from
// $STOCKADE_GUEST_DIR; Chromium is $CHROMIUM, else /usr/bin/chromium (`apt-get install chromium`).
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import puppeteer from "puppeteer-core";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const TOKEN = "playground-test-token-0123456789abcdef";
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const SHOT = join(ROOT, "target", "playground.png");

let server;
let browser;
let page;
const problems = [];

async function startServer() {
  const bin = process.env.STOCKADE_BIN || join(ROOT, "target", "debug", "stockade");
  assert.ok(existsSync(bin), `${bin} is missing: build it with \`cargo build\` (or set STOCKADE_BIN)`);
  const dir = mkdtempSync(join(tmpdir(), "stockade-ui-"));
  const tokens = join(dir, "tokens");
  writeFileSync(tokens, `${TOKEN}\n`);
  chmodSync(tokens, 0o600);
  // A policy with one layer off (the UTS namespace), for a report with a layer not enforced.
  const policies = join(dir, "policies");
  mkdirSync(policies);
  const strict = execFileSync(bin, ["policy", "default"]).toString();
  assert.match(strict, /\nuts = true\n/);
  writeFileSync(join(policies, "no-uts.toml"), strict.replace("\nuts = true\n", "\nuts = false\n"));
  const config = join(dir, "serve.toml");
  writeFileSync(
    config,
    "version = 1\n[server]\n" +
      `listen = ["tcp:127.0.0.1:0"]\ntokens-file = "${tokens}"\nui = true\n` +
      `[policies]\ndir = "${policies}"\n` +
      '[runtimes.python-no-uts]\nguest = "python"\npolicy = "no-uts"\nwarm = 0\n' +
      '[runtimes.python]\nguest = "python"\nwarm = 1\n' +
      '[runtimes.javascript]\nguest = "javascript"\nwarm = 0\n' +
      '[runtimes.python3]\nprogram = "/usr/bin/python3"\nbootstrap = "python"\npolicy = "wrap-python"\nwarm = 0\n',
  );
  const proc = spawn(bin, ["serve", config, "--state-dir", join(dir, "state")], { stdio: ["ignore", "ignore", "pipe"] });
  const log = [];
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not start:\n${log.join("")}`)), 60_000);
    proc.stderr.on("data", (chunk) => {
      log.push(chunk.toString());
      const m = log.join("").match(/the playground: (http:\/\/127\.0\.0\.1:\d+\/)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    proc.on("exit", (code) => reject(new Error(`the server exited (${code}):\n${log.join("")}`)));
  });
  return { proc, dir, url, log };
}

before(async () => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install chromium (or set CHROMIUM)`);
  server = await startServer();
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    // As root (CI) Chromium's own sandbox cannot start; this test trusts the page it loads.
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
  });
  page = await browser.newPage();
  await page.setViewport({ width: 1400, height: 1000 });
  // The API's refusals (the token asked for, the looser limit) are answers the page shows, not
  // problems; Chromium logs them as failed loads.
  const refusal = /^Failed to load resource: the server responded with a status of 40[013]/;
  page.on("console", (m) => m.type() === "error" && !refusal.test(m.text()) && problems.push(`console: ${m.text()}`));
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  // Chromium calls a 204 (a session ended) aborted once it is answered: only a request with no
  // answer failed.
  page.on("requestfailed", (r) => r.response() || problems.push(`request failed: ${r.method()} ${r.url()} ${r.failure()?.errorText}`));
});

after(async () => {
  await browser?.close();
  if (server) {
    server.proc.kill("SIGTERM");
    await new Promise((resolve) => server.proc.once("exit", resolve));
    rmSync(server.dir, { recursive: true, force: true });
  }
});

const text = (sel) => page.$eval(sel, (e) => e.textContent);

async function runCode(code) {
  await page.$eval("#code", (e) => {
    e.value = "";
  });
  await page.type("#code", code);
  const before = await text("#status");
  await page.focus("#code");
  await page.keyboard.down("Control");
  await page.keyboard.press("Enter");
  await page.keyboard.up("Control");
  await page.waitForFunction(
    (prev) => {
      const s = document.getElementById("status").textContent;
      return s !== "running…" && s !== prev;
    },
    { timeout: 60_000 },
    before,
  );
}

test("the page asks for the token, then runs code and lays out its answer", async () => {
  const r = await page.goto(server.url, { waitUntil: "networkidle0" });
  assert.equal(r.status(), 200);
  assert.match(r.headers()["content-security-policy"], /default-src 'none'; script-src 'self'/);
  // No token yet: the page asks for one, and keeps it for the tab.
  await page.waitForSelector("#token-form", { visible: true });
  await page.type("#token", TOKEN);
  await page.click("#token-form button");
  await page.waitForFunction(() => document.querySelectorAll("#runtime option").length >= 4);
  await page.waitForSelector("#token-form", { hidden: true });
  const runtimes = await page.$$eval("#runtime option", (os) => os.map((o) => o.value));
  assert.deepEqual(runtimes.sort(), ["javascript", "python", "python-no-uts", "python3"]);
  assert.equal(await page.evaluate(() => sessionStorage.getItem("stockade-token")), TOKEN);

  await page.select("#runtime", "python");
  await runCode("print(6 * 7)\n[1, 2] + [3]");
  assert.match(await text("#status"), /^ok: exit 0/);
  assert.equal(await text("#stdout"), "42\n");
  await page.waitForSelector("#error", { hidden: true });
  assert.equal(JSON.parse(await text("#value")).join(","), "1,2,3");
  const layers = await page.$$eval("#layers tbody tr", (rows) => rows.map((r) => r.firstChild.textContent));
  assert.ok(layers.includes("namespace.user") && layers.includes("seccomp") && layers.includes("landlock"), `${layers}`);
  // The server's figures came from /metrics.
  await page.waitForFunction(() => /runs/.test(document.getElementById("figures").textContent), { timeout: 15_000 });
  assert.match(await text("#health"), /^ok/);
});

test("a layer the policy turns off is a red row of the layers table", async () => {
  await page.select("#runtime", "python-no-uts");
  assert.match(await text("#policy"), /^policy no-uts: wall 10000 ms/);
  await runCode("print('uts')");
  assert.match(await text("#status"), /^ok/);
  const off = await page.$$eval("#layers tbody tr.not", (rows) =>
    rows.map((r) => [r.firstChild.textContent, getComputedStyle(r.firstChild).color]),
  );
  assert.deepEqual(off.map(([layer]) => layer), ["namespace.uts", "hostname"], "the hostname needs its own UTS namespace");
  assert.equal(off[0][1], "rgb(179, 38, 30)", "shown in red");
  assert.equal(await page.$$eval("#layers tbody tr:not(.not)", (rows) => rows.length > 10), true);
  await page.select("#runtime", "python");
});

test("a limit looser than the policy's is refused, its message shown", async () => {
  await page.type("#wall", "999999");
  await runCode("print('never')");
  assert.equal(await text("#status"), "refused");
  const error = await text("#error");
  assert.match(error, /^400 bad-request \(limits\.wall-timeout-ms\): .*999999.*10000/);
  await page.waitForSelector("#error", { visible: true });
  await page.$eval("#wall", (e) => {
    e.value = "";
  });
});

test("a live session's second run sees the first's variable; its files list, and it forks", async () => {
  await page.select("#mode", "live");
  await runCode("x = 41\nopen('note.txt', 'w').write('kept')");
  assert.match(await text("#status"), /^ok/);
  await page.waitForSelector("#session", { visible: true });
  const first = await text("#session-id");
  assert.match(first, /^live session s-[0-9a-f]+$/);
  await runCode("x + 1");
  assert.equal(await text("#value"), "42");
  await page.waitForFunction(() => /note\.txt/.test(document.querySelector("#files tbody").textContent));
  // A file uploaded from the page is in the workspace of the next run.
  const file = join(server.dir, "data.txt");
  writeFileSync(file, "uploaded from the page");
  await (await page.$("#upload")).uploadFile(file);
  await page.waitForFunction(() => /data\.txt/.test(document.querySelector("#files tbody").textContent));
  await runCode("open('data.txt').read()");
  assert.equal(await text("#value"), '"uploaded from the page"');
  await page.click("#fork");
  await page.waitForFunction((f) => document.getElementById("session-id").textContent !== f, {}, first);
  assert.match(await text("#session-note"), /forked from s-/);
  await runCode("x * 2");
  assert.equal(await text("#value"), "82");
  await page.click("#end");
  await page.waitForSelector("#session", { hidden: true });
  await page.select("#mode", "run");
});

test("a figure drawn with matplotlib by the host's python3 shows as an image", async () => {
  await page.select("#runtime", "python3");
  await runCode("import matplotlib.pyplot as plt\nplt.plot([1, 4, 2, 8])\nplt.title('drawn in the jail')\nprint('drawn')");
  assert.match(await text("#status"), /^ok/);
  assert.equal(await text("#stdout"), "drawn\n");
  await page.waitForFunction(() => {
    const img = document.querySelector("#outputs img");
    return img && img.complete && img.naturalWidth > 100;
  });
  const src = await page.$eval("#outputs img", (i) => i.src.slice(0, 22));
  assert.equal(src, "data:image/png;base64,");
});

test("a screenshot of the page, and nothing broke on it", async () => {
  await page.screenshot({ path: SHOT, fullPage: true });
  const png = readFileSync(SHOT);
  assert.equal(png.subarray(1, 4).toString(), "PNG");
  assert.ok(statSync(SHOT).size > 40_000, `the screenshot is ${statSync(SHOT).size} bytes`);
  assert.deepEqual(problems, []);
});
