// The playground: a client of the API on its own origin, like any other. Everything it shows is
// put in as text (textContent), never as markup; figures are images of checked PNG base64.
"use strict";

const $ = (id) => document.getElementById(id);
const MIB = 1024 * 1024;
const TOKEN_KEY = "stockade-token";
const state = { token: sessionStorage.getItem(TOKEN_KEY), info: null, session: null, busy: false };

const EXAMPLES = {
  python: "import sys\nprint('hello from', sys.platform)\nsquares = [n * n for n in range(10)]\nsum(squares)",
  python3:
    "import matplotlib.pyplot as plt\nplt.plot([1, 4, 2, 8])\nplt.title('drawn in the jail')\nprint('a figure')",
  javascript: "const squares = [...Array(10).keys()].map((n) => n * n);\nconsole.log('hello');\nsquares.reduce((a, b) => a + b)",
};

class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

// A token given in the address's fragment (`stockade serve --ui` prints one) is kept for the tab
// and taken out of the address, so that it is neither bookmarked nor shown.
function tokenFromFragment() {
  const m = location.hash.match(/^#token=([0-9A-Za-z._~+\/=-]{1,512})$/);
  if (!m) return;
  state.token = m[1];
  sessionStorage.setItem(TOKEN_KEY, m[1]);
  history.replaceState(null, "", location.pathname + location.search);
}

async function api(method, path, { json, body, raw } = {}) {
  const headers = {};
  if (state.token) headers.authorization = `Bearer ${state.token}`;
  let payload = body;
  if (json !== undefined) {
    headers["content-type"] = "application/json";
    payload = JSON.stringify(json);
  } else if (body !== undefined) {
    headers["content-type"] = "application/octet-stream";
  }
  const r = await fetch(path, { method, headers, body: payload, cache: "no-store", credentials: "omit" });
  if (!r.ok) {
    let e = {};
    try {
      e = (await r.json()).error || {};
    } catch (_) {
      /* not JSON: the status says it */
    }
    if (r.status === 401 || r.status === 403) askToken(e.message);
    throw new ApiError(r.status, e.code || String(r.status), e.message || r.statusText, e.field);
  }
  if (raw) return r;
  if (r.status === 204) return null;
  return (r.headers.get("content-type") || "").includes("json") ? r.json() : r.text();
}

function askToken(why) {
  const form = $("token-form");
  form.hidden = false;
  if (why) form.querySelector("p").textContent = `${why}. It is kept for this tab only (sessionStorage).`;
  $("token").focus();
}

function showError(e) {
  const box = $("error");
  box.hidden = false;
  const field = e.field ? ` (${e.field})` : "";
  box.textContent = e instanceof ApiError ? `${e.status} ${e.code}${field}: ${e.message}` : String(e);
}

function clearError() {
  $("error").hidden = true;
  $("error").textContent = "";
}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (cls) node.className = cls;
  return node;
}

// --- the server: its runtimes, policies, health and a few figures -------------------------

async function loadInfo() {
  state.info = await api("GET", "/v1/info");
  $("token-form").hidden = true;
  const select = $("runtime");
  select.replaceChildren();
  for (const rt of state.info.runtimes) {
    if (rt.kind === "wasm-module") continue; // a module's bytes, not code typed here
    const opt = el("option", rt.available ? rt.name : `${rt.name} (unavailable)`);
    opt.value = rt.name;
    opt.disabled = !rt.available;
    select.append(opt);
  }
  onRuntime();
}

function runtimeInfo() {
  return state.info?.runtimes.find((r) => r.name === $("runtime").value);
}

function policyLimits() {
  const rt = runtimeInfo();
  const p = rt && state.info.policies.find((x) => x.name === rt.policy);
  return (p && p.limits) || {};
}

function onRuntime() {
  const rt = runtimeInfo();
  const limits = policyLimits();
  $("wall").placeholder = limits["wall-timeout-ms"] ?? "";
  $("memory").placeholder = limits["memory-max-bytes"] ? Math.floor(limits["memory-max-bytes"] / MIB) : "";
  $("policy").textContent = rt
    ? `policy ${rt.policy}: wall ${limits["wall-timeout-ms"]} ms, memory ${Math.floor(
        (limits["memory-max-bytes"] || 0) / MIB,
      )} MiB, ${limits["pids-max"]} processes; limits may only be tightened`
    : "";
  const code = $("code");
  if (!code.value.trim() || Object.values(EXAMPLES).includes(code.value)) {
    code.value = EXAMPLES[rt?.name] || EXAMPLES[rt?.runs?.guest] || "";
  }
}

