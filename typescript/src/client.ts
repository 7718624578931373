import * as http from "node:http";
import { randomUUID } from "node:crypto";
import type { Socket } from "node:net";
import { StockadeError, streamError } from "./errors.js";
import { DEFAULT_SOCKET, DEFAULT_TIMEOUT_MS, type Endpoint, json, lines, open, request, upgraded } from "./http.js";
import type { components } from "./openapi.js";
import { type BatchAnswer, BatchResult, type BatchSummary, type Report, RunResult } from "./result.js";

type Schemas = components["schemas"];

/** How to reach the server: a unix socket (the default, `/run/stockade/api.sock`), or a URL with a token. */
export type ClientOptions = (
  | { socket?: string; url?: undefined; token?: undefined }
  | { url: string; token?: string; socket?: undefined }
) & {
  /** How long a request may take, milliseconds (default 60000; a run's own limit is its policy's). */
  timeoutMs?: number;
  /**
   * How many more times a request is tried when it never reached the server, or the server
   * refused it before running anything (a full queue, a draining server) — never after a run
   * may have started. Default 2.
   */
  retries?: number;
};

/**
 * A run's limits (`docs/api.md`): they may only tighten the policy's. A looser one is refused
 * with {@link BadRequest} naming `limits.KEY`, never clamped.
 */
export interface Limits {
  /** The wall-clock limit, milliseconds. */
  wallTimeoutMs?: number;
  /** The run's memory limit, bytes (needs a jail built for the run). */
  memoryMaxBytes?: number;
  /** The run's process and thread limit (needs a jail built for the run). */
  pidsMax?: number;
  /** Output kept (or streamed) of stdout, bytes. */
  stdoutMaxBytes?: number;
  /** Output kept (or streamed) of stderr, bytes. */
  stderrMaxBytes?: number;
  /** A Wasm guest's linear memory, bytes. */
  wasmMemoryMaxBytes?: number;
  /** A Wasm guest's fuel (about one unit per instruction). */
  fuel?: number;
}

const LIMIT_KEYS: Record<keyof Limits, keyof Schemas["Limits"]> = {
  wallTimeoutMs: "wall-timeout-ms",
  memoryMaxBytes: "memory-max-bytes",
  pidsMax: "pids-max",
  stdoutMaxBytes: "stdout-max-bytes",
  stderrMaxBytes: "stderr-max-bytes",
  wasmMemoryMaxBytes: "wasm-memory-max-bytes",
  fuel: "fuel",
};

/** A tool's answer: anything JSON can say (or a promise of it). */
export type ToolFunction = (args: unknown) => unknown;

/**
 * A tool the run may call back (`stockade_host.call(name, args)` in Python, `host.call(name, args)`
 * in JavaScript), answered by `fn(args)` in this process: its value (anything JSON can say) is
 * the call's answer; an error it throws reaches the run as `ToolError`. The budgets are the
 * server's (defaults: 50 calls, 64 KiB requests, 1 MiB answers, 5 s each).
 */
export interface Tool {
  fn: ToolFunction;
  maxCalls?: number;
  maxRequestBytes?: number;
  maxResponseBytes?: number;
  timeoutMs?: number;
}

/** `tools`: a tool's name, and the function (or {@link Tool}) that answers it. */
export type Tools = Record<string, ToolFunction | Tool>;

/** Files written into the run's `/app` before it starts: a relative path → its content. */
export type Files = Record<string, string | Uint8Array>;

/** What every call takes. */
export interface CallOptions {
  /** Cancels the call (the request is dropped; a run already started is not undone). */
  signal?: AbortSignal;
}

/** A session's run's options. */
export interface SessionRunOptions extends CallOptions {
  /** Arguments after the code (`sys.argv[1:]`, `scriptArgs`). */
  argv?: string[];
  /** The run's stdin (text, or bytes). */
  stdin?: string | Uint8Array;
  /** Files written into `/app` before the run. */
  files?: Files;
  /** Patterns of files to bring back (`result.files`). */
  returnFiles?: string | string[];
  /** Limits within the policy's (they may only tighten it). */
  limits?: Limits;
  /** Tools the run may call back (the run then streams; their calls are answered here). */
  tools?: Tools;
}

/** A run's options. */
export interface RunOptions extends SessionRunOptions {
  /** A named policy of the server's (`info()`); default: the runtime's. */
  policy?: string;
  /** Hosts the run may reach (`HOST:PORT`), within its policy's `network.egress-allow` (a
   * narrower list; one it does not list is refused). `result.egress` lists the connections. */
  egressAllow?: string[];
}

