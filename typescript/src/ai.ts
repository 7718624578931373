/**
 * stockade/ai: stockade's runs as tools of the Vercel AI SDK (`ai`, 6 or 7), for `generateText`,
 * `streamText` and agents. `ai` is an optional peer dependency: only this entry imports it.
 *
 * ```ts
 * import { generateText, stepCountIs } from "ai";
 * import { Client } from "stockade";
 * import { stockadeTool } from "stockade/ai";
 * const client = new Client();
 * const { text } = await generateText({
 *   model, tools: { run_python: stockadeTool(client) }, stopWhen: stepCountIs(5), prompt: "What is 2**100?",
 * });
 * ```
 *
 * @packageDocumentation
 */

import { jsonSchema, tool, type Tool } from "ai";
import type { Client, Info, Limits, Session, Tools } from "./client.js";
import { ServerUnavailable, StockadeError, Unauthorized } from "./errors.js";
import type { RunResult } from "./result.js";

/** What the model sends: the code to run. */
export interface StockadeToolInput {
  /** The program's source code. */
  code: string;
}

/**
 * What the model reads back: how the run ended and what it printed. Every answer of the server
 * is one, a refusal included (`status: "refused"`, with its `code` and `reason`).
 */
export interface StockadeToolResult {
  /** `ok`, `exited-nonzero`, `timeout`, `oom`, `output-limit`, ... (`docs/report.md`), or
   * `refused`: the server did not run the code (`code` and `reason` say why). */
  status: string;
  /** Why, in words, when `status` is not `ok`. */
  reason?: string;
  /** A refusal's error code (`bad-request`, `busy`, `session-busy`, ...). */
  code?: string;
  /** The request's field a refusal names (`limits.wall-timeout-ms`), when it names one. */
  field?: string;
  /** The program's exit code, when it exited. */
  exitCode?: number | null;
  /** What it wrote on stdout (cut at `maxOutputChars`). */
  stdout: string;
  /** What it wrote on stderr (cut at `maxOutputChars`). */
  stderr: string;
  /** Stdout was cut: past the run's cap (`limits.stdoutMaxBytes`) or past `maxOutputChars`. */
  stdoutTruncated: boolean;
  /** Stderr was cut, the same way. */
  stderrTruncated: boolean;
  /** The value of the code's last expression, as a notebook shows it, when it is JSON. */
  value?: unknown;
  /** That value's `repr` (Python) or `String()` (JavaScript), when it is not JSON. */
  valueRepr?: string;
  /** How many figures the code left open (sent as images only by the SDK's own API). */
  figures?: number;
  /** A live session's interpreter: `started`, `kept`, `resumed` or `restarted`. */
  interpreter?: string;
  /** The run's wall-clock time, milliseconds. */
  wallMs?: number;
}

/** How {@link stockadeTool} runs the model's code. */
export interface StockadeToolOptions {
  /** The runtime (`python`, `javascript`, or one the server adds); default `python`, or the
   * session's. */
  runtime?: string;
  /** What the model is told of the tool; default: one written for the runtime and the session. */
  description?: string;
  /** Every run's limits (only tighter than the policy's). */
  limits?: Limits;
  /** A named policy of the runtime's (not with a session: a session has its own). */
  policy?: string;
  /** Runs each call in this session (a live one keeps the interpreter's state between calls,
   * a workspace one its files). The caller makes it and ends it. */
  session?: Session;
  /** Functions of this process the code may call (host calls: `stockade_host.call(name, args)`
   * in Python, `host.call(name, args)` in JavaScript). */
  tools?: Tools;
  /** Stdout and stderr are each cut to this many characters for the model; default 16384. */
  maxOutputChars?: number;
}

/** The result of {@link stockadeTool}: an AI SDK tool taking `{ code }`. */
export type StockadeTool = Tool<StockadeToolInput, StockadeToolResult>;

/** The default of {@link StockadeToolOptions.maxOutputChars}. */
export const DEFAULT_MAX_OUTPUT_CHARS = 16384;

const INPUT_SCHEMA = {
  type: "object",
  properties: { code: { type: "string", description: "The program's source code." } },
  required: ["code"],
  additionalProperties: false,
} as const;

