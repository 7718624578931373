// Egress through the SDK against a real server whose python3 runtime's policy lists two servers
// of this process on loopback: a run reaches them (`result.egress` lists each connection),
// `egressAllow` narrows the list (what it left out is refused, never contacted), and a wider
// list is a `BadRequest` naming the entry.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { BadRequest, Client } from "stockade";
import { HAS_PYTHON3, ROOT, Server } from "./server.mjs";

const seen = { a: 0, b: 0 };
let hosts = [];
let server;
let client;
let listed;
let dir;

function host(name) {
  const s = http.createServer((req, res) => {
    seen[name] += 1;
    res.end(`from ${name}\n`);
  });
  return new Promise((resolve) => s.listen(0, "127.0.0.1", () => resolve(s)));
}

before(async () => {
  if (!HAS_PYTHON3) return;
  hosts = [await host("a"), await host("b")];
  listed = hosts.map((h) => `127.0.0.1:${h.address().port}`);
  dir = mkdtempSync(join(tmpdir(), "stockade-ts-egress-"));
  mkdirSync(join(dir, "policies"));
  const wrap = readFileSync(join(ROOT, "policies/examples/wrap-python.toml"), "utf8");
  writeFileSync(join(dir, "policies", "net.toml"), `${wrap}\n[network]\negress-allow = ${JSON.stringify(listed)}\n`);
  server = await Server.start({
    rest: `[policies]\ndir = "${join(dir, "policies")}"\n[runtimes.net]\nprogram = "/usr/bin/python3"\nbootstrap = "python"\npolicy = "net"\nwarm = 1\n`,
  });
  client = new Client({ socket: server.socket, token: server.token });
});

after(async () => {
  if (!HAS_PYTHON3) return;
  await server.stop();
  for (const h of hosts) h.close();
  rmSync(dir, { recursive: true, force: true });
});

const fetchAll = (list) =>
  `import urllib.request\nfor host in ${JSON.stringify(list)}:\n    try:\n        print(urllib.request.urlopen('http://' + host + '/ts').read().decode(), end='')\n    except Exception as e:\n        print('refused', e.code)\n`;

test("a run reaches its policy's list, a narrower one is kept, a wider one refused", { skip: !HAS_PYTHON3 && "no /usr/bin/python3" }, async () => {
  const r = await client.run("net", fetchAll(listed));
  assert.equal(r.stdout, "from a\nfrom b\n", r.stderr);
  assert.equal(r.egress?.allowed, 2);
  const before = seen.b;
  const narrowed = await client.run("net", fetchAll(listed), { egressAllow: [listed[0]] });
  assert.equal(narrowed.stdout, "from a\nrefused 403\n");
  assert.equal(narrowed.egress?.connections[1].refused, "not-listed");
  assert.equal(seen.b, before);
  await assert.rejects(client.run("net", "1", { egressAllow: ["pypi.org:443"] }), (e) => e instanceof BadRequest && e.field === "egress-allow[0]");
});
