//! The OpenAPI 3.1 description of API v1: the request, result and error schemas come from the
//! types themselves (schemars); the paths are written here.

use super::session::{FileInfo, FileList, SessionBody, SessionInfo, SessionRunBody};
use super::{ErrorBody, LastEvent, RunBody, RunResult};
use schemars::Schema;
use serde_json::{Map, Value, json};

/// The OpenAPI 3.1 description of API v1 (`docs/openapi.json` is this, checked by a test; `stockade
/// serve --openapi` prints it). The request and report schemas come from the types themselves.
pub fn openapi() -> Value {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = "/components/schemas/".into())
        .into_generator();
    let run = generator.subschema_for::<RunBody>();
    generator.subschema_for::<crate::Report>();
    generator.subschema_for::<RunResult>();
    generator.subschema_for::<ErrorBody>();
    generator.subschema_for::<LastEvent>();
    let session_body = generator.subschema_for::<SessionBody>();
    let session_run = generator.subschema_for::<SessionRunBody>();
    generator.subschema_for::<SessionInfo>();
    generator.subschema_for::<FileInfo>();
    generator.subschema_for::<FileList>();
    generator.subschema_for::<super::info::Health>();
    generator.subschema_for::<super::info::Info>();
    let batch = generator.subschema_for::<super::batch::BatchBody>();
    generator.subschema_for::<super::batch::BatchAnswer>();
    generator.subschema_for::<super::batch::BatchEvent>();
    let schemas = component_schemas(generator.take_definitions(true));
    let mut paths = Map::new();
    run_paths(&mut paths, run);
    batch_paths(&mut paths, batch);
    session_paths(&mut paths, session_body);
    session_run_paths(&mut paths, session_run);
    session_file_paths(&mut paths);
    service_paths(&mut paths);
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "stockade service API",
            "version": "1",
            "description": "Runs code in stockade jails: `stockade serve`. See docs/api.md."
        },
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "TCP listeners: a token from server.tokens-file; the unix socket is guarded by its mode and group"}}
        }
    })
}

/// The component schemas: the types' `definitions`, then HostCall and CallAnswer.
fn component_schemas(definitions: impl IntoIterator<Item = (String, Value)>) -> Map<String, Value> {
    let mut schemas = Map::new();
    for (name, schema) in definitions {
        schemas.insert(name, schema);
    }
    schemas.insert(
        "HostCall".into(),
        json!({
            "type": "object",
            "description": "A host call of a streaming run, as its `call` event says it",
            "required": ["run", "id", "name", "args"],
            "properties": {
                "run": {"type": "string", "description": "the run's id (r- and 16 hex digits)"},
                "id": {"type": "string", "description": "the call's id in its run (c-1, c-2, ...)"},
                "name": {"type": "string", "description": "one of the run's tools"},
                "args": {"description": "what the program passed, any JSON"}
            }
        }),
    );
    schemas.insert(
        "CallAnswer".into(),
        json!({
            "type": "object",
            "description": "A host call's answer: exactly one of `ok` (the tool's value, any JSON) and `error` (why it failed, in words: the program gets it as an exception)",
            "properties": {"ok": {}, "error": {"type": "string"}},
            "additionalProperties": false
        }),
    );
    schemas
}