async function refreshHealth() {
  const box = $("health");
  try {
    const r = await fetch("/v1/health", { cache: "no-store", credentials: "omit" });
    const h = await r.json();
    box.textContent = `${h.status} · running ${h.running} · queued ${h.queued}`;
    box.classList.toggle("bad", h.status !== "ok");
  } catch (e) {
    box.textContent = "not answering";
    box.classList.add("bad");
  }
  if (!state.info) return;
  try {
    showFigures(await api("GET", "/metrics"));
  } catch (_) {
    /* a token problem is shown by its form */
  }
}

// Sums each family's samples: the text is the server's OpenMetrics.
function sums(text) {
  const out = {};
  for (const line of text.split("\n")) {
    const m = line.match(/^([a-z_]+)(?:\{[^}]*\})? ([0-9.eE+-]+)$/);
    if (m) out[m[1]] = (out[m[1]] || 0) + Number(m[2]);
  }
  return out;
}

function showFigures(text) {
  const s = sums(text);
  const shown = [
    ["runs", s.stockade_runs_total],
    ["batch runs", s.stockade_batch_runs_total],
    ["running", s.stockade_running],
    ["queued", s.stockade_queue_depth],
    ["warm", s.stockade_warm_ready],
    ["sessions", s.stockade_sessions_open],
  ];
  const dl = $("figures");
  dl.replaceChildren();
  for (const [name, v] of shown) {
    if (v === undefined) continue;
    const div = el("div");
    div.append(el("dt", name), el("dd", String(Math.round(v))));
    dl.append(div);
  }
}

// --- running -------------------------------------------------------------------------------

function limits() {
  const out = {};
  const wall = $("wall").value.trim();
  const memory = $("memory").value.trim();
  if (wall) out["wall-timeout-ms"] = Number(wall);
  if (memory) out["memory-max-bytes"] = Math.round(Number(memory) * MIB);
  return Object.keys(out).length ? out : undefined;
}

async function run() {
  if (state.busy) return;
  state.busy = true;
  $("run").disabled = true;
  $("status").textContent = "running…";
  $("status").className = "status";
  clearError();
  try {
    const mode = $("mode").value;
    const body = { code: $("code").value, limits: limits() };
    let result;
    if (mode === "run") {
      result = await api("POST", "/v1/runs", { json: { runtime: $("runtime").value, ...body } });
    } else {
      await ensureSession(mode);
      result = await api("POST", `/v1/sessions/${state.session.id}/runs`, { json: body });
      state.session.runs += 1;
    }
    show(result);
    if (state.session) await refreshSession();
  } catch (e) {
    $("status").textContent = "refused";
    $("status").className = "status failed";
    showError(e);
  } finally {
    state.busy = false;
    $("run").disabled = false;
  }
}

function reason(r) {
  switch (r.status) {
    case "ok":
      return "exit 0";
    case "exited-nonzero":
      return `exit code ${r["exit-code"] ?? r["guest-exit-code"]}`;
    case "timeout":
      return `past its wall clock (${r["wall-timeout-ms"]} ms)`;
    case "oom":
      return "past its memory limit";
    case "wasm-memory-limit":
      return "past its linear memory limit";
    case "output-limit":
      return "past an output cap";
    case "signaled":
      return `killed by ${r["signal-name"] || `signal ${r.signal}`}`;
    default:
      return r.status;
  }
}

function show(r) {
  const status = $("status");
  const ms = (v) => (v === undefined || v === null ? "?" : `${v} ms`);
  const cpu = (r["cpu-user-ms"] || 0) + (r["cpu-sys-ms"] || 0);
  status.textContent = `${r.status}: ${reason(r)} · wall ${ms(r["wall-ms"])} · cpu ${cpu} ms${
    r["warm-start"] ? " · warm jail" : ""
  }${r.session ? ` · session run ${r.session.run}${r.session.interpreter ? `, interpreter ${r.session.interpreter}` : ""}` : ""}`;
  status.className = r.status === "ok" ? "status ok" : "status failed";
  if (r.error) showError(`the report says: ${r.error}`);
  const text = (s) => (s ? s.text + (s.truncated ? "\n[… cut at the cap]" : "") : "");
  $("stdout").textContent = text(r.stdout);
  $("stderr").textContent = text(r.stderr);
  $("value").textContent =
    r.value !== undefined ? JSON.stringify(r.value, null, 2) : r["value-repr"] !== undefined ? r["value-repr"] : "";
  const outputs = $("outputs");
  outputs.replaceChildren();
  for (const o of r.outputs || []) {
    if (o.type !== "image/png" || !/^[A-Za-z0-9+/]+=*$/.test(o.base64 || "")) continue;
    const img = el("img");
    img.alt = "a figure the code drew";
    img.src = `data:image/png;base64,${o.base64}`;
    outputs.append(img);
  }
  const body = $("layers").querySelector("tbody");
  body.replaceChildren();
  for (const l of r.enforcement || []) {
    const tr = el("tr", undefined, l.status === "enforced" ? "" : l.status === "partial" ? "partial" : "not");
    const st = l.reason ? `${l.status}: ${l.reason}` : l.status;
    tr.append(el("td", l.layer), el("td", l.asked), el("td", l.applied), el("td", st));
    body.append(tr);
  }
}

