import type { components } from "./openapi.js";

/** The server's error codes (`docs/api.md`), as `docs/openapi.json` lists them. */
export type ErrorCode = components["schemas"]["ErrorCode"];

/** What an error carries besides its message. */
export interface ErrorDetails {
  /** The server's error code (`bad-request`, `queue-full`, ...); absent when the server was never reached. */
  code?: string | undefined;
  /** The request field the error names (`files[0].path`, `limits.wall-timeout-ms`). */
  field?: string | undefined;
  /** The HTTP status; absent when the server was never reached. */
  status?: number | undefined;
  /** What caused it (a socket error, say). */
  cause?: unknown;
}

/** An error from `stockade serve`, or from reaching it. */
export class StockadeError extends Error {
  /** The server's error code (`bad-request`, `queue-full`...). */
  readonly code: string | undefined;
  /** The request field the error names (`files[0].path`). */
  readonly field: string | undefined;
  /** The HTTP status (`undefined` when the server was never reached). */
  readonly status: number | undefined;

  constructor(message: string, details: ErrorDetails = {}) {
    const where = details.field ? ` (${details.field})` : "";
    const code = details.code ? `${details.code}: ` : "";
    super(`${code}${message}${where}`, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = new.target.name;
    this.code = details.code;
    this.field = details.field;
    this.status = details.status;
  }
}

/** The server refused the request as malformed or over a cap (400, 408, 413, 415). */
export class BadRequest extends StockadeError {}

/** No token, or a token the server does not know (401, 403). */
export class Unauthorized extends StockadeError {}

/** The request named a policy the server does not have (404 `policy-not-found`). */
export class PolicyNotFound extends StockadeError {}

/**
 * Every run slot and the queue are taken (429 `queue-full`; 503 `queue-timeout`, `busy`).
 * Nothing ran. `retryAfter` is the server's `Retry-After`, seconds.
 */
export class Busy extends StockadeError {
  /** The server's `Retry-After`, seconds. */
  readonly retryAfter: number | undefined;
  constructor(message: string, details: ErrorDetails & { retryAfter?: number | undefined } = {}) {
    super(message, details);
    this.retryAfter = details.retryAfter;
  }
}

/**
 * The server could not be reached, is shutting down (503 `draining`), failed (5xx), or did not
 * answer within the client's timeout (the run may have happened then).
 */
export class ServerUnavailable extends StockadeError {
  /** The server's `Retry-After`, seconds. */
  readonly retryAfter: number | undefined;
  constructor(message: string, details: ErrorDetails & { retryAfter?: number | undefined } = {}) {
    super(message, details);
    this.retryAfter = details.retryAfter;
  }
}

/**
 * No such session, or no such file in its workspace (404). With tokens on, a session of another
 * token is {@link Unauthorized} (403), as an id never made is.
 */
export class SessionNotFound extends StockadeError {}

/** The session ended (410): the message says which clock ended it, or that it was deleted. */
export class SessionEnded extends SessionNotFound {}

/** The session is running a run (409 `session-busy`): `run` is its id. Nothing ran. */
export class SessionBusy extends StockadeError {
  /** The id of the run the session is busy with. */
  readonly run: string | undefined;
  constructor(message: string, details: ErrorDetails & { run?: string | undefined } = {}) {
    super(message, details);
    this.run = details.run;
  }
}

/** `Retry-After` in seconds, if the answer had one. */
function retryAfterOf(value: string | string[] | undefined): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined) return undefined;
  const n = Number(v);
  return Number.isFinite(n) ? Math.max(0, n) : undefined;
}

/**
 * The HTTP status the server answers each of its error codes with (`docs/api.md`). A streamed
 * run's error event has no status of its own: it is given its code's, and so the class an HTTP
 * refusal with that code would have. (A code `docs/openapi.json` adds fails to compile here.)
 */
export const ERROR_STATUS: Readonly<Record<ErrorCode, number>> = Object.freeze({
  "bad-request": 400,
  unauthorized: 401,
  forbidden: 403,
  "policy-not-found": 404,
  "not-found": 404,
  "session-not-found": 404,
  "call-not-found": 404,
  "method-not-allowed": 405,
  "body-timeout": 408,
  "session-busy": 409,
  "file-conflict": 409,
  "cannot-hibernate": 409,
  "idempotency-conflict": 409,
  "session-ended": 410,
  "payload-too-large": 413,
  "unsupported-media-type": 415,
  "idempotency-mismatch": 422,
  "queue-full": 429,
  "too-many-sessions": 429,
  "jail-setup-failed": 500,
  internal: 500,
  "queue-timeout": 503,
  busy: 503,
  draining: 503,
  "runtime-unavailable": 503,
});

/** What a refusal says besides its status, code and message. */
interface Refusal {
  field?: string | undefined;
  run?: string | undefined;
  retryAfter?: number | undefined;
}

/**
 * The error for a refusal with HTTP `status` and error `code`: its class is picked from both
 * (`undefined`, a status never had: a plain {@link StockadeError}).
 */
export function errorOf(status: number | undefined, code: string | undefined, message: string, r: Refusal = {}): StockadeError {
  const d: ErrorDetails = { code, field: r.field, status };
  if (status === undefined) return new StockadeError(message, d);
  if (status === 401 || status === 403) return new Unauthorized(message, d);
  if (status === 404 && code === "policy-not-found") return new PolicyNotFound(message, d);
  if (status === 410) return new SessionEnded(message, d);
  if (status === 404 && (code === "session-not-found" || code === "not-found")) return new SessionNotFound(message, d);
  if (status === 409 && code === "session-busy") return new SessionBusy(message, { ...d, run: r.run });
  if (status === 429 || (status === 503 && (code === "queue-timeout" || code === "busy"))) {
    return new Busy(message, { ...d, retryAfter: r.retryAfter });
  }
  if (status >= 500) return new ServerUnavailable(message, { ...d, retryAfter: r.retryAfter });
  if (status >= 400) return new BadRequest(message, d);
  return new StockadeError(message, d);
}

/** An `ApiError`'s parts (`{ code, message, field, run }`), those that are strings. */
function refusalOf(err: unknown): { code?: string; message?: string; field?: string; run?: string } {
  if (!err || typeof err !== "object") return {};
  const e = err as Record<string, unknown>;
  const text = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
  return { code: text(e.code), message: text(e.message), field: text(e.field), run: text(e.run) };
}

/** The error for a non-2xx answer: its JSON error, or the status alone. */
export function errorFor(status: number, headers: Record<string, string | string[] | undefined>, body: Uint8Array): StockadeError {
  let err: ReturnType<typeof refusalOf> = {};
  try {
    err = refusalOf(JSON.parse(Buffer.from(body).toString("utf8")).error);
  } catch {
    // Not JSON: the status says it.
  }
  const retryAfter = retryAfterOf(headers["retry-after"]);
  return errorOf(status, err.code, err.message ?? `HTTP ${status}`, { field: err.field, run: err.run, retryAfter });
}

/**
 * The error for a streamed run's error event (`{"error": {"code", "message", "field"}}`): the
 * class and the `status` of an HTTP refusal with its code ({@link ERROR_STATUS}).
 */
export function streamError(error: unknown): StockadeError {
  const err = refusalOf(error);
  const status = err.code !== undefined && Object.hasOwn(ERROR_STATUS, err.code) ? ERROR_STATUS[err.code as ErrorCode] : undefined;
  return errorOf(status, err.code, err.message ?? "the run failed", { field: err.field, run: err.run });
}
