/**
 * stockade: run untrusted code through `stockade serve`, from Node.
 *
 * ```ts
 * import { Client } from "stockade";
 * const client = new Client(); // /run/stockade/api.sock
 * const r = await client.runPython("print(6 * 7)");
 * console.log(r.stdout); // 42
 * ```
 *
 * @packageDocumentation
 */

export {
  BatchStream,
  Client,
  Session,
  type BatchEvent,
  type BatchInput,
  type BatchOptions,
  type BatchRun,
  type CallOptions,
  type Compare,
  type ClientOptions,
  type Done,
  type FileInfo,
  type Files,
  type Health,
  type HostCall,
  type Info,
  type Limits,
  type Output,
  type RunOptions,
  type SessionInfo,
  type SessionState,
  type SessionOptions,
  type SessionRunOptions,
  type StreamEvent,
  type Tool,
  type ToolFunction,
  type Tools,
  type WasmOptions,
} from "./client.js";
export {
  BadRequest,
  Busy,
  ERROR_STATUS,
  type ErrorCode,
  type ErrorDetails,
  PolicyNotFound,
  ServerUnavailable,
  SessionBusy,
  SessionEnded,
  SessionNotFound,
  StockadeError,
  Unauthorized,
} from "./errors.js";
export { DEFAULT_SOCKET, DEFAULT_TIMEOUT_MS } from "./http.js";
export type { components as Schemas, paths as Paths } from "./openapi.js";
export {
  type BatchAnswer,
  BatchResult,
  type BatchSummary,
  type CallRecord,
  type EgressReport,
  type Figure,
  type Interpreter,
  type LayerReport,
  type Report,
  RunFailed,
  RunResult,
  type SessionRun,
  type Verdict,
} from "./result.js";