/** The model's input, checked (the AI SDK hands a model a failed check as a tool error). */
function validate(value: unknown): { success: true; value: StockadeToolInput } | { success: false; error: Error } {
  const code = (value as { code?: unknown } | null)?.code;
  if (typeof code === "string") return { success: true, value: { code } };
  return { success: false, error: new TypeError('the input is { "code": string }, the source code to run') };
}

/** Why a run with each status ended, in words a model reads (`docs/report.md`). */
const REASONS: Record<string, string> = {
  "exited-nonzero": "the program exited with a non-zero code",
  signaled: "a signal killed the program",
  timeout: "the run's wall-clock limit passed: every process of it was killed",
  oom: "the run reached its memory limit and was killed",
  "cpu-limit": "the program reached its CPU-time limit",
  "pids-limit": "the program was refused a new process or thread",
  "seccomp-violation": "the program made a forbidden system call and was killed",
  "fuel-exhausted": "the program used up its instruction budget (fuel)",
  "wasm-trap": "the interpreter trapped",
  "wasm-memory-limit": "the program asked for more memory than its limit",
  "output-limit": "the program wrote past its output limit and was killed",
  "disk-limit": "a writable directory was full",
  "setup-failed": "the jail could not be built",
};

/** The language of a runtime, from its name or what the server says runs in it. */
function language(runtime: string, info?: Info["runtimes"][number]): string {
  const runs: Record<string, unknown> = info ? { ...info.runs } : {};
  const name = String(runs.guest ?? runs.bootstrap ?? runtime);
  if (/^py/i.test(name)) return "Python";
  if (/^(javascript|js|quickjs)/i.test(name)) return "JavaScript";
  return `the ${runtime} runtime's language`;
}

/** The description the model gets, by default. */
export function describeTool(runtime: string, options: { session?: Session; tools?: Tools; info?: Info["runtimes"][number] } = {}): string {
  const lang = language(runtime, options.info);
  const print = lang === "JavaScript" ? "console.log" : "print";
  const lines = [
    `Runs ${lang} code in an isolated sandbox (a stockade jail, no network unless allowed) and returns ` +
      `its status, stdout, stderr and the value of its last expression, as a notebook cell shows it. ` +
      `Use ${print}() for anything else you need to see. The working directory is /app.`,
  ];
  const mode = options.session?.info.mode;
  if (mode === "live") lines.push("Calls are turns of one interpreter: variables, functions and imports persist between calls.");
  else if (mode === "workspace") lines.push("Files written in /app persist between calls; variables do not (each call is a fresh interpreter).");
  else lines.push("Each call is a fresh interpreter with an empty /app: nothing persists between calls.");
  const names = Object.keys(options.tools ?? {});
  if (names.length > 0) {
    const how = lang === "JavaScript" ? "host.call(name, args)" : "import stockade_host; stockade_host.call(name, args)";
    lines.push(`The code may call these host functions with ${how}: ${names.join(", ")}.`);
  }
  lines.push("A status other than ok comes with a reason.");
  return lines.join(" ");
}

/** Text cut to `max` characters, and whether it was. */
function cut(text: string, max: number): [string, boolean] {
  if (text.length <= max) return [text, false];
  return [`${text.slice(0, max)}\n[... ${text.length - max} more characters cut]`, true];
}

/** A run's result as the model reads it. */
export function toolResult(r: RunResult, maxOutputChars = DEFAULT_MAX_OUTPUT_CHARS): StockadeToolResult {
  const [stdout, stdoutCut] = cut(r.stdout, maxOutputChars);
  const [stderr, stderrCut] = cut(r.stderr, maxOutputChars);
  const out: StockadeToolResult = {
    status: r.status,
    exitCode: r.exitCode,
    stdout,
    stderr,
    stdoutTruncated: r.stdoutTruncated || stdoutCut,
    stderrTruncated: r.stderrTruncated || stderrCut,
    wallMs: r.wallMs,
  };
  if (!r.ok) {
    const last = r.stderr.trim().split("\n").pop() ?? "";
    const base = r.error ?? REASONS[r.status] ?? r.status;
    out.reason = r.status === "exited-nonzero" && last ? `${base} (${r.exitCode}): ${last}` : base;
  }
  if (r.value !== null) out.value = r.value;
  if (r.valueRepr !== null) out.valueRepr = r.valueRepr;
  if (r.outputs.length > 0) out.figures = r.outputs.length;
  if (r.interpreter !== null) out.interpreter = r.interpreter;
  return out;
}