/// An error response: `d` and the Error schema.
fn err(d: &str) -> Value {
    json!({"description": d, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
}

/// An error response that says when to retry (the Retry-After header).
fn busy(d: &str) -> Value {
    let mut e = err(d);
    e["headers"] = json!({"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}});
    e
}

/// The path parameter of a session's id.
fn session_id_param() -> Value {
    json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^s-[0-9a-f]{32}$"}})
}

/// The path parameter of a run's id.
fn run_id_param() -> Value {
    json!({"name": "run", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^r-[0-9a-f]{16}$"}})
}

/// The Idempotency-Key header parameter.
fn idempotency_key_param() -> Value {
    json!({
        "name": "Idempotency-Key", "in": "header", "required": false,
        "schema": {"type": "string", "pattern": "^[!-~]{1,255}$"},
        "description": "the same key (of the same caller, with the same path and body) within requests.idempotency-window-ms gets the first answer (with the header Idempotency-Replayed: true), never a second run; one still running is waited for; another request with the key is 422 idempotency-mismatch; not with ?stream"
    })
}

/// The path parameter of a host call's id.
fn call_id_param() -> Value {
    json!({"name": "call", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^c-[0-9]+$"}})
}

/// The paths of runs: `/v1/runs` and the answer to a run's host call.
fn run_paths(paths: &mut Map<String, Value>, run: Schema) {
    paths.insert(
        "/v1/runs".into(),
        json!({"post": {
            "summary": "Run code (or a Wasm module) in a jail and report what happened",
            "parameters": [{
                "name": "stream", "in": "query", "required": false,
                "schema": {"type": "string", "enum": ["ndjson"]},
                "description": "answer as NDJSON events as output happens: {\"stdout\": TEXT}, {\"stderr\": TEXT} (or stdout-base64/stderr-base64), {\"call\": HostCall} for each host call of a run with tools (answer it at /v1/runs/{run}/calls/{id}), then the last event, a LastEvent: {\"report\": RunResult} or {\"error\": ...}; a run with tools must stream"
            }, idempotency_key_param()],
            "requestBody": {"required": true, "content": {"application/json": {"schema": run}}},
            "responses": {
                "200": {"description": "the run happened (whatever its status)", "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/RunResult"}},
                    "application/x-ndjson": {"schema": {"type": "string", "description": "lines of JSON: output events, then a LastEvent (#/components/schemas/LastEvent)"}}
                }},
                "400": err("a bad request: the field is named"),
                "401": err("TCP without a bearer token"),
                "403": err("a token that is not accepted"),
                "404": err("no such policy"),
                "408": err("the body did not arrive in time"),
                "413": err("the body is over requests.body-max-bytes"),
                "415": err("not application/json"),
                "409": err("idempotency-conflict: this Idempotency-Key's first answer cannot be given (it was too large to keep, or its first request ended without one)"),
                "422": err("idempotency-mismatch: this Idempotency-Key was used with another request"),
                "429": busy("the queue is full"),
                "500": err("the jail could not be built, or a bug of the server's: never bad input; the message has an incident number for the server's log"),
                "503": busy("the server is draining, the queue wait timed out, too many bodies or answers are in memory, or the runtime is unavailable")
            }
        }}),
    );
    paths.insert(
        "/v1/runs/{run}/calls/{call}".into(),
        json!({
            "parameters": [run_id_param(), call_id_param()],
            "post": {
                "summary": "Answer a host call of a streaming run (its `call` event): the tool's value, or its error",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/CallAnswer"}}}},
                "responses": {
                    "204": {"description": "the run has its answer"},
                    "400": err("not exactly one of ok and error"),
                    "404": err("no such call waits for an answer: answered, past its time, never made, or another caller's run")
                }
            }
        }),
    );
}

/// `/v1/batches`: many runs, each a fresh instance, sharing a jail.
fn batch_paths(paths: &mut Map<String, Value>, batch: Schema) {
    paths.insert(
        "/v1/batches".into(),
        json!({"post": {
            "summary": "Run many programs (or one program against many inputs) of a Wasm guest's runtime, each in a fresh instance, sharing a jail; judge each against its expect",
            "parameters": [{
                "name": "stream", "in": "query", "required": false,
                "schema": {"type": "string", "enum": ["ndjson"]},
                "description": "answer as NDJSON lines as the runs end, a BatchEvent each: {\"index\", \"result\": RunResult}, then {\"batch-id\", \"summary\"} (or {\"error\"}); a client that hangs up ends its batch"
            }],
            "requestBody": {"required": true, "content": {"application/json": {"schema": batch}}},
            "responses": {
                "200": {"description": "the batch ran (whatever its runs' statuses)", "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/BatchAnswer"}},
                    "application/x-ndjson": {"schema": {"type": "string", "description": "lines of JSON, a BatchEvent each (#/components/schemas/BatchEvent)"}}
                }},
                "400": err("a bad request: the field is named (runs[3].stdin)"),
                "401": err("TCP without a bearer token"),
                "403": err("a token that is not accepted"),
                "404": err("no such policy"),
                "408": err("the body did not arrive in time"),
                "413": err("the body is over requests.body-max-bytes"),
                "415": err("not application/json"),
                "429": busy("the queue is full"),
                "500": err("the batch's jail could not be built, or a bug of the server's"),
                "503": busy("the server is draining, the queue wait timed out, or the answers in memory have no room for the batch's")
            }
        }}),
    );
}

/// The paths of sessions themselves: `/v1/sessions`, `/v1/sessions/{id}` and its fork.
fn session_paths(paths: &mut Map<String, Value>, session_body: Schema) {
    paths.insert(
        "/v1/sessions".into(),
        json!({
            "post": {
                "summary": "Open a session: runs of one runtime and policy that share a workspace (/app) between them",
                "requestBody": {"required": true, "content": {"application/json": {"schema": session_body}}},
                "responses": {
                    "201": {
                        "description": "the session",
                        "headers": {"Location": {"schema": {"type": "string"}, "description": "/v1/sessions/ID: where the session lives (a balancer may learn its replica from it)"}},
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SessionInfo"}}}
                    },
                    "400": err("a bad request: the field is named"),
                    "404": err("no such policy"),
                    "429": busy("the server holds sessions.max sessions (Retry-After: when the first one ends)")
                }
            },
            "get": {
                "summary": "The caller's sessions (made with its token, or on the unix socket)",
                "responses": {"200": {"description": "the caller's sessions", "content": {"application/json": {"schema": {
                    "type": "object", "properties": {"sessions": {"type": "array", "items": {"$ref": "#/components/schemas/SessionInfo"}}}
                }}}}}
            }
        }),
    );
    paths.insert(
        "/v1/sessions/{id}".into(),
        json!({
            "parameters": [session_id_param()],
            "get": {
                "summary": "A session",
                "responses": {
                    "200": {"description": "the session", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SessionInfo"}}}},
                    "403": err("with tokens on: no session of this id for this token (the same answer whether it exists or not)"),
                    "404": err("no such session (unix socket)"),
                    "410": err("the session ended (the message says what ended it)")
                }
            },
            "delete": {
                "summary": "End a session and forget its files (a run in progress ends at its own wall limit; its workspace is not kept)",
                "responses": {"204": {"description": "ended"}, "403": err("not this token's"), "404": err("no such session"), "410": err("already ended")}
            }
        }),
    );
    paths.insert(
        "/v1/sessions/{id}/fork".into(),
        json!({
            "parameters": [session_id_param()],
            "post": {
                "summary": "Fork a session: a new session of the caller's with a copy of this one's workspace and interpreter state (a python guest's), its own clocks; each goes on on its own",
                "responses": {
                    "201": {
                        "description": "the new session (`forked-from` names this one)",
                        "headers": {"Location": {"schema": {"type": "string"}, "description": "/v1/sessions/ID of the new session"}},
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SessionInfo"}}}
                    },
                    "403": err("not this token's"),
                    "404": err("no such session"),
                    "409": err("the session is running a run (`session-busy`), or its interpreter cannot be copied now (`cannot-hibernate`: files it holds open, say)"),
                    "410": err("the session ended"),
                    "429": busy("the server, or the token, holds as many sessions as it may")
                }
            }
        }),
    );
    paths.insert(
        "/v1/sessions/{id}/hibernate".into(),
        json!({
            "parameters": [session_id_param()],
            "post": {
                "summary": "Hibernate a live session: its interpreter written to the state directory and its jail ended; its next run resumes it (`interpreter: resumed`). An interpreter that cannot be written (not the python guest's) is ended, the workspace kept",
                "responses": {
                    "200": {"description": "the session (`state`: `hibernated`, with `hibernate-ms` and `image-bytes`)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SessionInfo"}}}},
                    "400": err("a workspace session: the field is `mode`"),
                    "403": err("not this token's"),
                    "404": err("no such session"),
                    "409": err("the session is running a run (`session-busy`), or its interpreter cannot be written now (`cannot-hibernate`: files it holds open, say); it goes on as it was"),
                    "410": err("the session ended")
                }
            }
        }),
    );
}