// --- sessions ------------------------------------------------------------------------------

async function ensureSession(mode) {
  const runtime = $("runtime").value;
  if (state.session && state.session.mode === mode && state.session.runtime === runtime) return;
  if (state.session) await endSession();
  state.session = await api("POST", "/v1/sessions", { json: { runtime, mode } });
  $("session").hidden = false;
}

async function refreshSession() {
  const s = state.session;
  $("session-id").textContent = `${s.mode} session ${s.id}`;
  $("session-note").textContent = `${s.runs} run(s)${s["forked-from"] ? `, forked from ${s["forked-from"]}` : ""}`;
  $("hibernate").disabled = s.mode !== "live";
  const listing = await api("GET", `/v1/sessions/${s.id}/files`);
  const body = $("files").querySelector("tbody");
  body.replaceChildren();
  for (const f of listing.files) {
    const tr = el("tr");
    const get = el("button", "download");
    get.type = "button";
    get.addEventListener("click", () => download(f.path).catch(showError));
    const rm = el("button", "remove");
    rm.type = "button";
    rm.addEventListener("click", () => removeFile(f.path).catch(showError));
    const actions = el("td");
    actions.append(get, " ", rm);
    tr.append(el("td", f.path, "mono"), el("td", String(f.bytes), "num"), actions);
    body.append(tr);
  }
}

const filePath = (p) => p.split("/").map(encodeURIComponent).join("/");

async function download(path) {
  const r = await api("GET", `/v1/sessions/${state.session.id}/files/${filePath(path)}`, { raw: true });
  const url = URL.createObjectURL(await r.blob());
  const a = el("a");
  a.href = url;
  a.download = path.split("/").pop();
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

async function removeFile(path) {
  await api("DELETE", `/v1/sessions/${state.session.id}/files/${filePath(path)}`);
  await refreshSession();
}

async function upload(files) {
  clearError();
  if (!state.session) await ensureSession($("mode").value === "run" ? "workspace" : $("mode").value);
  if ($("mode").value === "run") $("mode").value = state.session.mode;
  for (const f of files) {
    await api("PUT", `/v1/sessions/${state.session.id}/files/${filePath(f.name)}`, { body: f });
  }
  await refreshSession();
}

async function hibernate() {
  clearError();
  state.session = await api("POST", `/v1/sessions/${state.session.id}/hibernate`);
  await refreshSession();
  $("session-note").textContent += ", hibernated";
}

async function fork() {
  clearError();
  state.session = await api("POST", `/v1/sessions/${state.session.id}/fork`);
  await refreshSession();
}

async function endSession() {
  const s = state.session;
  state.session = null;
  $("session").hidden = true;
  if (s) await api("DELETE", `/v1/sessions/${s.id}`).catch(() => {});
}

// --- wiring --------------------------------------------------------------------------------

function onKey(e) {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
    e.preventDefault();
    run();
  } else if (e.key === "Tab" && !e.shiftKey && e.target === $("code")) {
    e.preventDefault();
    e.target.setRangeText("    ", e.target.selectionStart, e.target.selectionEnd, "end");
  }
}

function start() {
  tokenFromFragment();
  $("run").addEventListener("click", run);
  $("code").addEventListener("keydown", onKey);
  document.addEventListener("keydown", (e) => e.target !== $("code") && e.key === "Enter" && e.ctrlKey && run());
  $("runtime").addEventListener("change", onRuntime);
  $("mode").addEventListener("change", () => $("mode").value === "run" && endSession());
  $("upload").addEventListener("change", (e) => upload([...e.target.files]).catch(showError));
  $("hibernate").addEventListener("click", () => hibernate().catch(showError));
  $("fork").addEventListener("click", () => fork().catch(showError));
  $("end").addEventListener("click", () => endSession().catch(showError));
  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    state.token = $("token").value.trim();
    sessionStorage.setItem(TOKEN_KEY, state.token);
    $("token").value = "";
    loadInfo().then(refreshHealth).catch(showError);
  });
  loadInfo().catch((e) => (e.status === 401 || e.status === 403 ? null : showError(e)));
  refreshHealth();
  setInterval(refreshHealth, 5000);
}

document.addEventListener("DOMContentLoaded", start);