/** A Wasm module's run's options (no tools: a module has no host calls). */
export type WasmOptions = Omit<RunOptions, "tools">;

/** A session's options. */
export interface SessionOptions extends CallOptions {
  /** `workspace` (the default: each run a fresh interpreter, `/app` kept) or `live` (one interpreter keeps its state). */
  mode?: "workspace" | "live";
  /** A named policy of the server's. */
  policy?: string;
  /** Every run's limits (within the policy's). */
  limits?: Limits;
  /** The session ends after this long without a run, milliseconds. */
  idleTimeoutMs?: number;
  /** The session ends this long after it began, milliseconds. */
  maxLifetimeMs?: number;
}

/** One run of a batch with its own code (`runs` of {@link BatchOptions}). */
export interface BatchRun {
  /** Its code. */
  code: string;
  /** Arguments after the code (`sys.argv[1:]`, `scriptArgs`). */
  argv?: string[];
  /** Its stdin (text, or bytes). */
  stdin?: string | Uint8Array;
  /**
   * Its own limits, tighter than the batch's: the wall clock, the output caps, a guest's fuel and
   * linear memory. Its memory and processes are its jail's, shared with the batch's other runs:
   * set them in the batch's `limits` (here they are a {@link BadRequest} naming
   * `runs[N].limits.memory-max-bytes`).
   */
  limits?: Limits;
  /** What it must print on stdout for the verdict `accepted` (see `compare`); without it, the run has no verdict. */
  expect?: string;
}

/** One input of a batch that runs one program (`code`) against many: a run without code of its own. */
export type BatchInput = Omit<BatchRun, "code">;

/** How a batch's run's stdout is held against its `expect`: `exact` (byte for byte) or
 * `trailing-whitespace` (the default: line by line, trailing spaces, tabs and `\r` ignored, and
 * blank lines at the end). */
export type Compare = Schemas["Compare"];

/** A batch (`POST /v1/batches`): `runs`, or `code` with `inputs`. */
export interface BatchOptions extends CallOptions {
  /** A Wasm guest's runtime (`python`, `javascript`). */
  runtime: string;
  /** Each run's own code (and input). */
  runs?: BatchRun[];
  /** One program for every input (with `inputs`). */
  code?: string;
  /** The inputs `code` runs against, one run each. */
  inputs?: BatchInput[];
  /** Every run's limits (within the policy's); `memoryMaxBytes` and `pidsMax` are the batch's jails'. */
  limits?: Limits;
  /** A named policy of the server's; default: the runtime's. */
  policy?: string;
  /** How stdout is held against `expect` (default `trailing-whitespace`). */
  compare?: Compare;
}

/** A run of a streamed batch that ended: its index in the batch's runs (or inputs), and its result. */
export interface BatchEvent {
  index: number;
  result: RunResult;
}

/** A piece of a streamed run's output, as it happened. */
export interface Output {
  type: "output";
  /** Which stream it came on. */
  stream: "stdout" | "stderr";
  /** Its bytes. */
  data: Uint8Array;
  /** Its bytes as text (UTF-8). */
  text: string;
}

/** A streamed run's last event: its result. */
export interface Done {
  type: "result";
  result: RunResult;
}

/** What a streamed run yields: its output as it happens, then its result. */
export type StreamEvent = Output | Done;

/** A host call of a streaming run, as the server sent it. */
export type HostCall = Schemas["HostCall"];
/** A session, as the server describes it. */
export type SessionInfo = Schemas["SessionInfo"];
/** Where a session's interpreter is: `live`, `hibernated` (the next run resumes it) or `none`. */
export type SessionState = Schemas["SessionState"];
/** A file of a session's workspace. */
export type FileInfo = Schemas["FileInfo"];
/** The server's readiness (`GET /v1/health`). */
export type Health = Schemas["Health"];
/** What the server serves (`GET /v1/info`): its runtimes, policies with their limits, caps. */
export type Info = Schemas["Info"];

const encoder = new TextEncoder();

function base64(data: string | Uint8Array): string {
  return Buffer.from(typeof data === "string" ? encoder.encode(data) : data).toString("base64");
}

/** A request's `limits`, in the server's spelling; an unknown key throws `TypeError` naming it. */
function limitsBody(limits: Limits): Schemas["Limits"] {
  const out: Record<string, number> = {};
  for (const [key, value] of Object.entries(limits)) {
    const wire = LIMIT_KEYS[key as keyof Limits];
    if (wire === undefined) {
      throw new TypeError(`limits: unknown key ${JSON.stringify(key)} (known: ${Object.keys(LIMIT_KEYS).join(", ")})`);
    }
    if (value === undefined) continue;
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
      throw new TypeError(`limits.${key}: a whole number of at least 0, not ${String(value)}`);
    }
    out[wire] = value;
  }
  return out as Schemas["Limits"];
}

