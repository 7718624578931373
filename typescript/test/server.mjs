// A real `stockade serve` for the tests: the built binary, on a temporary unix socket and a
// loopback TCP port with a token. Never a mock.
//
// The binary is $STOCKADE_BIN, else the repository's target/debug/stockade (`cargo build` makes
// it); the guests come from $STOCKADE_GUEST_DIR or the usual places, as for `stockade run`.
import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as http from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before } from "node:test";
import { fileURLToPath } from "node:url";
import { Client } from "stockade";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const TOKEN = "ts-sdk-test-token-0123456789abcdef";
export const HAS_PYTHON3 = existsSync("/usr/bin/python3");

export function stockadeBin() {
  const b = process.env.STOCKADE_BIN || join(ROOT, "target", "debug", "stockade");
  if (!existsSync(b)) throw new Error(`${b} is missing: build it with \`cargo build\` (or set STOCKADE_BIN)`);
  return b;
}

/** A GET on a unix socket, by hand (node:http alone): its status and JSON. */
export function rawGet(socketPath, path) {
  return new Promise((resolve, reject) => {
    http
      .get({ socketPath, path }, (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode, body: JSON.parse(Buffer.concat(chunks).toString() || "null") }));
      })
      .on("error", reject);
  });
}

/** A POST of JSON on a unix socket, by hand (node:http alone): its status and its body's text. */
export function rawPost(socketPath, path, body) {
  return new Promise((resolve, reject) => {
    const data = Buffer.from(JSON.stringify(body));
    const headers = { "content-type": "application/json", "content-length": data.length };
    http
      .request({ socketPath, path, method: "POST", headers }, (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString() }));
      })
      .on("error", reject)
      .end(data);
  });
}

/** One running `stockade serve`; `socket`, `url` (TCP) and `token` reach it. */
export class Server {
  static async start({ server = "", rest = "" } = {}) {
    const s = new Server();
    s.dir = mkdtempSync(join(tmpdir(), "stockade-ts-"));
    s.socket = join(s.dir, "api.sock");
    s.token = TOKEN;
    const tokens = join(s.dir, "tokens");
    writeFileSync(tokens, `# the TypeScript SDK tests'\n${TOKEN}\n`);
    chmodSync(tokens, 0o600);
    const config = join(s.dir, "serve.toml");
    writeFileSync(
      config,
      "version = 1\n[server]\n" +
        `listen = ["unix:${s.socket}", "tcp:127.0.0.1:0"]\n` +
        `tokens-file = "${tokens}"\n${server}\n` +
        '[runtimes.python]\nguest = "python"\nwarm = 1\n' +
        '[runtimes.javascript]\nguest = "javascript"\nwarm = 1\n' +
        (HAS_PYTHON3 ? '[runtimes.python3]\nprogram = "/usr/bin/python3"\nbootstrap = "python"\npolicy = "wrap-python"\nwarm = 0\n' : "") +
        `${rest}\n`,
    );
    s.log = [];
    // Its own state directory: one server at a time may hold one.
    s.proc = spawn(stockadeBin(), ["serve", config, "--state-dir", join(s.dir, "state")], { stdio: ["ignore", "ignore", "pipe"] });
    s.exited = new Promise((resolve) => s.proc.on("exit", (code, signal) => resolve({ code, signal })));
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the server did not start:\n${s.log.join("\n")}`)), 60_000);
      let pending = "";
      s.proc.stderr.on("data", (chunk) => {
        pending += chunk.toString();
        let nl;
        while ((nl = pending.indexOf("\n")) >= 0) {
          const line = pending.slice(0, nl);
          pending = pending.slice(nl + 1);
          s.log.push(line);
          const m = /tcp:(127\.0\.0\.1:\d+)/.exec(line);
          if (line.includes("listening on") && m) {
            s.url = `http://${m[1]}`;
            clearTimeout(timer);
            resolve();
          }
        }
      });
      s.proc.on("exit", () => reject(new Error(`the server ended:\n${s.log.join("\n")}`)));
    });
    await s.waitWarm();
    return s;
  }

  /** Until every warm pool is full (the runs then take warm jails). */
  async waitWarm() {
    const end = Date.now() + 60_000;
    while (Date.now() < end) {
      const h = (await rawGet(this.socket, "/v1/health")).body;
      if (Object.values(h.warm ?? {}).every((w) => w.ready >= w.target)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error("the warm pools did not fill");
  }

  /** Stops it (SIGTERM) and checks it ended cleanly, leaving no socket. */
  async stop() {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill("SIGTERM");
    const { code } = await this.exited;
    const left = existsSync(this.socket);
    rmSync(this.dir, { recursive: true, force: true });
    if (code !== 0) throw new Error(`the server ended with ${code}:\n${this.log.join("\n")}`);
    if (left) throw new Error("the server left its socket");
  }
}

/** A WASI module whose `_start` calls `proc_exit(7)`. */
export const EXIT_7_WASM = Buffer.concat([
  Buffer.from("0061736d01000000", "hex"),
  Buffer.from("010802" + "60017f00" + "600000", "hex"),
  Buffer.from("02240116", "hex"),
  Buffer.from("wasi_snapshot_preview1"),
  Buffer.from([0x09]),
  Buffer.from("proc_exit"),
  Buffer.from("0000", "hex"),
  Buffer.from("03020101", "hex"),
  Buffer.from("0503010001", "hex"),
  Buffer.from("07130206", "hex"),
  Buffer.from("memory"),
  Buffer.from("020006", "hex"),
  Buffer.from("_start"),
  Buffer.from("0001", "hex"),
  Buffer.from("0a0801060041071000" + "0b", "hex"),
]);

/**
 * The server a test file's tests share (started before them, stopped and checked after them),
 * and a client of it on its unix socket: `ctx.server`, `ctx.client`.
 */
export function sharedServer(options = { server: "concurrency = 2\nqueue = 8" }) {
  const ctx = {};
  before(async () => {
    ctx.server = await Server.start(options);
    ctx.client = new Client({ socket: ctx.server.socket });
  });
  after(async () => {
    ctx.client?.close();
    await ctx.server?.stop();
  });
  return ctx;
}