/// The paths of a session's runs: `/v1/sessions/{id}/runs` and the answer to their host calls.
fn session_run_paths(paths: &mut Map<String, Value>, session_run: Schema) {
    paths.insert(
        "/v1/sessions/{id}/runs".into(),
        json!({
            "parameters": [session_id_param()],
            "post": {
                "summary": "Run code in the session's workspace: a fresh jail, /app holding the session's files; /app as the run leaves it is kept",
                "parameters": [{"name": "stream", "in": "query", "required": false, "schema": {"type": "string", "enum": ["ndjson"]}, "description": "as for /v1/runs"}, idempotency_key_param()],
                "requestBody": {"required": true, "content": {"application/json": {"schema": session_run}}},
                "responses": {
                    "200": {"description": "the run happened: its result, with `session` (the run's id, the workspace as kept, what was not kept and why)", "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/RunResult"}},
                        "application/x-ndjson": {"schema": {"type": "string"}}
                    }},
                    "400": err("a bad request: the field is named (a limit looser than the session's, files past the workspace's quota)"),
                    "403": err("not this token's"),
                    "404": err("no such session"),
                    "409": err("the session is running a run: the error's `run` names it"),
                    "410": err("the session ended"),
                    "429": busy("the queue is full"),
                    "500": err("the jail could not be built, or a bug of the server's"),
                    "503": busy("draining, queue timeout, busy, or the runtime is unavailable")
                }
            }
        }),
    );
    paths.insert(
        "/v1/sessions/{id}/runs/{run}/calls/{call}".into(),
        json!({
            "parameters": [session_id_param(), run_id_param(), call_id_param()],
            "post": {
                "summary": "Answer a host call of a session's streaming run (as /v1/runs/{run}/calls/{call}; the session must be the caller's)",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/CallAnswer"}}}},
                "responses": {
                    "204": {"description": "the run has its answer"},
                    "400": err("not exactly one of ok and error"),
                    "403": err("not this token's session"),
                    "404": err("no such session, or no such call waits for an answer")
                }
            }
        }),
    );
}

