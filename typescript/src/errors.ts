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

/** The error for a non-2xx answer: its JSON error, or the status alone. */
export function errorFor(status: number, headers: Record<string, string | string[] | undefined>, body: Uint8Array): StockadeError {
  let code: string | undefined;
  let message = `HTTP ${status}`;
  let field: string | undefined;
  let run: string | undefined;
  try {
    const err = JSON.parse(Buffer.from(body).toString("utf8")).error;
    if (err && typeof err === "object") {
      code = typeof err.code === "string" ? err.code : undefined;
      message = typeof err.message === "string" ? err.message : message;
      field = typeof err.field === "string" ? err.field : undefined;
      run = typeof err.run === "string" ? err.run : undefined;
    }
  } catch {
    // Not JSON: the status says it.
  }
  const d: ErrorDetails = { code, field, status };
  const retryAfter = retryAfterOf(headers["retry-after"]);
  if (status === 401 || status === 403) return new Unauthorized(message, d);
  if (status === 404 && code === "policy-not-found") return new PolicyNotFound(message, d);
  if (status === 410) return new SessionEnded(message, d);
  if (status === 404 && (code === "session-not-found" || code === "not-found")) return new SessionNotFound(message, d);
  if (status === 409 && code === "session-busy") return new SessionBusy(message, { ...d, run });
  if (status === 429 || (status === 503 && (code === "queue-timeout" || code === "busy"))) {
    return new Busy(message, { ...d, retryAfter });
  }
  if (status >= 500) return new ServerUnavailable(message, { ...d, retryAfter });
  if (status >= 400) return new BadRequest(message, d);
  return new StockadeError(message, d);
}
