import * as http from "node:http";
import type { Socket } from "node:net";
import { StringDecoder } from "node:string_decoder";
import { Busy, ServerUnavailable, StockadeError, errorFor } from "./errors.js";

/** The default unix socket of `stockade serve`. */
export const DEFAULT_SOCKET = "/run/stockade/api.sock";
/** How long a request may take by default, milliseconds (a run's own limit is its policy's). */
export const DEFAULT_TIMEOUT_MS = 60_000;
/** A refused request waits at most this long before it is tried again, whatever `Retry-After` says. */
const MAX_RETRY_WAIT_MS = 5_000;

/** Where the server is, and how to speak to it. */
export interface Endpoint {
  socketPath?: string;
  host: string;
  port: number;
  /** Prefix of every path (a URL's own path). */
  prefix: string;
  headers: Record<string, string>;
  timeoutMs: number;
  retries: number;
  agent: http.Agent;
}

/** One request's options. */
export interface Call {
  method: string;
  path: string;
  body?: Uint8Array | undefined;
  contentType?: string;
  signal?: AbortSignal | undefined;
  /** Safe to send again after a connection lost mid-way (it changes nothing twice: a read, or a
   * run with its `Idempotency-Key`). */
  idempotent: boolean;
  /** Headers of this call's own (a run's `Idempotency-Key`). */
  headers?: Record<string, string>;
  /** A call that may start a run and is not idempotent (a streamed run): never sent again once
   * it may have reached the server, not even on a kept-alive connection that turned out closed
   * (the server may have read it first). */
  mayRun?: boolean;
}

/** An answer, read whole. */
export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** A connection error that means the request never reached the server (a kept-alive
 * connection found closed: almost always, unless the server read it and then closed). */
function neverSent(e: unknown, mayRun: boolean): boolean {
  const code = (e as { code?: string } | null)?.code;
  return code === "ECONNREFUSED" || code === "ENOENT" || code === "EACCES" || (code === "ESTALE_KEEPALIVE" && !mayRun);
}

/** The error to throw for `e` when the call was cancelled: the signal's reason (an `AbortError`). */
function aborted(e: unknown, signal: AbortSignal | undefined): unknown {
  if (signal?.aborted) return signal.reason ?? e;
  return (e as { name?: string } | null)?.name === "AbortError" ? e : undefined;
}

/** What a failure to reach the server is, as an error. */
function unreachable(e: unknown, sent: boolean): ServerUnavailable {
  const why = e instanceof Error ? e.message : String(e);
  if ((e as { code?: string } | null)?.code === "ETIMEDOUT_CLIENT") {
    return new ServerUnavailable(`no answer within the client's timeout (the run may have happened): ${why}`, { cause: e });
  }
  if (!sent) return new ServerUnavailable(`cannot reach the server: ${why}`, { cause: e });
  return new ServerUnavailable(`the connection was lost after the request was sent (the run may have happened): ${why}`, {
    cause: e,
  });
}

/** Responses upgraded to another protocol (101): their connection, and what came after the head. */
const upgrades = new WeakMap<http.IncomingMessage, { socket: Socket; head: Buffer }>();

/** The connection of a response upgraded to another protocol (101), and the bytes that came
 * after its head; `undefined` for any other response. */
export function upgraded(res: http.IncomingMessage): { socket: Socket; head: Buffer } | undefined {
  return upgrades.get(res);
}

/** Sends one request; resolves with the response as it starts (its body not read yet). */
function send(ep: Endpoint, call: Call, idleTimeoutMs: number | undefined): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { ...ep.headers, ...call.headers };
    if (call.body) {
      headers["content-type"] = call.contentType ?? "application/json";
      headers["content-length"] = call.body.byteLength;
    }
    const req = http.request({
      agent: ep.agent,
      socketPath: ep.socketPath,
      host: ep.host,
      port: ep.port,
      method: call.method,
      path: ep.prefix + call.path,
      headers,
      signal: call.signal,
    });
    let sent = false;
    let timer: NodeJS.Timeout | undefined;
    const fail = (e: unknown): void => {
      if (timer) clearTimeout(timer);
      const cancelled = aborted(e, call.signal);
      if (cancelled !== undefined) return reject(cancelled);
      // A kept-alive connection the server had closed: the request never reached it (Node's
      // advice: send it again).
      if (req.reusedSocket && (e as { code?: string }).code === "ECONNRESET") {
        return reject(unreachable(Object.assign(new Error("a kept-alive connection was closed"), { code: "ESTALE_KEEPALIVE" }), false));
      }
      reject(unreachable(e, sent));
    };
    // The whole wait for the answer's start; an idle stream is bounded by `idleTimeoutMs`.
    timer = setTimeout(() => {
      const e = Object.assign(new Error(`${ep.timeoutMs} ms passed`), { code: "ETIMEDOUT_CLIENT" });
      req.destroy(e);
    }, ep.timeoutMs);
    req.on("error", fail);
    req.on("response", (res) => {
      if (timer) clearTimeout(timer);
      if (idleTimeoutMs !== undefined) {
        const socket = res.socket;
        const idle = (): void => {
          res.destroy(Object.assign(new Error(`no byte for ${idleTimeoutMs} ms`), { code: "ETIMEDOUT_CLIENT" }));
        };
        socket.setTimeout(idleTimeoutMs);
        socket.on("timeout", idle);
        // The socket goes back to the pool (which sets its own timeout): without this listener.
        res.once("close", () => socket.removeListener("timeout", idle));
      }
      resolve(res);
    });
    // A streamed run with tools upgraded to `stockade-calls`: its connection is the answer.
    req.on("upgrade", (res, socket, head) => {
      if (timer) clearTimeout(timer);
      // A unix or TCP connection: a net.Socket, as Node makes them for http.request.
      upgrades.set(res, { socket: socket as Socket, head });
      resolve(res);
    });
    req.on("finish", () => {
      sent = true;
    });
    req.end(call.body ? Buffer.from(call.body.buffer, call.body.byteOffset, call.body.byteLength) : undefined);
  });
}

