// A lost answer, a hostile or broken server: what the SDK does about them. The run's server is
// the real one (test/server.mjs); what stands between (a proxy that drops an answer, or closes a
// kept-alive connection after reading a run) or instead of it (a server that trickles, one that
// sends a path for an id) is a socket of the test's own, playing the broken part.
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { Client, ServerUnavailable, StockadeError } from "stockade";
import { sharedServer } from "./server.mjs";

const ctx = sharedServer();

/** A unix socket server at a new path, each connection handled by `handle(conn, n)`. */
function serve(handle) {
  const path = join(mkdtempSync(join(tmpdir(), "stockade-ts-broken-")), "s.sock");
  let n = 0;
  const srv = net.createServer((conn) => handle(conn, n++));
  return new Promise((resolve) => srv.listen(path, () => resolve({ path, close: () => srv.close() })));
}

/** Reads one HTTP request (its head and its Content-Length of body) from `conn`. */
function readRequest(conn) {
  return new Promise((resolve) => {
    let data = Buffer.alloc(0);
    const onData = (c) => {
      data = Buffer.concat([data, c]);
      const end = data.indexOf("\r\n\r\n");
      if (end < 0) return;
      const m = /content-length:\s*(\d+)/i.exec(data.subarray(0, end).toString());
      if (data.length >= end + 4 + Number(m ? m[1] : 0)) {
        conn.off("data", onData);
        resolve(data);
      }
    };
    conn.on("data", onData);
  });
}

/** Sends `req` to the real server and reads its whole answer (the connection closed after it). */
function forward(socket, req) {
  return new Promise((resolve, reject) => {
    const up = net.connect(socket);
    const chunks = [];
    up.on("data", (c) => chunks.push(c));
    up.on("end", () => resolve(Buffer.concat(chunks)));
    up.on("error", reject);
    // Not half-closed: a client that ends its side is one that went.
    up.write(Buffer.from(req.toString("latin1").replace(/keep-alive/gi, "close"), "latin1"));
  });
}

/** The runs the server counted. */
async function runs() {
  const text = (await ctx.client._request("GET", "/metrics", undefined, undefined)).body.toString();
  return text
    .split("\n")
    .filter((l) => l.startsWith("stockade_runs_total{"))
    .reduce((sum, l) => sum + Number(l.split(" ").pop()), 0);
}

/**
 * A proxy to the real server whose connections answer their first request (kept alive), then
 * read the next and close without its answer, as a server that read a request and let a
 * kept-alive connection go does. `lost` gets what the server answered to those.
 */
async function dropsTheSecond(lost, seen) {
  return serve(async (conn) => {
    for (let k = 0; ; k++) {
      const req = await readRequest(conn);
      seen.push(req.toString().split("\r\n")[0]);
      const answer = await forward(ctx.server.socket, req);
      if (k === 1 && lost.length === 0) {
        lost.push(answer);
        conn.destroy();
        return;
      }
      // Kept alive toward the client, whatever the server said of its own connection.
      conn.write(Buffer.from(answer.toString("latin1").replace(/\r\nconnection: close/i, ""), "latin1"));
    }
  });
}

test("a run sent on a kept-alive connection closed after it was read is asked again with its key and runs once", async () => {
  const [lost, seen] = [[], []];
  const proxy = await dropsTheSecond(lost, seen);
  const before = await runs();
  const c = new Client({ socket: proxy.path });
  try {
    await c.health();
    const r = await c.runPython("import random\nprint(random.random())");
    assert.equal(lost.length, 1, "the proxy lost one answer");
    const firstOut = /"text":"([0-9.]+\\n)"/.exec(lost[0].toString());
    assert.ok(firstOut, lost[0].toString().slice(0, 300));
    assert.equal(JSON.stringify(r.stdout).slice(1, -1), firstOut[1], "the answer is the first run's");
    assert.equal((await runs()) - before, 1, "the run happened once");
    assert.equal(seen.filter((l) => l.startsWith("POST /v1/runs")).length, 2, "asked twice, run once");
  } finally {
    c.close();
    proxy.close();
  }
});

test("a streamed run is never sent again once it may have reached the server", async () => {
  // A streamed run carries no key: a kept-alive connection closed after it was read is an
  // error, not a second run.
  const [lost, seen] = [[], []];
  const proxy = await dropsTheSecond(lost, seen);
  const before = await runs();
  const c = new Client({ socket: proxy.path });
  try {
    await c.health();
    await assert.rejects(async () => {
      for await (const _ of c.stream("python", "print(1)"));
    }, ServerUnavailable);
    assert.equal(seen.filter((l) => l.startsWith("POST /v1/runs")).length, 1, "sent once");
    assert.equal((await runs()) - before, 1);
  } finally {
    c.close();
    proxy.close();
  }
});

test("an answer that trickles is bounded by timeoutMs", async () => {
  const slow = await serve(async (conn) => {
    await readRequest(conn);
    conn.write("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n");
    const t = setInterval(() => (conn.destroyed ? clearInterval(t) : conn.write(" ")), 200);
    conn.on("close", () => clearInterval(t));
  });
  const c = new Client({ socket: slow.path, timeoutMs: 1500 });
  const t0 = Date.now();
  try {
    await assert.rejects(c.runPython("print(1)"), (e) => e instanceof ServerUnavailable && /timeout/.test(e.message));
    assert.ok(Date.now() - t0 < 4000, `held ${Date.now() - t0} ms`);
  } finally {
    c.close();
    slow.close();
  }
});

test("a session id that is not one never becomes a request's path", async () => {
  const seen = [];
  const hostile = await serve(async (conn) => {
    const req = await readRequest(conn);
    seen.push(req.toString().split("\r\n")[0]);
    const body = JSON.stringify({ id: "../../v1/runs?x=", runtime: "python", mode: "workspace" });
    conn.end(`HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
  });
  const c = new Client({ socket: hostile.path, retries: 0 });
  try {
    await assert.rejects(c.session("python"), (e) => e instanceof StockadeError && /session id/.test(e.message));
    assert.deepEqual(seen, ["POST /v1/sessions HTTP/1.1"]);
  } finally {
    c.close();
    hostile.close();
  }
});
