// Generated from docs/openapi.json by scripts/openapi.mjs (`npm run openapi`). Do not edit.
/* eslint-disable */
export interface paths {
    "/v1/runs": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Run code (or a Wasm module) in a jail and report what happened */
        post: {
            parameters: {
                query?: {
                    /** @description answer as NDJSON events as output happens: {"stdout": TEXT}, {"stderr": TEXT} (or stdout-base64/stderr-base64), {"call": HostCall} for each host call of a run with tools (answer it at /v1/runs/{run}/calls/{id}), then the last event, a LastEvent: {"report": RunResult} or {"error": ...}; a run with tools must stream */
                    stream?: "ndjson";
                };
                header?: {
                    /** @description the same key (of the same caller, with the same path and body) within requests.idempotency-window-ms gets the first answer (with the header Idempotency-Replayed: true), never a second run; one still running is waited for; another request with the key is 422 idempotency-mismatch; not with ?stream */
                    "Idempotency-Key"?: string;
                };
                path?: never;
                cookie?: never;
            };
            requestBody: {
                content: {
                    "application/json": components["schemas"]["RunBody"];
                };
            };
            responses: {
                /** @description the run happened (whatever its status) */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["RunResult"];
                        "application/x-ndjson": string;
                    };
                };
                /** @description a bad request: the field is named */
                400: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description TCP without a bearer token */
                401: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description a token that is not accepted */
                403: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description no such policy */
                404: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the body did not arrive in time */
                408: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description idempotency-conflict: this Idempotency-Key's first answer cannot be given (it was too large to keep, or its first request ended without one) */
                409: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the body is over requests.body-max-bytes */
                413: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description not application/json */
                415: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description idempotency-mismatch: this Idempotency-Key was used with another request */
                422: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the queue is full */
                429: {
                    headers: {
                        /** @description seconds */
                        "Retry-After"?: number;
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the jail could not be built, or a bug of the server's: never bad input; the message has an incident number for the server's log */
                500: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the server is draining, the queue wait timed out, too many bodies or answers are in memory, or the runtime is unavailable */
                503: {
                    headers: {
                        /** @description seconds */
                        "Retry-After"?: number;
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
            };
        };
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/runs/{run}/calls/{call}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                run: string;
                call: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Answer a host call of a streaming run (its `call` event): the tool's value, or its error */
        post: {
            parameters: {
                query?: never;
                header?: never;
                path: {
                    run: string;
                    call: string;
                };
                cookie?: never;
            };
            requestBody: {
                content: {
                    "application/json": components["schemas"]["CallAnswer"];
                };
            };
            responses: {
                /** @description the run has its answer */
                204: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content?: never;
                };
                /** @description not exactly one of ok and error */
                400: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description no such call waits for an answer: answered, past its time, never made, or another caller's run */
                404: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
            };
        };
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/batches": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Run many programs (or one program against many inputs) of a Wasm guest's runtime, each in a fresh instance, sharing a jail; judge each against its expect */
        post: {
            parameters: {
                query?: {
                    /** @description answer as NDJSON lines as the runs end, a BatchEvent each: {"index", "result": RunResult}, then {"batch-id", "summary"} (or {"error"}); a client that hangs up ends its batch */
                    stream?: "ndjson";
                };
                header?: never;
                path?: never;
                cookie?: never;
            };
            requestBody: {
                content: {
                    "application/json": components["schemas"]["BatchBody"];
                };
            };
            responses: {
                /** @description the batch ran (whatever its runs' statuses) */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["BatchAnswer"];
                        "application/x-ndjson": string;
                    };
                };
                /** @description a bad request: the field is named (runs[3].stdin) */
                400: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description TCP without a bearer token */
                401: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description a token that is not accepted */
                403: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description no such policy */
                404: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the body did not arrive in time */
                408: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the body is over requests.body-max-bytes */
                413: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description not application/json */
                415: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the queue is full */
                429: {
                    headers: {
                        /** @description seconds */
                        "Retry-After"?: number;
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the batch's jail could not be built, or a bug of the server's */
                500: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the server is draining, the queue wait timed out, or the answers in memory have no room for the batch's */
                503: {
                    headers: {
                        /** @description seconds */
                        "Retry-After"?: number;
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
            };
        };
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The caller's sessions (made with its token, or on the unix socket) */
        get: {
            parameters: {
                query?: never;
                header?: never;
                path?: never;
                cookie?: never;
            };
            requestBody?: never;
            responses: {
                /** @description the caller's sessions */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": {
                            sessions?: components["schemas"]["SessionInfo"][];
                        };
                    };
                };
            };
        };
        put?: never;
        /** Open a session: runs of one runtime and policy that share a workspace (/app) between them */
        post: {
            parameters: {
                query?: never;
                header?: never;
                path?: never;
                cookie?: never;
            };
            requestBody: {
                content: {
                    "application/json": components["schemas"]["SessionBody"];
                };
            };
            responses: {
                /** @description the session */
                201: {
                    headers: {
                        /** @description /v1/sessions/ID: where the session lives (a balancer may learn its replica from it) */
                        Location?: string;
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["SessionInfo"];
                    };
                };
                /** @description a bad request: the field is named */
                400: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description no such policy */
                404: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the server holds sessions.max sessions (Retry-After: when the first one ends) */
                429: {
                    headers: {
                        /** @description seconds */
                        "Retry-After"?: number;
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
            };
        };
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        /** A session */
        get: {
            parameters: {
                query?: never;
                header?: never;
                path: {
                    id: string;
                };
                cookie?: never;
            };
            requestBody?: never;
            responses: {
                /** @description the session */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["SessionInfo"];
                    };
                };
                /** @description with tokens on: no session of this id for this token (the same answer whether it exists or not) */
                403: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description no such session (unix socket) */
                404: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the session ended (the message says what ended it) */
                410: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
            };
        };
        put?: never;
        post?: never;
        /** End a session and forget its files (a run in progress ends at its own wall limit; its workspace is not kept) */
        delete: {
            parameters: {
                query?: never;
                header?: never;
                path: {
                    id: string;
                };
                cookie?: never;
            };
            requestBody?: never;
            responses: {
                /** @description ended */
                204: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content?: never;
                };
                /** @description not this token's */
                403: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description no such session */
                404: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description already ended */
                410: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
            };
        };
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{id}/fork": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Fork a session: a new session of the caller's with a copy of this one's workspace and interpreter state (a python guest's), its own clocks; each goes on on its own */
        post: {
            parameters: {
                query?: never;
                header?: never;
                path: {
                    id: string;
                };
                cookie?: never;
            };
            requestBody?: never;
            responses: {
                /** @description the new session (`forked-from` names this one) */
                201: {
                    headers: {
                        /** @description /v1/sessions/ID of the new session */
                        Location?: string;
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["SessionInfo"];
                    };
                };
                /** @description not this token's */
                403: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description no such session */
                404: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the session is running a run (`session-busy`), or its interpreter cannot be copied now (`cannot-hibernate`: files it holds open, say) */
                409: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the session ended */
                410: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the server, or the token, holds as many sessions as it may */
                429: {
                    headers: {
                        /** @description seconds */
                        "Retry-After"?: number;
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
            };
        };
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{id}/hibernate": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Hibernate a live session: its interpreter written to the state directory and its jail ended; its next run resumes it (`interpreter: resumed`). An interpreter that cannot be written (not the python guest's) is ended, the workspace kept */
        post: {
            parameters: {
                query?: never;
                header?: never;
                path: {
                    id: string;
                };
                cookie?: never;
            };
            requestBody?: never;
            responses: {
                /** @description the session (`state`: `hibernated`, with `hibernate-ms` and `image-bytes`) */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["SessionInfo"];
                    };
                };
                /** @description a workspace session: the field is `mode` */
                400: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description not this token's */
                403: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description no such session */
                404: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the session is running a run (`session-busy`), or its interpreter cannot be written now (`cannot-hibernate`: files it holds open, say); it goes on as it was */
                409: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the session ended */
                410: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
            };
        };
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{id}/runs": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Run code in the session's workspace: a fresh jail, /app holding the session's files; /app as the run leaves it is kept */
        post: {
            parameters: {
                query?: {
                    /** @description as for /v1/runs */
                    stream?: "ndjson";
                };
                header?: {
                    /** @description the same key (of the same caller, with the same path and body) within requests.idempotency-window-ms gets the first answer (with the header Idempotency-Replayed: true), never a second run; one still running is waited for; another request with the key is 422 idempotency-mismatch; not with ?stream */
                    "Idempotency-Key"?: string;
                };
                path: {
                    id: string;
                };
                cookie?: never;
            };
            requestBody: {
                content: {
                    "application/json": components["schemas"]["SessionRunBody"];
                };
            };
            responses: {
                /** @description the run happened: its result, with `session` (the run's id, the workspace as kept, what was not kept and why) */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["RunResult"];
                        "application/x-ndjson": string;
                    };
                };
                /** @description a bad request: the field is named (a limit looser than the session's, files past the workspace's quota) */
                400: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description not this token's */
                403: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description no such session */
                404: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the session is running a run: the error's `run` names it */
                409: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the session ended */
                410: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the queue is full */
                429: {
                    headers: {
                        /** @description seconds */
                        "Retry-After"?: number;
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the jail could not be built, or a bug of the server's */
                500: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description draining, queue timeout, busy, or the runtime is unavailable */
                503: {
                    headers: {
                        /** @description seconds */
                        "Retry-After"?: number;
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
            };
        };
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{id}/runs/{run}/calls/{call}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
                run: string;
                call: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Answer a host call of a session's streaming run (as /v1/runs/{run}/calls/{call}; the session must be the caller's) */
        post: {
            parameters: {
                query?: never;
                header?: never;
                path: {
                    id: string;
                    run: string;
                    call: string;
                };
                cookie?: never;
            };
            requestBody: {
                content: {
                    "application/json": components["schemas"]["CallAnswer"];
                };
            };
            responses: {
                /** @description the run has its answer */
                204: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content?: never;
                };
                /** @description not exactly one of ok and error */
                400: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description not this token's session */
                403: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description no such session, or no such call waits for an answer */
                404: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
            };
        };
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{id}/files": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        /** The workspace's files, with their sizes and modification times */
        get: {
            parameters: {
                query?: never;
                header?: never;
                path: {
                    id: string;
                };
                cookie?: never;
            };
            requestBody?: never;
            responses: {
                /** @description the files */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["FileList"];
                    };
                };
                /** @description not this token's */
                403: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description no such session */
                404: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description the session ended */
                410: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
            };
        };
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{id}/files/{path}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
                /** @description relative to the workspace: plain names only (no `..`, `.`, leading `/`, NUL); percent-encoded as a URL's path */
                path: string;
            };
            cookie?: never;
        };
        /** A file's bytes */
        get: {
            parameters: {
                query?: never;
                header?: never;
                path: {
                    id: string;
                    /** @description relative to the workspace: plain names only (no `..`, `.`, leading `/`, NUL); percent-encoded as a URL's path */
                    path: string;
                };
                cookie?: never;
            };
            requestBody?: never;
            responses: {
                /** @description the bytes */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/octet-stream": string;
                    };
                };
                /** @description no such file, or no such session */
                404: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
            };
        };
        /** Write a file (its bytes are the body, any content type); its directories are made */
        put: {
            parameters: {
                query?: never;
                header?: never;
                path: {
                    id: string;
                    /** @description relative to the workspace: plain names only (no `..`, `.`, leading `/`, NUL); percent-encoded as a URL's path */
                    path: string;
                };
                cookie?: never;
            };
            requestBody: {
                content: {
                    "application/octet-stream": string;
                };
            };
            responses: {
                /** @description written */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["FileInfo"];
                    };
                };
                /** @description a path that leaves the workspace */
                400: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description a run is under way, or the path is both a file and a directory */
                409: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description past the workspace's quota (sessions.workspace-max-bytes, -files) or requests.body-max-bytes */
                413: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
            };
        };
        post?: never;
        /** Remove a file */
        delete: {
            parameters: {
                query?: never;
                header?: never;
                path: {
                    id: string;
                    /** @description relative to the workspace: plain names only (no `..`, `.`, leading `/`, NUL); percent-encoded as a URL's path */
                    path: string;
                };
                cookie?: never;
            };
            requestBody?: never;
            responses: {
                /** @description removed */
                204: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content?: never;
                };
                /** @description no such file, or no such session */
                404: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description a run is under way */
                409: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
            };
        };
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/health": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Readiness, as /v1/health/ready (no token needed) */
        get: {
            parameters: {
                query?: never;
                header?: never;
                path?: never;
                cookie?: never;
            };
            requestBody?: never;
            responses: {
                /** @description every runtime can run */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Health"];
                    };
                };
                /** @description starting, a runtime unavailable, or draining */
                503: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Health"];
                    };
                };
            };
        };
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/health/ready": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Readiness: a jail of every runtime was built and none is failing (no token needed; for balancers and readiness probes) */
        get: {
            parameters: {
                query?: never;
                header?: never;
                path?: never;
                cookie?: never;
            };
            requestBody?: never;
            responses: {
                /** @description every runtime can run */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Health"];
                    };
                };
                /** @description starting, a runtime unavailable (named, with the reason), or draining */
                503: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Health"];
                    };
                };
            };
        };
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/health/live": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Liveness: the server answers (no token needed; for liveness probes) */
        get: {
            parameters: {
                query?: never;
                header?: never;
                path?: never;
                cookie?: never;
            };
            requestBody?: never;
            responses: {
                /** @description alive */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": {
                            /** @enum {string} */
                            status?: "alive";
                            "uptime-s"?: number;
                        };
                    };
                };
            };
        };
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/info": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Version, runtimes, policies with their limits, request caps, and what this host enforces of each runtime's jail */
        get: {
            parameters: {
                query?: never;
                header?: never;
                path?: never;
                cookie?: never;
            };
            requestBody?: never;
            responses: {
                /** @description what this server serves */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Info"];
                    };
                };
            };
        };
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Prometheus metrics (OpenMetrics text) */
        get: {
            parameters: {
                query?: never;
                header?: never;
                path?: never;
                cookie?: never;
            };
            requestBody?: never;
            responses: {
                /** @description metrics */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/openmetrics-text": string;
                    };
                };
            };
        };
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /** @description `POST /v1/runs`, as sent. */
        RunBody: {
            /**
             * @description `python`, `javascript`, a runtime this server configures (`GET /v1/info`), or `wasm`
             *     (with `module`).
             */
            runtime: string;
            /**
             * @description The code to run (every runtime but `wasm`).
             * @default null
             */
            code?: string | null;
            /**
             * @description A WASI preview 1 command module, base64 (runtime `wasm`): compiled in a jail, cached by
             *     the SHA-256 of its bytes.
             * @default null
             */
            module?: string | null;
            /**
             * @description Arguments after the code (`sys.argv[1:]`, `scriptArgs`).
             * @default []
             */
            argv?: string[];
            /**
             * @description The run's stdin, as text.
             * @default null
             */
            stdin?: string | null;
            /**
             * @description The run's stdin, base64 (instead of `stdin`).
             * @default null
             */
            "stdin-base64"?: string | null;
            /**
             * @description Files written into the run's work directory (`/app`) before it starts.
             * @default []
             */
            files?: components["schemas"]["FileBody"][];
            /**
             * @description A named policy (`GET /v1/info`); default: the runtime's.
             * @default null
             */
            policy?: string | null;
            /**
             * @description Limits tighter than the policy's (a looser one is refused).
             * @default {
             *       "wall-timeout-ms": null,
             *       "memory-max-bytes": null,
             *       "pids-max": null,
             *       "stdout-max-bytes": null,
             *       "stderr-max-bytes": null,
             *       "wasm-memory-max-bytes": null,
             *       "fuel": null
             *     }
             */
            limits?: components["schemas"]["Limits"];
            /**
             * @description Patterns of files to give back from the work directory after the run (`*` within a
             *     directory, `**` across), e.g. `["*.png", "out/**"]`.
             * @default []
             */
            "return-files"?: string[];
            /**
             * @description The host's tools the run may call back (host calls, answered by the client while the
             *     run streams), each with its budgets (at most 16: a longer list is refused as it is read).
             * @default []
             */
            tools?: components["schemas"]["ToolBody"][];
            /**
             * @description Hosts the run may reach (`HOST:PORT` each, as in a policy's `network.egress-allow`): only
             *     ones its policy's list covers (a narrower list; a jail is built for it). Left out: the
             *     policy's list.
             * @default null
             */
            "egress-allow"?: string[] | null;
        };
        /** @description An input file: a path relative to the run's work directory, and its bytes in base64. */
        FileBody: {
            /** @description Relative to the work directory: plain names only (no `..`, `.`, or leading `/`). */
            path: string;
            /** @description The file's bytes, base64. */
            content: string;
        };
        /** @description A run's limits (each `None`: none asked, or the policy sets none). */
        Limits: {
            /**
             * Format: uint64
             * @description The wall-clock limit, milliseconds (from the hand-over, for a jail built ahead).
             */
            "wall-timeout-ms"?: number | null;
            /**
             * Format: uint64
             * @description The run's cgroup memory limit, bytes (needs a jail built for the run).
             */
            "memory-max-bytes"?: number | null;
            /**
             * Format: uint64
             * @description The run's cgroup process and thread limit (needs a jail built for the run).
             */
            "pids-max"?: number | null;
            /**
             * Format: uint64
             * @description Output kept (or streamed) of stdout, bytes; past it the policy's `output.over-cap`.
             */
            "stdout-max-bytes"?: number | null;
            /**
             * Format: uint64
             * @description The same for stderr.
             */
            "stderr-max-bytes"?: number | null;
            /**
             * Format: uint64
             * @description A Wasm guest's linear memory, bytes (needs a jail built for the run).
             */
            "wasm-memory-max-bytes"?: number | null;
            /**
             * Format: uint64
             * @description A Wasm guest's fuel, about one unit per instruction (needs a jail built for the run).
             */
            fuel?: number | null;
        };
        /** @description A tool a run may call, as sent; a budget left out is the default. */
        ToolBody: {
            /** @description 1 to 64 of `A-Z a-z 0-9 _ . -`. */
            name: string;
            /**
             * Format: uint32
             * @description Calls of it in one run (default 50, at most 1000).
             * @default null
             */
            "max-calls"?: number | null;
            /**
             * Format: uint32
             * @description The most bytes of one request, its name and arguments as JSON (default 65536, at most
             *     1048576).
             * @default null
             */
            "max-request-bytes"?: number | null;
            /**
             * Format: uint32
             * @description The most bytes of one answer's value as JSON (default 1048576, at most 16777216).
             * @default null
             */
            "max-response-bytes"?: number | null;
            /**
             * Format: uint64
             * @description Each call's time, milliseconds (default 5000, at most 60000); the run's wall limit holds
             *     whatever the calls wait.
             * @default null
             */
            "timeout-ms"?: number | null;
        };
        /** @description The report of one run. */
        Report: {
            /** Format: uint32 */
            "schema-version": number;
            status: components["schemas"]["Status"];
            /**
             * Format: int32
             * @description The program's exit code, when it exited.
             */
            "exit-code"?: number | null;
            /**
             * Format: int32
             * @description The signal that killed the program, when one did (SIGKILL after a timeout).
             */
            signal?: number | null;
            /** @description The signal's name, e.g. `SIGSEGV`. */
            "signal-name"?: string | null;
            /** @description For `setup-failed`: what failed, in words. */
            error?: string | null;
            /** @description For `seccomp-violation`: the system call that ended the run. */
            "seccomp-violation"?: components["schemas"]["Violation"] | null;
            /**
             * Format: int32
             * @description The exit code `stockade run` uses for this report.
             */
            "stockade-exit-code": number;
            /** @description The policy in force (a path, or `builtin:default`). */
            policy: string;
            /** @description The program as given, and the argument vector it got. */
            program: string;
            argv: string[];
            /**
             * Format: double
             * @description Wall-clock time from start to the last process's end, milliseconds (µs precision).
             */
            "wall-ms": number;
            /**
             * Format: uint64
             * @description The wall-clock limit in force, milliseconds.
             */
            "wall-timeout-ms": number;
            /**
             * Format: double
             * @description CPU time of every process of the run that was reaped, milliseconds.
             */
            "cpu-user-ms": number;
            /** Format: double */
            "cpu-sys-ms": number;
            /**
             * Format: uint64
             * @description Largest resident set of any single process of the run, bytes.
             */
            "max-rss-bytes": number;
            /**
             * Format: uint64
             * @description Most memory the run's cgroup held at once (all processes, page cache, tmpfs), bytes.
             */
            "memory-peak-bytes"?: number | null;
            /**
             * Format: uint64
             * @description Processes the kernel OOM-killed in the run's cgroup.
             * @default 0
             */
            "oom-kills"?: number;
            /**
             * Format: uint64
             * @description Most processes and threads alive at once in the run's cgroup.
             */
            "pids-peak"?: number | null;
            /**
             * @description Whether a fork or thread creation was refused at `cgroups.pids-max`.
             * @default false
             */
            "pids-limit-hit"?: boolean;
            /**
             * Format: double
             * @description CPU time the supervisor's thread spent on this run (copying the writable directories in
             *     and back, reading output, enforcing the deadline), milliseconds. Not in any limit of the
             *     run: the supervisor lives outside the run's cgroup.
             */
            "supervisor-cpu-ms"?: number | null;
            /** @description For a run handed to a jail started ahead of it: what came before its start. */
            "warm-start"?: components["schemas"]["WarmStart"] | null;
            /** @description The run's writable directories (staged on tmpfs, written back at the end). */
            "writable-dirs"?: components["schemas"]["WritableDir"][];
            /**
             * Format: int32
             * @description For Wasm runs: the guest's own exit code (`proc_exit`), when it exited.
             */
            "guest-exit-code"?: number | null;
            /**
             * Format: uint64
             * @description For Wasm runs with `wasm.fuel`: fuel burned.
             */
            "fuel-consumed"?: number | null;
            /**
             * Format: uint64
             * @description For Wasm runs: the largest linear memory the guest had, bytes.
             */
            "wasm-memory-peak-bytes"?: number | null;
            /** @description For Wasm runs: load, instantiate and run times. */
            "wasm-time"?: components["schemas"]["WasmTime"] | null;
            stdout: components["schemas"]["StreamReport"];
            stderr: components["schemas"]["StreamReport"];
            /** @description Every host call the program made, in order (when the run had host calls). */
            "host-calls"?: components["schemas"]["CallRecord"][];
            /** @description The connections the program asked its egress proxy for (a policy with an egress list). */
            egress?: components["schemas"]["EgressReport"] | null;
            /**
             * @description The value of the code's last expression (a notebook cell's), when it is JSON and not
             *     `None`/`null`/`undefined` (at most [`VALUE_MAX_BYTES`] as JSON).
             */
            value?: unknown;
            /**
             * @description That value's repr (Python) or string (JavaScript) when it is not JSON, cut at
             *     [`VALUE_MAX_BYTES`].
             */
            "value-repr"?: string | null;
            /** @description The figures the code left open (a runtime with matplotlib), in order. */
            outputs?: components["schemas"]["GivenOutput"][];
            /**
             * @description The jail this run shared with others, when it did: `batch` (a batch's runs, each in a
             *     fresh instance of its guest, the layers below the jail's).
             */
            jail?: string | null;
            /** @description The batch it was a run of. */
            "batch-id"?: string | null;
            /** @description Each layer, in the order the jail applies them. */
            enforcement: components["schemas"]["LayerReport"][];
        };
        /** @description Why the run ended. */
        Status: "ok" | "exited-nonzero" | "signaled" | "timeout" | "setup-failed" | "seccomp-violation" | "oom" | "cpu-limit" | "pids-limit" | "fuel-exhausted" | "wasm-trap" | "wasm-memory-limit" | "disk-limit" | "output-limit";
        /** @description The system call that ended a run with status `seccomp-violation`. */
        Violation: {
            /** @description The system call's name, e.g. `ptrace`. */
            syscall: string;
            /**
             * Format: int32
             * @description Its number on x86-64.
             */
            number: number;
            /** @description The policy group it belongs to, e.g. `ptrace` (in `seccomp.kill`). */
            group: string;
        };
        /**
         * @description What came before the run's start, for a jail released ahead of its run (a service's warm
         *     pool): its program had started and got itself ready (an interpreter loaded), then waited.
         *     The report's wall and CPU times count from the hand-over; this is apart.
         */
        WarmStart: {
            /**
             * Format: double
             * @description From the program's start to the hand-over, milliseconds.
             */
            "waited-ms": number;
            /**
             * Format: double
             * @description CPU time the run's cgroup used before the hand-over (the program's start-up),
             *     milliseconds; not in `cpu-user-ms`/`cpu-sys-ms`. Absent without a cgroup (then those
             *     include it).
             */
            "cpu-ms"?: number | null;
        };
        /**
         * @description One writable directory of the run (a staged tmpfs): what the program left in it and what was
         *     written back to the host.
         */
        WritableDir: {
            /** @description The directory, as the program saw it (a granted host path, or a Wasm run's `/app`). */
            path: string;
            /**
             * Format: uint64
             * @description Bytes and files (inodes) in use when the run ended, against the quota.
             */
            "bytes-used": number;
            /** Format: uint64 */
            "files-used": number;
            /** @description Whether the quota was reached. */
            full: boolean;
            /**
             * Format: uint64
             * @description Files and links written back to the host, their bytes, and entries removed there.
             */
            "written-back": number;
            /** Format: uint64 */
            "written-back-bytes": number;
            /** Format: uint64 */
            removed: number;
            /**
             * @description Host entries that were not carried into the jail: sockets, FIFOs, devices, other
             *     filesystems mounted below, unreadable files.
             */
            "not-carried"?: string[];
        };
        /** @description Where a Wasm run's time went. */
        WasmTime: {
            /**
             * Format: double
             * @description Loading the precompiled artifact.
             */
            "load-ms": number;
            /**
             * Format: double
             * @description Compiling the module inside the jail (a module run for the first time; then cached).
             */
            "compile-ms"?: number | null;
            /**
             * Format: double
             * @description Instantiating the module with WASI.
             */
            "instantiate-ms": number;
            /**
             * Format: double
             * @description Running `_start`.
             */
            "run-ms": number;
        };
        /** @description What the program wrote on one stream. */
        StreamReport: {
            /**
             * Format: uint64
             * @description Every byte the program wrote, including the ones past the cap.
             */
            bytes: number;
            /** @description True when `bytes` exceeded the cap and the rest was discarded. */
            truncated: boolean;
            /** @description The captured bytes (up to the cap), when output is embedded and is UTF-8. */
            text?: string | null;
            /** @description The captured bytes, base64 (standard alphabet), when output is embedded and not UTF-8. */
            base64?: string | null;
        };
        /** @description One host call of a run ([`HostCalls`](crate::HostCalls)). */
        CallRecord: {
            /** @description The tool's name (empty when the request could not be read). */
            name: string;
            /**
             * Format: uint64
             * @description The request's bytes (its JSON frame) and the answer's (its value).
             */
            "request-bytes": number;
            /** Format: uint64 */
            "response-bytes": number;
            /**
             * Format: double
             * @description From the request read to the answer written, milliseconds.
             */
            ms: number;
            /**
             * @description `ok`, `error` (the host's tool failed), `refused` (no such tool, past a budget), or
             *     `timeout` (past the tool's timeout).
             */
            outcome: string;
            /** @description Why, when not `ok`. */
            reason?: string | null;
        };
        /** @description The run's egress, when its policy has an egress list. */
        EgressReport: {
            /**
             * Format: uint64
             * @description Connections the proxy opened for the program.
             */
            allowed: number;
            /**
             * Format: uint64
             * @description Requests it refused.
             */
            refused: number;
            /**
             * Format: uint64
             * @description Bytes from the program to the hosts, and back, all connections together.
             */
            "bytes-out": number;
            /** Format: uint64 */
            "bytes-in": number;
            /**
             * Format: uint64
             * @description Connections not listed below (past the first 256).
             * @default 0
             */
            "left-out"?: number;
            /** @description Each connection, in the order asked. */
            connections: components["schemas"]["EgressConnection"][];
        };
        /** @description One connection the program asked the proxy for. */
        EgressConnection: {
            /** @description The host as the program named it (empty when its request could not be read). */
            host: string;
            /** Format: uint16 */
            port: number;
            /** @description `CONNECT` (a tunnel: https, anything over TCP), or the method of a plain `http://` request. */
            method: string;
            allowed: boolean;
            /** @description Why it was refused. */
            refused?: components["schemas"]["Refusal"] | null;
            /** @description The address the proxy connected to. */
            address?: string | null;
            /** Format: uint64 */
            "bytes-out": number;
            /** Format: uint64 */
            "bytes-in": number;
            /** @description Why the proxy ended it, when it did (not the program or the host). */
            cut?: components["schemas"]["Cut"] | null;
        };
        /** @description Why the proxy refused a request. */
        Refusal: "not-listed" | "private-address" | "cannot-resolve" | "cannot-connect" | "max-connections" | "bad-request" | "busy";
        /** @description Why the proxy ended a connection it had opened. */
        Cut: "max-bytes" | "run-over";
        /** @description A file the code's run gave back: a figure it left open. */
        GivenOutput: {
            /** @description Its media type (`image/png`). */
            type: string;
            /** @description Its bytes, in base64. */
            base64: string;
            /**
             * Format: uint64
             * @description Its size, decoded.
             */
            bytes: number;
        };
        /** @description One isolation layer: what the policy asked, what the kernel applied, and the verdict. */
        LayerReport: {
            layer: string;
            asked: string;
            applied: string;
            status: components["schemas"]["Enforcement"];
            reason?: string | null;
        };
        /**
         * @description Whether a layer held.
         * @enum {string}
         */
        Enforcement: "enforced" | "partial" | "not-enforced";
        /**
         * @description What a run answers: its report (the same schema as `stockade run --report -`), plus the files
         *     given back when `return-files` asked for some.
         */
        RunResult: {
            /** Format: uint32 */
            "schema-version": number;
            status: components["schemas"]["Status"];
            /**
             * Format: int32
             * @description The program's exit code, when it exited.
             */
            "exit-code"?: number | null;
            /**
             * Format: int32
             * @description The signal that killed the program, when one did (SIGKILL after a timeout).
             */
            signal?: number | null;
            /** @description The signal's name, e.g. `SIGSEGV`. */
            "signal-name"?: string | null;
            /** @description For `setup-failed`: what failed, in words. */
            error?: string | null;
            /** @description For `seccomp-violation`: the system call that ended the run. */
            "seccomp-violation"?: components["schemas"]["Violation"] | null;
            /**
             * Format: int32
             * @description The exit code `stockade run` uses for this report.
             */
            "stockade-exit-code": number;
            /** @description The policy in force (a path, or `builtin:default`). */
            policy: string;
            /** @description The program as given, and the argument vector it got. */
            program: string;
            argv: string[];
            /**
             * Format: double
             * @description Wall-clock time from start to the last process's end, milliseconds (µs precision).
             */
            "wall-ms": number;
            /**
             * Format: uint64
             * @description The wall-clock limit in force, milliseconds.
             */
            "wall-timeout-ms": number;
            /**
             * Format: double
             * @description CPU time of every process of the run that was reaped, milliseconds.
             */
            "cpu-user-ms": number;
            /** Format: double */
            "cpu-sys-ms": number;
            /**
             * Format: uint64
             * @description Largest resident set of any single process of the run, bytes.
             */
            "max-rss-bytes": number;
            /**
             * Format: uint64
             * @description Most memory the run's cgroup held at once (all processes, page cache, tmpfs), bytes.
             */
            "memory-peak-bytes"?: number | null;
            /**
             * Format: uint64
             * @description Processes the kernel OOM-killed in the run's cgroup.
             * @default 0
             */
            "oom-kills"?: number;
            /**
             * Format: uint64
             * @description Most processes and threads alive at once in the run's cgroup.
             */
            "pids-peak"?: number | null;
            /**
             * @description Whether a fork or thread creation was refused at `cgroups.pids-max`.
             * @default false
             */
            "pids-limit-hit"?: boolean;
            /**
             * Format: double
             * @description CPU time the supervisor's thread spent on this run (copying the writable directories in
             *     and back, reading output, enforcing the deadline), milliseconds. Not in any limit of the
             *     run: the supervisor lives outside the run's cgroup.
             */
            "supervisor-cpu-ms"?: number | null;
            /** @description For a run handed to a jail started ahead of it: what came before its start. */
            "warm-start"?: components["schemas"]["WarmStart"] | null;
            /** @description The run's writable directories (staged on tmpfs, written back at the end). */
            "writable-dirs"?: components["schemas"]["WritableDir"][];
            /**
             * Format: int32
             * @description For Wasm runs: the guest's own exit code (`proc_exit`), when it exited.
             */
            "guest-exit-code"?: number | null;
            /**
             * Format: uint64
             * @description For Wasm runs with `wasm.fuel`: fuel burned.
             */
            "fuel-consumed"?: number | null;
            /**
             * Format: uint64
             * @description For Wasm runs: the largest linear memory the guest had, bytes.
             */
            "wasm-memory-peak-bytes"?: number | null;
            /** @description For Wasm runs: load, instantiate and run times. */
            "wasm-time"?: components["schemas"]["WasmTime"] | null;
            stdout: components["schemas"]["StreamReport"];
            stderr: components["schemas"]["StreamReport"];
            /** @description Every host call the program made, in order (when the run had host calls). */
            "host-calls"?: components["schemas"]["CallRecord"][];
            /** @description The connections the program asked its egress proxy for (a policy with an egress list). */
            egress?: components["schemas"]["EgressReport"] | null;
            /**
             * @description The value of the code's last expression (a notebook cell's), when it is JSON and not
             *     `None`/`null`/`undefined` (at most [`VALUE_MAX_BYTES`] as JSON).
             */
            value?: unknown;
            /**
             * @description That value's repr (Python) or string (JavaScript) when it is not JSON, cut at
             *     [`VALUE_MAX_BYTES`].
             */
            "value-repr"?: string | null;
            /** @description The figures the code left open (a runtime with matplotlib), in order. */
            outputs?: components["schemas"]["GivenOutput"][];
            /**
             * @description The jail this run shared with others, when it did: `batch` (a batch's runs, each in a
             *     fresh instance of its guest, the layers below the jail's).
             */
            jail?: string | null;
            /** @description The batch it was a run of. */
            "batch-id"?: string | null;
            /** @description Each layer, in the order the jail applies them. */
            enforcement: components["schemas"]["LayerReport"][];
            /** @description The files given back, in path order (when `return-files` asked for some). */
            files?: components["schemas"]["ReturnedFile"][] | null;
            /**
             * @description Matching files were left out at `return-files-max-count` or `-bytes` (when `return-files`
             *     asked for some).
             */
            "files-capped"?: boolean | null;
            /** @description Matching entries not given back, each with the reason (the first 100). */
            "files-skipped"?: components["schemas"]["SkippedFile"][];
            /**
             * Format: uint64
             * @description How many matching entries were not given back in all.
             */
            "files-skipped-count"?: number | null;
            /** @description A run of a session: the session, this run's id, and its workspace as kept. */
            session?: components["schemas"]["SessionRun"] | null;
            /** @description A batch's run with an `expect`: the judge's word on it. */
            verdict?: components["schemas"]["Verdict"] | null;
        };
        /** @description A file given back. */
        ReturnedFile: {
            /** @description Relative to the work directory. */
            path: string;
            /**
             * Format: uint64
             * @description Its size.
             */
            bytes: number;
            /** @description Its bytes, base64. */
            content: string;
        };
        /** @description A matching entry not given back. */
        SkippedFile: {
            /** @description Relative; a name that is not UTF-8 has U+FFFD in its place. */
            path: string;
            reason: string;
        };
        /** @description What a run of a session adds to its result. */
        SessionRun: {
            /** @description The session's id. */
            id: string;
            /** @description This run's id (`r-` and 16 hex digits). */
            run: string;
            /** @description The workspace as the run left it, as kept for the next run. */
            workspace: components["schemas"]["WorkspaceUse"];
            /**
             * @description What the run left in the workspace that was not kept, each with the reason (symlinks,
             *     special files, names that are not UTF-8, files past the quota): the first 100.
             */
            dropped?: components["schemas"]["SkippedFile"][];
            /**
             * Format: uint64
             * @description How many entries were not kept in all.
             */
            "dropped-count"?: number;
            /** @description A live session's run: what became of its interpreter. */
            interpreter?: components["schemas"]["Interpreter"] | null;
            /** @description Why its interpreter was not kept, when it was lost before this run. */
            "interpreter-reason"?: string | null;
            /**
             * Format: double
             * @description A resumed interpreter's resume, in milliseconds: its jail built, its guest loaded and
             *     its image mapped back, before this run's code.
             */
            "resume-ms"?: number | null;
        };
        /** @description What a session's workspace holds, against its quota. */
        WorkspaceUse: {
            /** Format: uint64 */
            files: number;
            /** Format: uint64 */
            bytes: number;
            /** Format: uint64 */
            "files-max": number;
            /** Format: uint64 */
            "bytes-max": number;
        };
        /** @description What became of a live session's interpreter in a run. */
        Interpreter: "started" | "kept" | "restarted" | "resumed";
        /** @description A judge's word on one run with an `expect`. */
        Verdict: "accepted" | "wrong-answer" | "timeout" | "memory-limit" | "output-limit" | "runtime-error" | "internal-error";
        /** @description `{"error": {"code", "message", "field"}}`: a refusal's body. */
        Error: {
            error: components["schemas"]["ApiError"];
        };
        /** @description A refusal: a stable code (with its HTTP status), a message and the request field it is about. */
        ApiError: {
            code: components["schemas"]["ErrorCode"];
            message: string;
            /** @description The request field the refusal is about (`files[0].path`, `limits.memory-max-bytes`). */
            field?: string | null;
            /** @description The run in progress a refusal is about (`session-busy`). */
            run?: string | null;
        };
        /** @description A refusal's stable code. */
        ErrorCode: "method-not-allowed" | "bad-request" | "unauthorized" | "forbidden" | "policy-not-found" | "not-found" | "session-not-found" | "call-not-found" | "session-ended" | "session-busy" | "too-many-sessions" | "file-conflict" | "cannot-hibernate" | "idempotency-conflict" | "idempotency-mismatch" | "body-timeout" | "payload-too-large" | "unsupported-media-type" | "queue-full" | "queue-timeout" | "busy" | "draining" | "runtime-unavailable" | "jail-setup-failed" | "internal";
        /**
         * @description The last event of a streamed run (`?stream=ndjson`): its result, or why it did not run. The
         *     events before it carry output: `{"stdout": TEXT}` (or `"stdout-base64"` for bytes that are not
         *     UTF-8), the same for stderr.
         */
        LastEvent: {
            report: components["schemas"]["RunResult"];
        } | {
            error: components["schemas"]["ApiError"];
        };
        /** @description `POST /v1/sessions`, as sent. */
        SessionBody: {
            /** @description A runtime this server serves (`GET /v1/info`); not `wasm`. */
            runtime: string;
            /** @default workspace */
            mode?: components["schemas"]["Mode"];
            /**
             * @description A named policy the runtime may run under; default: the runtime's.
             * @default null
             */
            policy?: string | null;
            /**
             * @description Limits for every run of the session, tighter than the policy's; a run may tighten them
             *     further, never loosen them.
             * @default {
             *       "wall-timeout-ms": null,
             *       "memory-max-bytes": null,
             *       "pids-max": null,
             *       "stdout-max-bytes": null,
             *       "stderr-max-bytes": null,
             *       "wasm-memory-max-bytes": null,
             *       "fuel": null
             *     }
             */
            limits?: components["schemas"]["Limits"];
            /**
             * Format: uint64
             * @description The session ends after this long without a run or a file operation (the clock slides);
             *     default and most: the server's `sessions.idle-timeout-ms`.
             * @default null
             */
            "idle-timeout-ms"?: number | null;
            /**
             * Format: uint64
             * @description The session ends this long after it was made, whatever it does; default and most: the
             *     server's `sessions.max-lifetime-ms`.
             * @default null
             */
            "max-lifetime-ms"?: number | null;
        };
        /** @description How a session's runs share their state. */
        Mode: "workspace" | "live";
        /**
         * @description `POST /v1/sessions/{id}/runs`, as sent: a run request without its runtime and policy (the
         *     session's).
         */
        SessionRunBody: {
            /** @description The code to run. */
            code?: string | null;
            /**
             * @description Arguments after the code.
             * @default []
             */
            argv?: string[];
            /** @default null */
            stdin?: string | null;
            /** @default null */
            "stdin-base64"?: string | null;
            /**
             * @description Files written into the workspace before the run (they stay in it, as the run leaves them).
             * @default []
             */
            files?: components["schemas"]["FileBody"][];
            /**
             * @description Files of the workspace given back with the result, by pattern, after the run.
             * @default []
             */
            "return-files"?: string[];
            /**
             * @description Limits tighter than the session's.
             * @default {
             *       "wall-timeout-ms": null,
             *       "memory-max-bytes": null,
             *       "pids-max": null,
             *       "stdout-max-bytes": null,
             *       "stderr-max-bytes": null,
             *       "wasm-memory-max-bytes": null,
             *       "fuel": null
             *     }
             */
            limits?: components["schemas"]["Limits"];
            /**
             * @description The host's tools the run may call back (as for `/v1/runs`).
             * @default []
             */
            tools?: components["schemas"]["ToolBody"][];
        };
        /** @description A session, as answered (`POST /v1/sessions`, `GET /v1/sessions[/{id}]`). */
        SessionInfo: {
            /** @description Its id (`s-` and 32 hex digits): a balancer may route by it. */
            id: string;
            runtime: string;
            mode: components["schemas"]["Mode"];
            policy: string;
            /** @description Every run's limits (the policy's, tightened by the session's). */
            limits: components["schemas"]["Limits"];
            /** Format: uint64 */
            "idle-timeout-ms": number;
            /** Format: uint64 */
            "max-lifetime-ms": number;
            /**
             * Format: uint64
             * @description When it was made, and when it ends if nothing else happens (the sooner of its two
             *     clocks), in milliseconds since the Unix epoch.
             */
            "created-unix-ms": number;
            /** Format: uint64 */
            "expires-unix-ms": number;
            /**
             * Format: uint64
             * @description Its runs so far.
             */
            runs: number;
            /** @description The run in progress, if any. */
            running?: string | null;
            workspace: components["schemas"]["WorkspaceUse"];
            /** @description The session it was forked from (`POST /v1/sessions/{id}/fork`), if it was. */
            "forked-from"?: string | null;
            /** @description Where a live session's interpreter is (a workspace session's is `none`). */
            state: components["schemas"]["SessionState"];
            /**
             * Format: double
             * @description The last hibernation's time, in milliseconds, while the session is hibernated.
             */
            "hibernate-ms"?: number | null;
            /**
             * Format: uint64
             * @description The size of its hibernated image on disk, while it is hibernated.
             */
            "image-bytes"?: number | null;
        };
        /** @description Where a session's interpreter is. */
        SessionState: "live" | "hibernated" | "none";
        /** @description A file of a session's workspace (`GET /v1/sessions/{id}/files`). */
        FileInfo: {
            /** @description Relative to the workspace. */
            path: string;
            /** Format: uint64 */
            bytes: number;
            /**
             * Format: uint64
             * @description When its content last changed (an upload, or a run that wrote it), in milliseconds since
             *     the Unix epoch, by the server's clock.
             */
            "modified-unix-ms": number;
        };
        /** @description `GET /v1/sessions/{id}/files`. */
        FileList: {
            files: components["schemas"]["FileInfo"][];
            workspace: components["schemas"]["WorkspaceUse"];
        };
        /** @description The server's health (`/v1/health/ready`'s body, 200 when `status` is `ok`, else 503). */
        Health: {
            status: components["schemas"]["Readiness"];
            /**
             * Format: uint
             * @description Runs in progress.
             */
            running: number;
            /**
             * Format: uint
             * @description Runs waiting for a slot.
             */
            queued: number;
            /** @description Warm jails waiting and wanted, by runtime. */
            warm: {
                [key: string]: components["schemas"]["Warm"];
            };
            /** @description Each runtime that cannot run (or not yet), and why. */
            unavailable?: {
                [key: string]: string;
            };
        };
        /** @description Whether the server can run every runtime. */
        Readiness: "ok" | "starting" | "unavailable" | "draining";
        /** @description A runtime's warm jails: waiting, and wanted. */
        Warm: {
            /** Format: uint */
            ready: number;
            /** Format: uint */
            target: number;
        };
        /** @description `GET /v1/info`: what this server serves. */
        Info: {
            /** @description stockade's version. */
            version: string;
            /** @description The API's version (`v1`). */
            api: string;
            runtimes: components["schemas"]["RuntimeInfo"][];
            /** @description Whether requests may send their own Wasm modules (runtime `wasm`). */
            "wasm-modules": boolean;
            /** @description Every named policy a request may ask for. */
            policies: components["schemas"]["PolicyInfo"][];
            /**
             * Format: uint
             * @description Runs at once.
             */
            concurrency: number;
            /**
             * Format: uint
             * @description Runs that may wait behind them.
             */
            queue: number;
            /** @description Where the warm jails are built: `spawner` (a process of their own) or `threads`. */
            "jails-built-by": string;
            requests: components["schemas"]["RequestsInfo"];
            sessions: components["schemas"]["SessionsInfo"];
            /** Format: uint64 */
            "uptime-s": number;
        };
        /** @description A runtime the server serves. */
        RuntimeInfo: {
            name: string;
            /** @description `wasm-guest` (stockade's embedded runner) or `program` (a program of the host's). */
            kind: string;
            /** @description What runs: a guest's language, or a program's path and how it takes its code. */
            runs: components["schemas"]["RuntimeRuns"];
            /** @description Its own policy (a request may name another the runtime allows). */
            policy: string;
            available: boolean;
            /** @description Why not, when it is not. */
            "unavailable-because"?: string | null;
            warm: components["schemas"]["Warm"];
            /** @description What this host enforces of its jail, layer by layer (as its last warm jail reported). */
            enforcement?: components["schemas"]["LayerReport"][] | null;
        };
        /** @description What a runtime runs. */
        RuntimeRuns: {
            guest: string;
        } | {
            program: string;
            bootstrap: string;
            /** @description The modules its interpreters import before their code arrives. */
            preload?: string[];
            /** @description The virtual environment its packages come from. */
            venv?: string | null;
        };
        /** @description A named policy and the limits it gives a run. */
        PolicyInfo: {
            name: string;
            /** @description Where it came from: a file, or the built-in default. */
            source: string;
            limits: components["schemas"]["PolicyLimits"];
        };
        /** @description A policy's limits as a request names them, and its CPU share. */
        PolicyLimits: {
            /**
             * Format: uint64
             * @description The wall-clock limit, milliseconds (from the hand-over, for a jail built ahead).
             */
            "wall-timeout-ms"?: number | null;
            /**
             * Format: uint64
             * @description The run's cgroup memory limit, bytes (needs a jail built for the run).
             */
            "memory-max-bytes"?: number | null;
            /**
             * Format: uint64
             * @description The run's cgroup process and thread limit (needs a jail built for the run).
             */
            "pids-max"?: number | null;
            /**
             * Format: uint64
             * @description Output kept (or streamed) of stdout, bytes; past it the policy's `output.over-cap`.
             */
            "stdout-max-bytes"?: number | null;
            /**
             * Format: uint64
             * @description The same for stderr.
             */
            "stderr-max-bytes"?: number | null;
            /**
             * Format: uint64
             * @description A Wasm guest's linear memory, bytes (needs a jail built for the run).
             */
            "wasm-memory-max-bytes"?: number | null;
            /**
             * Format: uint64
             * @description A Wasm guest's fuel, about one unit per instruction (needs a jail built for the run).
             */
            fuel?: number | null;
            /**
             * Format: uint64
             * @description The CPU a run may use, in percent of one CPU.
             */
            "cpu-max-percent"?: number | null;
        };
        /** @description The caps of every request. */
        RequestsInfo: {
            /** Format: uint64 */
            "body-max-bytes": number;
            /** Format: uint64 */
            "code-max-bytes": number;
            /** Format: uint64 */
            "stdin-max-bytes": number;
            /** Format: uint32 */
            "argv-max-count": number;
            /** Format: uint32 */
            "files-max-count": number;
            /** Format: uint64 */
            "files-max-bytes": number;
            /** Format: uint32 */
            "return-files-max-count": number;
            /** Format: uint64 */
            "return-files-max-bytes": number;
            /**
             * Format: uint32
             * @description The runs (or inputs) of one batch.
             */
            "batch-max-runs": number;
        };
        /** @description The sessions the server keeps. */
        SessionsInfo: {
            /**
             * Format: uint
             * @description Sessions at most, and open now.
             */
            max: number;
            /** Format: uint */
            open: number;
            /** @description `workspace`, and `live` when live sessions are on. */
            modes: string[];
            /** Format: uint */
            "max-per-token": number;
            /** Format: uint */
            "live-max": number;
            /** Format: uint64 */
            "idle-timeout-ms": number;
            /** Format: uint64 */
            "max-lifetime-ms": number;
            /**
             * Format: uint64
             * @description After how long idle a live session's interpreter is hibernated (none: only when asked).
             */
            "hibernate-after-ms"?: number | null;
            /** Format: uint64 */
            "workspace-max-bytes": number;
            /** Format: uint64 */
            "workspace-max-files": number;
        };
        /** @description `POST /v1/batches`, as sent: `runs`, or `code` with `inputs`. */
        BatchBody: {
            /** @description A Wasm guest's runtime (`python`, `javascript`). */
            runtime: string;
            /**
             * @description A named policy (`GET /v1/info`); default: the runtime's.
             * @default null
             */
            policy?: string | null;
            /**
             * @description Every run's limits (tighter than the policy's); `memory-max-bytes` and `pids-max` are the
             *     batch's jails' (their runs share them).
             * @default {
             *       "wall-timeout-ms": null,
             *       "memory-max-bytes": null,
             *       "pids-max": null,
             *       "stdout-max-bytes": null,
             *       "stderr-max-bytes": null,
             *       "wasm-memory-max-bytes": null,
             *       "fuel": null
             *     }
             */
            limits?: components["schemas"]["Limits"];
            /**
             * @description Each run's own code (and input): at most `requests.batch-max-runs`.
             * @default []
             */
            runs?: components["schemas"]["BatchRunBody"][];
            /**
             * @description One program for every input (with `inputs`).
             * @default null
             */
            code?: string | null;
            /**
             * @description The inputs `code` runs against, one run each (no `code` of their own).
             * @default []
             */
            inputs?: components["schemas"]["BatchRunBody"][];
            /**
             * @description How a run's stdout is held against its `expect` (default `trailing-whitespace`).
             * @default trailing-whitespace
             */
            compare?: components["schemas"]["Compare"];
        };
        /** @description One run of a batch, as sent. */
        BatchRunBody: {
            /**
             * @description Its code (in `runs`; none in `inputs`).
             * @default null
             */
            code?: string | null;
            /** @default [] */
            argv?: string[];
            /** @default null */
            stdin?: string | null;
            /** @default null */
            "stdin-base64"?: string | null;
            /**
             * @description Its own limits, tighter than the batch's: the wall clock, output caps, a guest's fuel and
             *     linear memory (its memory and processes are its jail's).
             * @default {
             *       "wall-timeout-ms": null,
             *       "memory-max-bytes": null,
             *       "pids-max": null,
             *       "stdout-max-bytes": null,
             *       "stderr-max-bytes": null,
             *       "wasm-memory-max-bytes": null,
             *       "fuel": null
             *     }
             */
            limits?: components["schemas"]["Limits"];
            /**
             * @description What it must print on stdout for the verdict `accepted` (see `compare`); without it, the
             *     run has no verdict.
             * @default null
             */
            expect?: string | null;
        };
        /** @description How stdout is held against `expect`. */
        Compare: "exact" | "trailing-whitespace";
        /** @description What a batch answers: every run's result, in the runs' order, and the batch's count. */
        BatchAnswer: {
            "batch-id": string;
            results: components["schemas"]["RunResult"][];
            summary: components["schemas"]["BatchSummary"];
        };
        /** @description How a batch went. */
        BatchSummary: {
            /** Format: uint32 */
            runs: number;
            /** @description Runs by status (`ok`, `timeout`, ...). */
            statuses: {
                [key: string]: number;
            };
            /** @description Runs with an `expect`, by verdict. */
            verdicts: {
                [key: string]: number;
            };
            /**
             * Format: uint32
             * @description The jails the batch's runs shared (a run that ends its jail, at its wall clock say, has
             *     the next run in a new one).
             */
            jails: number;
            /**
             * Format: double
             * @description From its admission to its last run's end.
             */
            "wall-ms": number;
        };
        /**
         * @description One line of a streamed batch (`?stream=ndjson`): a run's result as it ends, with its index;
         *     the last line the summary.
         */
        BatchEvent: {
            /** Format: uint32 */
            index: number;
            result: components["schemas"]["RunResult"];
        } | {
            "batch-id": string;
            summary: components["schemas"]["BatchSummary"];
        } | {
            error: components["schemas"]["ApiError"];
        };
        /** @description A host call of a streaming run, as its `call` event says it */
        HostCall: {
            /** @description the run's id (r- and 16 hex digits) */
            run: string;
            /** @description the call's id in its run (c-1, c-2, ...) */
            id: string;
            /** @description one of the run's tools */
            name: string;
            /** @description what the program passed, any JSON */
            args: unknown;
        };
        /** @description A host call's answer: exactly one of `ok` (the tool's value, any JSON) and `error` (why it failed, in words: the program gets it as an exception) */
        CallAnswer: {
            ok?: unknown;
            error?: string;
        };
    };
    responses: never;
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export type operations = Record<string, never>;