/** Reads a response's body whole. */
function readAll(res: http.IncomingMessage, signal: AbortSignal | undefined): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on("data", (c: Buffer) => chunks.push(c));
    res.on("end", () => resolve(Buffer.concat(chunks)));
    res.on("error", (e) => reject(aborted(e, signal) ?? unreachable(e, true)));
    res.on("aborted", () => reject(unreachable(new Error("the answer was cut"), true)));
  });
}

/** Waits `ms`, unless `signal` aborts first. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * A refusal that says nothing ran (a full queue, a draining server), or a connection that was
 * never made: safe to try again. A run is not idempotent: it is tried again only then, never
 * after it may have started.
 */
function retryDelay(failure: unknown, attempt: number, retries: number, call: Call): number | undefined {
  const idempotent = call.idempotent;
  if (attempt >= retries) return undefined;
  if (failure instanceof Busy || (failure instanceof ServerUnavailable && failure.code === "draining")) {
    const after = failure.retryAfter;
    return Math.min(MAX_RETRY_WAIT_MS, after !== undefined ? after * 1000 : 100 * 2 ** attempt);
  }
  if (failure instanceof ServerUnavailable && failure.status === undefined) {
    const cause = failure.cause;
    if (neverSent(cause, call.mayRun ?? false) || (idempotent && (cause as { code?: string } | null)?.code !== "ETIMEDOUT_CLIENT")) {
      return 100 * 2 ** attempt;
    }
  }
  return undefined;
}

/**
 * Sends `call` and opens its answer, trying again where that is safe; a non-2xx answer is
 * thrown as its error.
 */
export async function open(ep: Endpoint, call: Call, idleTimeoutMs?: number): Promise<http.IncomingMessage> {
  for (let attempt = 0; ; attempt++) {
    let failure: unknown;
    try {
      const res = await send(ep, call, idleTimeoutMs);
      const status = res.statusCode ?? 0;
      if ((status >= 200 && status < 300) || upgrades.has(res)) return res;
      failure = errorFor(status, res.headers, await readAll(res, call.signal));
    } catch (e) {
      const cancelled = aborted(e, call.signal);
      if (cancelled !== undefined) throw cancelled;
      if (!(e instanceof StockadeError)) throw e;
      failure = e;
    }
    const delay = retryDelay(failure, attempt, ep.retries, call);
    if (delay === undefined) throw failure;
    await sleep(delay, call.signal);
  }
}

/** Sends `call` and reads its answer whole, all of it within the client's timeout (an answer
 * that comes a byte at a time is cut as one that does not come). */
export async function request(ep: Endpoint, call: Call): Promise<Answer> {
  const t0 = Date.now();
  const res = await open(ep, call);
  const left = Math.max(0, ep.timeoutMs - (Date.now() - t0));
  const late = Object.assign(new Error(`${ep.timeoutMs} ms passed`), { code: "ETIMEDOUT_CLIENT" });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    res.destroy(late);
  }, left);
  try {
    const body = await readAll(res, call.signal);
    return { status: res.statusCode ?? 0, headers: res.headers, body };
  } catch (e) {
    // However the cut answer ended, it was the timeout's.
    throw timedOut ? unreachable(late, true) : e;
  } finally {
    clearTimeout(timer);
  }
}

/** The JSON of an answer. */
export function json<T>(a: Answer): T {
  try {
    return JSON.parse(a.body.toString("utf8")) as T;
  } catch (e) {
    throw new StockadeError(`the server's answer is not JSON: ${a.body.subarray(0, 80).toString("utf8")}`, { cause: e });
  }
}

/** The lines of a streamed answer (or an upgraded connection's, `head` its first bytes), as they come. */
export async function* lines(
  res: AsyncIterable<unknown> & { destroy(): void },
  signal: AbortSignal | undefined,
  head?: Buffer,
): AsyncGenerator<string> {
  const text = new StringDecoder("utf8");
  let pending = head ? text.write(head) : "";
  try {
    for await (const chunk of res) {
      pending += text.write(chunk as Buffer);
      let nl: number;
      while ((nl = pending.indexOf("\n")) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        if (line.trim()) yield line;
      }
    }
  } catch (e) {
    throw aborted(e, signal) ?? unreachable(e, true);
  } finally {
    res.destroy();
  }
  if (pending.trim()) yield pending;
}