function toolOf(t: ToolFunction | Tool, name: string): Tool {
  if (typeof t === "function") return { fn: t };
  if (t && typeof t === "object" && typeof t.fn === "function") return t;
  throw new TypeError(`tools.${name}: a function, or { fn, maxCalls, ... }`);
}

function toolsBody(tools: Tools): Schemas["ToolBody"][] {
  return Object.entries(tools).map(([name, t]) => {
    const tool = toolOf(t, name);
    const body: Schemas["ToolBody"] = { name };
    if (tool.maxCalls !== undefined) body["max-calls"] = tool.maxCalls;
    if (tool.maxRequestBytes !== undefined) body["max-request-bytes"] = tool.maxRequestBytes;
    if (tool.maxResponseBytes !== undefined) body["max-response-bytes"] = tool.maxResponseBytes;
    if (tool.timeoutMs !== undefined) body["timeout-ms"] = tool.timeoutMs;
    return body;
  });
}

/** The JSON of a session's run (`POST /v1/sessions/{id}/runs`). */
function sessionRunBody(code: string | undefined, o: SessionRunOptions): Schemas["SessionRunBody"] {
  const b: Schemas["SessionRunBody"] = {};
  if (code !== undefined) b.code = code;
  if (o.argv !== undefined) {
    if (!Array.isArray(o.argv)) throw new TypeError("argv is a list of strings, not a string");
    b.argv = o.argv.map(String);
  }
  if (typeof o.stdin === "string") b.stdin = o.stdin;
  else if (o.stdin !== undefined) b["stdin-base64"] = base64(o.stdin);
  if (o.files) b.files = Object.entries(o.files).map(([path, content]) => ({ path, content: base64(content) }));
  if (o.limits) b.limits = limitsBody(o.limits);
  if (o.returnFiles !== undefined) b["return-files"] = typeof o.returnFiles === "string" ? [o.returnFiles] : [...o.returnFiles];
  if (o.tools && Object.keys(o.tools).length > 0) b.tools = toolsBody(o.tools);
  return b;
}

/** The JSON of a run (`POST /v1/runs`). */
function runBody(runtime: string, code: string | undefined, o: RunOptions, module?: Uint8Array): Schemas["RunBody"] {
  const b: Schemas["RunBody"] = { runtime, ...sessionRunBody(code, o) };
  if (module !== undefined) b.module = base64(module);
  if (o.policy !== undefined) b.policy = o.policy;
  if (o.egressAllow !== undefined) {
    if (!Array.isArray(o.egressAllow)) throw new TypeError("egressAllow is a list of HOST:PORT strings");
    b["egress-allow"] = o.egressAllow.map(String);
  }
  return b;
}

const BATCH_RUN_KEYS = ["code", "argv", "stdin", "limits", "expect"];

/** The JSON of one run (or input) of a batch (`where` names it: `runs[3]`); a key this client
 * does not know throws `TypeError` naming it, before anything is sent. */
function batchRunBody(run: BatchRun | BatchInput, where: string): Schemas["BatchRunBody"] {
  if (!run || typeof run !== "object" || Array.isArray(run)) {
    throw new TypeError(`${where}: { code, argv, stdin, limits, expect }, not ${JSON.stringify(run)}`);
  }
  for (const key of Object.keys(run)) {
    if (!BATCH_RUN_KEYS.includes(key)) {
      throw new TypeError(`${where}: unknown key ${JSON.stringify(key)} (known: ${BATCH_RUN_KEYS.join(", ")})`);
    }
  }
  const r = run as Partial<BatchRun>;
  const b: Schemas["BatchRunBody"] = {};
  if (r.code !== undefined) b.code = r.code;
  if (r.argv !== undefined) {
    if (!Array.isArray(r.argv)) throw new TypeError(`${where}.argv is a list of strings, not a string`);
    b.argv = r.argv.map(String);
  }
  if (typeof r.stdin === "string") b.stdin = r.stdin;
  else if (r.stdin !== undefined) b["stdin-base64"] = base64(r.stdin);
  if (r.limits) b.limits = limitsBody(r.limits);
  if (r.expect !== undefined) b.expect = String(r.expect);
  return b;
}