/// The paths of a session's workspace files: `/v1/sessions/{id}/files` and `/v1/sessions/{id}/files/{path}`.
fn session_file_paths(paths: &mut Map<String, Value>) {
    paths.insert(
        "/v1/sessions/{id}/files".into(),
        json!({
            "parameters": [session_id_param()],
            "get": {
                "summary": "The workspace's files, with their sizes and modification times",
                "responses": {
                    "200": {"description": "the files", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/FileList"}}}},
                    "403": err("not this token's"), "404": err("no such session"), "410": err("the session ended")
                }
            }
        }),
    );
    paths.insert(
        "/v1/sessions/{id}/files/{path}".into(),
        json!({
            "parameters": [session_id_param(), {"name": "path", "in": "path", "required": true, "schema": {"type": "string"}, "description": "relative to the workspace: plain names only (no `..`, `.`, leading `/`, NUL); percent-encoded as a URL's path"}],
            "put": {
                "summary": "Write a file (its bytes are the body, any content type); its directories are made",
                "requestBody": {"required": true, "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}},
                "responses": {
                    "200": {"description": "written", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/FileInfo"}}}},
                    "400": err("a path that leaves the workspace"),
                    "409": err("a run is under way, or the path is both a file and a directory"),
                    "413": err("past the workspace's quota (sessions.workspace-max-bytes, -files) or requests.body-max-bytes")
                }
            },
            "get": {
                "summary": "A file's bytes",
                "responses": {"200": {"description": "the bytes", "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}, "404": err("no such file, or no such session")}
            },
            "delete": {
                "summary": "Remove a file",
                "responses": {"204": {"description": "removed"}, "404": err("no such file, or no such session"), "409": err("a run is under way")}
            }
        }),
    );
}

/// The paths of the service itself: health, readiness, liveness, info and metrics.
fn service_paths(paths: &mut Map<String, Value>) {
    paths.insert(
        "/v1/health".into(),
        json!({"get": {
            "summary": "Readiness, as /v1/health/ready (no token needed)",
            "responses": {
                "200": {"description": "every runtime can run", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}},
                "503": {"description": "starting, a runtime unavailable, or draining", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}}
            }
        }}),
    );
    paths.insert(
        "/v1/health/ready".into(),
        json!({"get": {
            "summary": "Readiness: a jail of every runtime was built and none is failing (no token needed; for balancers and readiness probes)",
            "responses": {
                "200": {"description": "every runtime can run", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}},
                "503": {"description": "starting, a runtime unavailable (named, with the reason), or draining", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}}
            }
        }}),
    );
    paths.insert(
        "/v1/health/live".into(),
        json!({"get": {
            "summary": "Liveness: the server answers (no token needed; for liveness probes)",
            "responses": {
                "200": {"description": "alive", "content": {"application/json": {"schema": {"type": "object", "properties": {
                    "status": {"type": "string", "enum": ["alive"]},
                    "uptime-s": {"type": "integer"}
                }}}}}
            }
        }}),
    );
    paths.insert(
        "/v1/info".into(),
        json!({"get": {
            "summary": "Version, runtimes, policies with their limits, request caps, and what this host enforces of each runtime's jail",
            "responses": {"200": {"description": "what this server serves", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Info"}}}}}
        }}),
    );
    paths.insert(
        "/metrics".into(),
        json!({"get": {
            "summary": "Prometheus metrics (OpenMetrics text)",
            "responses": {"200": {"description": "metrics", "content": {"application/openmetrics-text": {"schema": {"type": "string"}}}}}
        }}),
    );
}
