import { StockadeError } from "./errors.js";
import type { components } from "./openapi.js";

/** A run's report as the server sends it (`docs/report.md`), with the files it gave back. */
export type Report = components["schemas"]["RunResult"] & {
  /** A session's run: what the session kept (`docs/api.md`). */
  session?: components["schemas"]["SessionRun"];
};
/** One host call of a run, as its report lists it. */
export type CallRecord = components["schemas"]["CallRecord"];
/** The connections a run asked its egress proxy for (a policy with an egress list). */
export type EgressReport = components["schemas"]["EgressReport"];
/** One isolation layer of the run's jail: what was asked, what was applied. */
export type LayerReport = components["schemas"]["LayerReport"];
/** What became of a live session's interpreter in a run. */
export type Interpreter = components["schemas"]["Interpreter"];
/** A session's part of a run's answer. */
export type SessionRun = components["schemas"]["SessionRun"];
/**
 * A judge's word on a batch's run with an `expect`: `accepted` (it ended well and printed what
 * was expected), `wrong-answer`, `timeout` (its wall clock or its fuel), `memory-limit`,
 * `output-limit`, `runtime-error` (it raised, exited non-zero, trapped or was killed),
 * `internal-error` (the jail failed it).
 */
export type Verdict = components["schemas"]["Verdict"];
/** How a batch went: its runs, how many ended with each status and each verdict, its jails, its wall time. */
export type BatchSummary = components["schemas"]["BatchSummary"];
/** `POST /v1/batches`'s answer as the server sends it. */
export type BatchAnswer = components["schemas"]["BatchAnswer"];

/** A figure the run's code left open, given back (`type` is `image/png`). */
export interface Figure {
  readonly type: string;
  readonly data: Uint8Array;
}

const decoder = new TextDecoder("utf-8");

/** A stream's bytes from its report (text, or base64 for bytes that are not UTF-8). */
function streamBytes(s: components["schemas"]["StreamReport"] | undefined): Uint8Array {
  if (!s) return new Uint8Array();
  if (typeof s.text === "string") return new TextEncoder().encode(s.text);
  if (typeof s.base64 === "string") return new Uint8Array(Buffer.from(s.base64, "base64"));
  return new Uint8Array();
}

/** What a run did: the server's report, its fields in TypeScript's spelling. */
export class RunResult {
  /** `ok`, `exited-nonzero`, `timeout`, `memory-limit`, ... (`docs/report.md`). */
  readonly status: Report["status"];
  /** The program's exit code, when it exited. */
  readonly exitCode: number | null;
  /** The signal that ended the program, when one did. */
  readonly signal: number | null;
  /** Its name (`SIGKILL`), when a signal ended the program. */
  readonly signalName: string | null;
  /** What the program wrote on stdout (up to the cap; see {@link stdoutTruncated}). */
  readonly stdoutBytes: Uint8Array;
  /** What the program wrote on stderr (up to the cap; see {@link stderrTruncated}). */
  readonly stderrBytes: Uint8Array;
  /** Output past the stdout cap was dropped. */
  readonly stdoutTruncated: boolean;
  /** Output past the stderr cap was dropped. */
  readonly stderrTruncated: boolean;
  /** The run's wall-clock time, milliseconds. */
  readonly wallMs: number;
  /** The run's CPU time (user and system), milliseconds. */
  readonly cpuMs: number;
  /** The most memory the run's cgroup held, bytes (when the host measures it). */
  readonly memoryPeakBytes: number | null;
  /** The files given back (`returnFiles`): path → bytes. */
  readonly files: Record<string, Uint8Array>;
  /** More files matched than the server gives back. */
  readonly filesCapped: boolean;
  /** Matching files not given back: path → why. */
  readonly filesSkipped: Record<string, string>;
  /** Every layer of the jail: asked, applied, enforced or not. */
  readonly enforcement: LayerReport[];
  /** The run's host calls, in order (name, bytes each way, time, outcome). */
  readonly hostCalls: CallRecord[];
  /** What the run's egress proxy opened and refused, each connection with its bytes (a policy
   * with an egress list), else `null`. */
  readonly egress: EgressReport | null;
  /** Why the run failed, in words, when it did. */
  readonly error: string | null;
  /** A session's run: the session's id, this run's id, what was kept, the interpreter. */
  readonly session: SessionRun | null;
  /**
   * The value of the code's last expression, as a notebook shows it: parsed JSON (Python's
   * `1 + 1`, JavaScript's `[1, 2].map(x => x * 2)`); `null` when the code ended with a statement,
   * its value was `None`/`undefined`, or it is not JSON (see {@link valueRepr}).
   */
  readonly value: unknown;
  /** That value's `repr` (Python) or `String()` (JavaScript) when it is not JSON, else `null`. */
  readonly valueRepr: string | null;
  /** The figures the code left open (a runtime with matplotlib), as PNG. */
  readonly outputs: Figure[];
  /** A batch's run with an `expect`: the judge's word on it; else `null`. */
  readonly verdict: Verdict | null;
  /** The jail this run shared with others, when it did: `batch` (a batch's run); else `null`. */
  readonly jail: string | null;
  /** The batch this run was one of (`b-...`); else `null`. */
  readonly batchId: string | null;
  /** The whole report, as the server sent it. */
  readonly report: Report;