/** The JSON of a batch (`POST /v1/batches`): which of `runs`, `code` and `inputs` make one is the
 * server's to say (it names the field). */
function batchBody(o: BatchOptions): Schemas["BatchBody"] {
  if (!o || typeof o.runtime !== "string") throw new TypeError("a batch is { runtime, runs } or { runtime, code, inputs }");
  const b: Schemas["BatchBody"] = { runtime: o.runtime };
  for (const key of ["runs", "inputs"] as const) {
    const list = o[key];
    if (list === undefined) continue;
    if (!Array.isArray(list)) throw new TypeError(`${key} is a list of runs`);
    b[key] = list.map((r: BatchRun | BatchInput, i: number) => batchRunBody(r, `${key}[${i}]`));
  }
  if (o.code !== undefined) b.code = o.code;
  if (o.limits) b.limits = limitsBody(o.limits);
  if (o.policy !== undefined) b.policy = o.policy;
  if (o.compare !== undefined) b.compare = o.compare;
  return b;
}

/** A streamed batch's last line: its id and summary. */
interface BatchEnd {
  batchId: string;
  summary: BatchSummary;
}

/** One NDJSON line of a streamed batch: a run that ended, the last line, or nothing; an error
 * line is thrown as its error ({@link streamError}). */
function batchEventOf(line: string): BatchEvent | BatchEnd | undefined {
  let ev: Record<string, unknown>;
  try {
    ev = JSON.parse(line);
  } catch (e) {
    throw new StockadeError(`the server sent a line that is not JSON: ${line.slice(0, 80)}`, { cause: e });
  }
  if (!ev || typeof ev !== "object") return undefined;
  if (ev.error !== undefined) throw streamError(ev.error);
  if (typeof ev.index === "number" && ev.result && typeof ev.result === "object") {
    return { index: ev.index, result: new RunResult(ev.result as Report) };
  }
  if (ev.summary && typeof ev.summary === "object") {
    return { batchId: String(ev["batch-id"]), summary: ev.summary as BatchSummary };
  }
  return undefined;
}

/** A tool's answer to a call, as the server takes it (a `CallAnswer`'s JSON text): its value
 * serialized once, or why it failed (a value JSON cannot say is the tool's failure). */
async function answerOf(tools: Tools | undefined, call: HostCall): Promise<string> {
  const failed = (error: string): string => JSON.stringify({ error } satisfies Schemas["CallAnswer"]);
  const t = tools?.[call.name];
  if (t === undefined) return failed(`this client has no tool ${JSON.stringify(call.name)}`);
  try {
    const value = await toolOf(t, call.name).fn(call.args);
    return `{"ok":${JSON.stringify(value) ?? "null"}}`;
  } catch (e) {
    const name = e instanceof Error ? e.name : "Error";
    const message = e instanceof Error ? e.message : String(e);
    return failed(`${name}: ${message}`);
  }
}

/** One NDJSON line of a streamed run: output, a host call, the report, or nothing; an error event
 * is thrown as its error ({@link streamError}: `BadRequest` for `bad-request`...). */
function eventOf(line: string): Output | { call: HostCall } | { report: Report } | undefined {
  let ev: Record<string, unknown>;
  try {
    ev = JSON.parse(line);
  } catch (e) {
    throw new StockadeError(`the server sent a line that is not JSON: ${line.slice(0, 80)}`, { cause: e });
  }
  for (const stream of ["stdout", "stderr"] as const) {
    if (typeof ev[stream] === "string") {
      const text = ev[stream] as string;
      return { type: "output", stream, data: encoder.encode(text), text };
    }
    const b64 = ev[`${stream}-base64`];
    if (typeof b64 === "string") {
      const data = new Uint8Array(Buffer.from(b64, "base64"));
      return { type: "output", stream, data, text: new TextDecoder().decode(data) };
    }
  }
  if (ev.call && typeof ev.call === "object") return { call: ev.call as HostCall };
  if (ev.report && typeof ev.report === "object") return { report: ev.report as Report };
  // Why the run did not run: thrown as the HTTP refusal with its code would be.
  if (ev.error !== undefined) throw streamError(ev.error);
  return undefined;
}

function concat(parts: Uint8Array[]): Uint8Array {
  return new Uint8Array(Buffer.concat(parts));
}

/**
 * A client of `stockade serve`.
 *
 * `new Client()` talks to `/run/stockade/api.sock`; `new Client({ socket })` to another unix
 * socket; `new Client({ url: "http://127.0.0.1:8787", token })` over TCP. Connections are kept
 * alive; `close()` ends them.
 */