/** A refusal of the server's as the model reads it. */
function refusal(e: StockadeError): StockadeToolResult {
  const out: StockadeToolResult = { status: "refused", reason: e.message, stdout: "", stderr: "", stdoutTruncated: false, stderrTruncated: false };
  if (e.code) out.code = e.code;
  if (e.field) out.field = e.field;
  return out;
}

/**
 * An AI SDK tool that runs the model's code through `client`: its input `{ code }`, its output a
 * {@link StockadeToolResult}. Each call is a run (`runtime`, `limits`, `policy`, host `tools`), or
 * a run of `session`. A run that fails (a timeout, an exception) and a request the server refuses
 * (a limit looser than the policy's, a full queue, a busy session) come back as results the model
 * reads; only an unreachable server ({@link ServerUnavailable}), a rejected token
 * ({@link Unauthorized}) and a cancelled call (the step's `abortSignal`) throw, which the AI SDK
 * hands the model as a tool error.
 */
export function stockadeTool(client: Client, options: StockadeToolOptions = {}): StockadeTool {
  const { session, limits, policy, tools } = options;
  if (session && policy !== undefined) throw new TypeError("a session's runs take its own policy: no policy with a session");
  const runtime = session ? session.info.runtime : (options.runtime ?? "python");
  if (session && options.runtime !== undefined && options.runtime !== runtime) {
    throw new TypeError(`the session runs ${runtime}, not ${options.runtime}`);
  }
  const max = options.maxOutputChars ?? DEFAULT_MAX_OUTPUT_CHARS;
  return tool({
    description: options.description ?? describeTool(runtime, { ...(session && { session }), ...(tools && { tools }) }),
    inputSchema: jsonSchema<StockadeToolInput>(INPUT_SCHEMA, { validate }),
    execute: async ({ code }, { abortSignal }) => {
      // Called directly, not through the SDK's check of the input.
      if (typeof code !== "string") throw new TypeError('the input is { "code": string }');
      try {
        const r = session
          ? await session.run(code, { limits, tools, signal: abortSignal })
          : await client.run(runtime, code, { limits, policy, tools, signal: abortSignal });
        return toolResult(r, max);
      } catch (e) {
        if (e instanceof StockadeError && !(e instanceof ServerUnavailable) && !(e instanceof Unauthorized)) return refusal(e);
        throw e;
      }
    },
  });
}

/** How {@link stockadeTools} makes its tools. */
export type StockadeToolsOptions = Omit<StockadeToolOptions, "runtime" | "session" | "description"> & {
  /** Only these runtimes (default: every one the server has available). */
  runtimes?: string[];
  /** The tools' names, from a runtime's (default `run_${runtime}`, made of `A-Z a-z 0-9 _ -`). */
  name?: (runtime: string) => string;
  /** A call's signal (for `info()`). */
  signal?: AbortSignal;
};

/**
 * One {@link stockadeTool} per runtime the server lists as available (`info().runtimes`), by name:
 * `{ run_python, run_javascript, ... }`.
 */
export async function stockadeTools(client: Client, options: StockadeToolsOptions = {}): Promise<Record<string, StockadeTool>> {
  const { runtimes: only, name, signal, ...rest } = options;
  const info = await client.info({ signal });
  for (const r of only ?? []) {
    if (!info.runtimes.some((rt) => rt.name === r && rt.available)) throw new TypeError(`the server has no runtime ${r} available`);
  }
  const out: Record<string, StockadeTool> = {};
  for (const rt of info.runtimes) {
    if (!rt.available || (only && !only.includes(rt.name))) continue;
    const key = name ? name(rt.name) : `run_${rt.name}`.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64);
    const description = describeTool(rt.name, { info: rt, ...(rest.tools && { tools: rest.tools }) });
    out[key] = stockadeTool(client, { ...rest, runtime: rt.name, description });
  }
  return out;
}