  /** A result from a report (a streamed run's output comes apart: pass it). */
  constructor(report: Report, output?: { stdout: Uint8Array; stderr: Uint8Array }) {
    this.report = report;
    this.status = report.status;
    this.exitCode = report["exit-code"] ?? null;
    this.signal = report.signal ?? null;
    this.signalName = report["signal-name"] ?? null;
    this.stdoutBytes = output ? output.stdout : streamBytes(report.stdout);
    this.stderrBytes = output ? output.stderr : streamBytes(report.stderr);
    this.stdoutTruncated = report.stdout?.truncated ?? false;
    this.stderrTruncated = report.stderr?.truncated ?? false;
    this.wallMs = report["wall-ms"] ?? 0;
    this.cpuMs = (report["cpu-user-ms"] ?? 0) + (report["cpu-sys-ms"] ?? 0);
    this.memoryPeakBytes = report["memory-peak-bytes"] ?? null;
    this.files = {};
    for (const f of report.files ?? []) this.files[f.path] = new Uint8Array(Buffer.from(f.content ?? "", "base64"));
    this.filesCapped = report["files-capped"] ?? false;
    this.filesSkipped = {};
    for (const f of report["files-skipped"] ?? []) this.filesSkipped[f.path] = f.reason;
    this.enforcement = report.enforcement ?? [];
    this.hostCalls = report["host-calls"] ?? [];
    this.egress = report.egress ?? null;
    this.error = report.error ?? null;
    this.session = report.session ?? null;
    this.value = report.value ?? null;
    this.valueRepr = report["value-repr"] ?? null;
    this.outputs = (report.outputs ?? []).map((o) => ({
      type: o.type,
      data: new Uint8Array(Buffer.from(o.base64, "base64")),
    }));
    this.verdict = report.verdict ?? null;
    this.jail = report.jail ?? null;
    this.batchId = report["batch-id"] ?? null;
  }

  /** The program exited with 0 (status `ok`). */
  get ok(): boolean {
    return this.status === "ok";
  }

  /** What the program wrote on stdout, as text (UTF-8, undecodable bytes replaced). */
  get stdout(): string {
    return decoder.decode(this.stdoutBytes);
  }

  /** What the program wrote on stderr, as text. */
  get stderr(): string {
    return decoder.decode(this.stderrBytes);
  }

  /**
   * A live session's run: `started` (a new interpreter), `kept` (the same one as the run before),
   * `resumed` (its state back from its hibernated image: {@link resumeMs}) or `restarted` (its
   * state is gone, the files are kept: it ended in this run, or it was lost before it and
   * {@link interpreterReason} says why). Else `null`.
   */
  get interpreter(): Interpreter | null {
    return this.session?.interpreter ?? null;
  }

  /** Why a live session's interpreter was not kept, when it was lost before this run; else `null`. */
  get interpreterReason(): string | null {
    return this.session?.["interpreter-reason"] ?? null;
  }

  /** A resumed interpreter's resume, in milliseconds (its jail, its guest, its image); else `null`. */
  get resumeMs(): number | null {
    return this.session?.["resume-ms"] ?? null;
  }

  /** Throws {@link RunFailed} unless the run's status is `ok`; returns the result. */
  raiseForStatus(): this {
    if (!this.ok) throw new RunFailed(this);
    return this;
  }
}

/** Thrown by {@link RunResult.raiseForStatus} for a run that did not end with status `ok`. */
export class RunFailed extends StockadeError {
  /** The run's result. */
  readonly result: RunResult;
  constructor(result: RunResult) {
    const last = result.stderr.trim().split("\n").pop() ?? "";
    const detail = result.error ?? last;
    super(`the run ended with ${result.status}${detail ? `: ${detail}` : ""}`, { code: result.status });
    this.result = result;
  }
}

/**
 * What a batch did ({@link Client.batch}): every run's {@link RunResult} in the runs' order (each
 * with its `verdict` when it had an `expect`, `jail === "batch"` and the `batchId`), the
 * {@link BatchSummary}, and the batch's id.
 */
export class BatchResult {
  /** The server's id of the batch (`b-...`). */
  readonly batchId: string;
  /** Every run's result, in the runs' (or inputs') order. */
  readonly results: RunResult[];
  /** How the batch went: `runs`, `statuses`, `verdicts` (each a count), `jails`, `wall-ms`. */
  readonly summary: BatchSummary;
  /** The whole answer, as the server sent it. */
  readonly answer: BatchAnswer;

  constructor(answer: BatchAnswer) {
    this.answer = answer;
    this.batchId = answer["batch-id"];
    this.results = (answer.results ?? []).map((r) => new RunResult(r as Report));
    this.summary = answer.summary;
  }

  /** Each run's verdict, in the runs' order (`null` for a run with no `expect`). */
  get verdicts(): (Verdict | null)[] {
    return this.results.map((r) => r.verdict);
  }
}