export class Client {
  readonly #ep: Endpoint;

  constructor(options: ClientOptions = {}) {
    const headers: Record<string, string> = { "user-agent": "stockade-typescript/0.1", accept: "application/json" };
    const base = {
      headers,
      timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      retries: Math.max(0, options.retries ?? 2),
      agent: new http.Agent({ keepAlive: true, timeout: 5_000 }),
    };
    if (options.url !== undefined) {
      if (options.socket !== undefined) throw new TypeError("give socket or url, not both");
      const u = new URL(options.url);
      if (u.protocol !== "http:") throw new TypeError(`url: http:// (the server speaks plain HTTP), not ${u.protocol}`);
      if (options.token) headers.authorization = `Bearer ${options.token}`;
      this.#ep = { ...base, host: u.hostname, port: Number(u.port || 80), prefix: u.pathname.replace(/\/+$/, "") };
    } else {
      this.#ep = { ...base, socketPath: options.socket ?? DEFAULT_SOCKET, host: "localhost", port: 80, prefix: "" };
    }
  }

  /** Ends the client's kept-alive connections. */
  close(): void {
    this.#ep.agent.destroy();
  }

  /** `GET /v1/health`: status, running and queued runs, warm pools. */
  async health(options: CallOptions = {}): Promise<Health> {
    return json(await request(this.#ep, { method: "GET", path: "/v1/health", signal: options.signal, idempotent: true }));
  }

  /** `GET /v1/info`: version, runtimes, policies with their limits, what the host enforces. */
  async info(options: CallOptions = {}): Promise<Info> {
    return json(await request(this.#ep, { method: "GET", path: "/v1/info", signal: options.signal, idempotent: true }));
  }

  /**
   * Runs `code` in `runtime` (`python`, `javascript`, or one the server adds). With `tools`, the
   * run streams and each of its host calls is answered here while it runs.
   */
  async run(runtime: string, code: string, options: RunOptions = {}): Promise<RunResult> {
    const body = runBody(runtime, code, options);
    if (body.tools) return last(this.#streamed("/v1/runs", body, options));
    return this.#post("/v1/runs", body, options.signal);
  }

  /** Runs Python code (CPython for WASI). */
  runPython(code: string, options: RunOptions = {}): Promise<RunResult> {
    return this.run("python", code, options);
  }

  /** Runs JavaScript (QuickJS). */
  runJs(code: string, options: RunOptions = {}): Promise<RunResult> {
    return this.run("javascript", code, options);
  }

  /** Runs a WASI preview 1 command module (compiled by the server in a jail, cached). */
  async runWasm(module: Uint8Array, options: WasmOptions = {}): Promise<RunResult> {
    if ("tools" in options) throw new TypeError("a Wasm module has no host calls: no tools");
    return this.#post("/v1/runs", runBody("wasm", undefined, options, module), options.signal);
  }

  /**
   * Runs `code` and yields its output as it happens, then its result (whose `stdout` and
   * `stderr` hold what was streamed, up to the caps). `tools` as for {@link run}: their calls
   * are answered here, not yielded. An error the server sends in the stream is thrown as an HTTP
   * refusal with its code would be ({@link BadRequest} for `bad-request`...).
   */
  async *stream(runtime: string, code: string, options: RunOptions = {}): AsyncGenerator<StreamEvent> {
    yield* this.#streamed("/v1/runs", runBody(runtime, code, options), options);
  }

  /** {@link stream} for Python code. */
  streamPython(code: string, options: RunOptions = {}): AsyncGenerator<StreamEvent> {
    return this.stream("python", code, options);
  }

  /** {@link stream} for JavaScript. */
  streamJs(code: string, options: RunOptions = {}): AsyncGenerator<StreamEvent> {
    return this.stream("javascript", code, options);
  }

  /**
   * Opens a session (`POST /v1/sessions`): runs of `runtime` that share a workspace (`/app`);
   * with `mode: "live"` one interpreter keeps its state between them. End it with `close()`, or
   * `await using s = await client.session(...)`.
   */
  async session(runtime = "python", options: SessionOptions = {}): Promise<Session> {
    const body: Schemas["SessionBody"] = { runtime, mode: options.mode ?? "workspace" };
    if (options.policy !== undefined) body.policy = options.policy;
    if (options.limits) body.limits = limitsBody(options.limits);
    if (options.idleTimeoutMs !== undefined) body["idle-timeout-ms"] = options.idleTimeoutMs;
    if (options.maxLifetimeMs !== undefined) body["max-lifetime-ms"] = options.maxLifetimeMs;
    const info = json<SessionInfo>(await this.#call("POST", "/v1/sessions", body, options.signal, false));
    return new Session(this, info);
  }

  /**
   * `POST /v1/batches`: many runs of a Wasm guest's runtime (`python`, `javascript`), each in a
   * fresh instance of its guest, sharing a few jails: `runs` (each with its own code), or one
   * program (`code`) against many `inputs`. A run with an `expect` is judged (`result.verdict`).
   * A bad batch is refused before anything runs, the field named (`runs[3].stdin`). The answer
   * comes when the last run has ended, within the client's `timeoutMs` ({@link batchStream}
   * gives each result as its run ends). A batch carries no `Idempotency-Key`: it is sent again
   * only when nothing ran (no connection was made, or the server refused it before running it).
   */
  async batch(options: BatchOptions): Promise<BatchResult> {
    const body = encoder.encode(JSON.stringify(batchBody(options)));
    const call = { method: "POST", path: "/v1/batches", body, signal: options.signal, idempotent: false, mayRun: true };
    return new BatchResult(json<BatchAnswer>(await request(this.#ep, call)));
  }

  /**
   * {@link batch}, streamed (`?stream=ndjson`): `for await (const { index, result } of stream)`
   * yields each run as it ends, in the order they end (not the runs' order); once the loop is
   * over, `stream.summary` and `stream.batchId` say how the batch went. The request is sent when
   * the loop begins; a refusal (before the batch starts, or an error line of the stream) is
   * thrown as its class ({@link BadRequest}...). Leaving the loop early (`break`, or
   * `stream.close()`) hangs up, which ends the batch: its jails take no further run.
   */
  batchStream(options: BatchOptions): BatchStream {
    return new BatchStream(this.#batchLines(batchBody(options), options.signal));
  }

  /** A streamed batch's lines: each run as it ends, then the last line. */
  async *#batchLines(body: Schemas["BatchBody"], signal: AbortSignal | undefined): AsyncGenerator<BatchEvent | BatchEnd> {
    const bytes = encoder.encode(JSON.stringify(body));
    const call = { method: "POST", path: "/v1/batches?stream=ndjson", body: bytes, signal, idempotent: false, mayRun: true };
    const res = await open(this.#ep, call, this.#ep.timeoutMs);
    for await (const line of lines(res, signal)) {
      const ev = batchEventOf(line);
      if (ev !== undefined) yield ev;
    }
    throw new StockadeError("the batch's stream ended without its summary");
  }

  /** One request with a JSON body; its answer whole. */
  #call(method: string, path: string, body: unknown, signal: AbortSignal | undefined, idempotent: boolean) {
    const bytes = body === undefined ? undefined : encoder.encode(JSON.stringify(body));
    return request(this.#ep, { method, path, body: bytes, signal, idempotent });
  }

  /** A run, answered whole: it carries an `Idempotency-Key` of its own, so that it is asked again
   * (after a connection lost once it was sent) without ever running twice. */
  async #post(path: string, body: unknown, signal: AbortSignal | undefined): Promise<RunResult> {
    const bytes = encoder.encode(JSON.stringify(body));
    const headers = { "idempotency-key": randomUUID() };
    const call = { method: "POST", path, body: bytes, signal, idempotent: true, headers };
    return new RunResult(json<Report>(await request(this.#ep, call)));
  }

  /** @internal A request of a session's. */
  _request(method: string, path: string, body: Uint8Array | undefined, signal: AbortSignal | undefined, idempotent = true) {
    return request(this.#ep, { method, path, body, contentType: "application/octet-stream", signal, idempotent });
  }

  /** @internal A session's run. */
  async _sessionRun(id: string, code: string, options: SessionRunOptions): Promise<RunResult> {
    if ("policy" in options) throw new TypeError("a session's runs have the session's policy");
    const body = sessionRunBody(code, options);
    const path = `/v1/sessions/${encodeURIComponent(id)}/runs`;
    if (body.tools) return last(this.#streamed(path, body, options, id));
    return this.#post(path, body, options.signal);
  }

  /** A streamed run's events, its host calls answered on the way. */
  async *#streamed(path: string, body: unknown, options: SessionRunOptions, session?: string): AsyncGenerator<StreamEvent> {
    const bytes = encoder.encode(JSON.stringify(body));
    // With tools, the calls are answered on the run's own connection (no request per answer).
    const headers = options.tools ? UPGRADE : undefined;
    const call = { method: "POST", path: `${path}?stream=ndjson`, body: bytes, signal: options.signal, idempotent: false, mayRun: true, headers };
    const res = await open(this.#ep, call, this.#ep.timeoutMs);
    const up = upgraded(res);
    if (up) {
      up.socket.setTimeout(this.#ep.timeoutMs, () => up.socket.destroy(new Error(`no byte for ${this.#ep.timeoutMs} ms`)));
    }
    const out: Uint8Array[] = [];
    const err: Uint8Array[] = [];
    const answering: Promise<void>[] = [];
    for await (const line of lines(up ? up.socket : res, options.signal, up?.head)) {
      const ev = eventOf(line);
      if (ev === undefined) continue;
      if ("type" in ev) {
        (ev.stream === "stdout" ? out : err).push(ev.data);
        yield ev;
      } else if ("call" in ev) {
        answering.push(
          up ? answerOn(up.socket, ev.call, options.tools) : this.#answer(ev.call, options.tools, session, options.signal),
        );
      } else {
        await Promise.allSettled(answering);
        yield { type: "result", result: new RunResult(ev.report, { stdout: concat(out), stderr: concat(err) }) };
        return;
      }
    }
    throw new StockadeError("the stream ended without a report");
  }

  /** Answers a host call with its tool (a failure to deliver it is the server's to time out). */
  async #answer(call: HostCall, tools: Tools | undefined, session: string | undefined, signal: AbortSignal | undefined) {
    const answer = await answerOf(tools, call);
    const [run, id] = [checkedId("run", call.run), checkedId("call", call.id)];
    const at =
      session === undefined
        ? `/v1/runs/${run}/calls/${id}`
        : `/v1/sessions/${checkedId("session", session)}/runs/${run}/calls/${id}`;
    try {
      await request(this.#ep, { method: "POST", path: at, body: encoder.encode(answer), signal, idempotent: false });
    } catch {
      // The server answers the call for it (a timeout error) at the tool's timeout.
    }
  }
}

/**
 * A streamed batch ({@link Client.batchStream}): iterated once with `for await`, it yields a
 * {@link BatchEvent} (`{ index, result }`) as each run ends; when the loop is over, `summary` and
 * `batchId` say how the batch went (`undefined` until then, and for a stream left early).
 * `close()`, or `await using stream = client.batchStream(...)`, hangs up: a batch left before its
 * end is ended.
 */
export class BatchStream implements AsyncIterable<BatchEvent> {
  /** The server's id of the batch, once the stream has ended. */
  batchId: string | undefined;
  /** How the batch went, once the stream has ended. */
  summary: BatchSummary | undefined;
  readonly #events: AsyncGenerator<BatchEvent>;

  /** A stream of a batch's lines (made by {@link Client.batchStream}). */
  constructor(lines: AsyncGenerator<BatchEvent | BatchEnd>) {
    this.#events = this.#results(lines);
  }

  async *#results(lines: AsyncGenerator<BatchEvent | BatchEnd>): AsyncGenerator<BatchEvent> {
    for await (const ev of lines) {
      if ("index" in ev) {
        yield ev;
      } else {
        this.batchId = ev.batchId;
        this.summary = ev.summary;
        return;
      }
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<BatchEvent> {
    return this.#events;
  }

  /** Ends the stream (and, before its end, the batch). */
  async close(): Promise<void> {
    await this.#events.return(undefined);
  }

  /** `await using stream = client.batchStream(...)`: the stream ends with the block. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/** The headers that ask for a streamed run's calls to be answered on its own connection. */
const UPGRADE = { connection: "Upgrade", upgrade: "stockade-calls" };

/** Answers a host call on its run's upgraded connection: one line (a failure to deliver it is
 * the server's to time out). */
async function answerOn(socket: Socket, call: HostCall, tools: Tools | undefined): Promise<void> {
  const answer = await answerOf(tools, call);
  const [run, id] = [checkedId("run", call.run), checkedId("call", call.id)];
  // `answer` is `{"ok":...}` or `{"error":...}`: the run and the call go before its first key.
  socket.write(`{"run":${JSON.stringify(run)},"call":${JSON.stringify(id)},${answer.slice(1)}\n`);
}

/** Ids as API v1 writes them. */
const IDS: Record<string, RegExp> = {
  session: /^s-[0-9a-f]{32}$/,
  run: /^r-[0-9a-f]{16}$/,
  call: /^c-[0-9]{1,20}$/,
};

/** An id the server sent, checked before it goes into a URL's path (where anything else could
 * take this client's requests elsewhere). */
function checkedId(kind: string, value: unknown): string {
  if (typeof value !== "string" || !IDS[kind]?.test(value)) {
    throw new StockadeError(`the server sent a ${kind} id that is not one: ${JSON.stringify(value)}`);
  }
  return value;
}

/** The result of a streamed run (its output events dropped). */
async function last(events: AsyncGenerator<StreamEvent>): Promise<RunResult> {
  for await (const ev of events) {
    if (ev.type === "result") return ev.result;
  }
  throw new StockadeError("the stream ended without a report");
}

/**
 * A session of a {@link Client} ({@link Client.session}): each run is a fresh jail and
 * interpreter whose `/app` holds the session's files; in a live session every run is a turn of
 * one interpreter, which keeps its state (`result.interpreter` says whether it did).
 */
export class Session {
  /** The server's id of the session. */
  readonly id: string;
  /** What the server said of it (when made, or at the last {@link refresh}). */
  info: SessionInfo;
  readonly #client: Client;

  constructor(client: Client, info: SessionInfo) {
    this.#client = client;
    this.id = checkedId("session", info.id);
    this.info = info;
  }

  #path(rest = ""): string {
    return `/v1/sessions/${encodeURIComponent(this.id)}${rest}`;
  }

  #file(path: string): string {
    // The path percent-encoded whole, its slashes too: nothing on the way resolves a `..` in it.
    return this.#path(`/files/${encodeURIComponent(path)}`);
  }

  /** Runs `code` in the session (`limits` may only tighten the session's). */
  run(code: string, options: SessionRunOptions = {}): Promise<RunResult> {
    return this.#client._sessionRun(this.id, code, options);
  }

  /** Writes a file into the workspace (`path` relative to `/app`; its directories are made). */
  async upload(path: string, data: string | Uint8Array, options: CallOptions = {}): Promise<FileInfo> {
    const bytes = typeof data === "string" ? encoder.encode(data) : data;
    return json(await this.#client._request("PUT", this.#file(path), bytes, options.signal));
  }

  /** A file of the workspace ({@link SessionNotFound} when there is none). */
  async download(path: string, options: CallOptions = {}): Promise<Uint8Array> {
    const a = await this.#client._request("GET", this.#file(path), undefined, options.signal);
    return new Uint8Array(a.body);
  }

  /** Removes a file from the workspace. */
  async remove(path: string, options: CallOptions = {}): Promise<void> {
    await this.#client._request("DELETE", this.#file(path), undefined, options.signal);
  }

  /** The workspace's files, in path order. */
  async files(options: CallOptions = {}): Promise<FileInfo[]> {
    const a = await this.#client._request("GET", this.#path("/files"), undefined, options.signal);
    return json<Schemas["FileList"]>(a).files;
  }

  /** `GET /v1/sessions/{id}`: the session as the server sees it now. */
  async refresh(options: CallOptions = {}): Promise<SessionInfo> {
    this.info = json(await this.#client._request("GET", this.#path(), undefined, options.signal));
    return this.info;
  }

  /**
   * `POST /v1/sessions/{id}/fork`: a new session with a copy of this one's workspace, of its
   * interpreter's state (a live `python` session's: the fork's `random` is drawn again) and its
   * own clocks (`info["forked-from"]` names this one); each goes on on its own. A
   * `cannot-hibernate` conflict when the interpreter cannot be copied now (a file it holds open).
   */
  async fork(options: CallOptions = {}): Promise<Session> {
    const a = await this.#client._request("POST", this.#path("/fork"), undefined, options.signal, false);
    return new Session(this.#client, json<SessionInfo>(a));
  }

  /**
   * `POST /v1/sessions/{id}/hibernate`: a live session's interpreter written to the server's state
   * directory and its jail ended (`info.state` is `hibernated`); its next run resumes it
   * (`result.interpreter === "resumed"`). One that cannot be written (not the python guest's) is
   * ended, its workspace kept; a `cannot-hibernate` conflict when it cannot be now.
   */
  async hibernate(options: CallOptions = {}): Promise<SessionInfo> {
    this.info = json(await this.#client._request("POST", this.#path("/hibernate"), undefined, options.signal));
    return this.info;
  }

  /** Ends the session (`DELETE`); one that already ended is left as it is. */
  async close(options: CallOptions = {}): Promise<void> {
    try {
      await this.#client._request("DELETE", this.#path(), undefined, options.signal);
    } catch (e) {
      const code = (e as StockadeError).status;
      if (code !== 404 && code !== 410) throw e;
    }
  }

  /** `await using s = await client.session(...)`: the session ends with the block. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
