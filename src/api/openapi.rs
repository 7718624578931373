//! The OpenAPI 3.1 description of API v1: the request, result and error schemas come from the
//! types themselves (schemars); the paths are written here.

use super::session::{FileInfo, FileList, SessionBody, SessionInfo, SessionRunBody};
use super::{ErrorBody, LastEvent, RunBody, RunResult};

/// The OpenAPI 3.1 description of API v1 (`docs/openapi.json` is this, checked by a test; `stockade
/// serve --openapi` prints it). The request and report schemas come from the types themselves.
pub fn openapi() -> serde_json::Value {
    use serde_json::json;
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
    let mut schemas = serde_json::Map::new();
    for (name, schema) in generator.take_definitions(true) {
        schemas.insert(name, schema);
    }
    schemas.insert(
        "Readiness".into(),
        json!({
            "type": "object",
            "required": ["status", "running", "queued", "warm"],
            "properties": {
                "status": {"type": "string", "enum": ["ok", "starting", "unavailable", "draining"]},
                "running": {"type": "integer"},
                "queued": {"type": "integer"},
                "warm": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                    "ready": {"type": "integer"}, "target": {"type": "integer"}
                }}},
                "unavailable": {"type": "object", "additionalProperties": {"type": "string"}, "description": "each runtime that cannot run (or not yet), and why"}
            }
        }),
    );
    let err = |d: &str| json!({"description": d, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}});
    let busy = |d: &str| {
        let mut e = err(d);
        e["headers"] = json!({"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}});
        e
    };
    let session_id = json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^s-[0-9a-f]{32}$"}});
    let run_id = json!({"name": "run", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^r-[0-9a-f]{16}$"}});
    let idempotency_key = json!({
        "name": "Idempotency-Key", "in": "header", "required": false,
        "schema": {"type": "string", "pattern": "^[!-~]{1,255}$"},
        "description": "the same key (of the same caller, with the same path and body) within requests.idempotency-window-ms gets the first answer (with the header Idempotency-Replayed: true), never a second run; one still running is waited for; another request with the key is 422 idempotency-mismatch; not with ?stream"
    });
    let call_id =
        json!({"name": "call", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^c-[0-9]+$"}});
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
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "stockade service API",
            "version": "1",
            "description": "Runs code in stockade jails: `stockade serve`. See docs/api.md."
        },
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "paths": {
            "/v1/runs": {"post": {
                "summary": "Run code (or a Wasm module) in a jail and report what happened",
                "parameters": [{
                    "name": "stream", "in": "query", "required": false,
                    "schema": {"type": "string", "enum": ["ndjson"]},
                    "description": "answer as NDJSON events as output happens: {\"stdout\": TEXT}, {\"stderr\": TEXT} (or stdout-base64/stderr-base64), {\"call\": HostCall} for each host call of a run with tools (answer it at /v1/runs/{run}/calls/{id}), then the last event, a LastEvent: {\"report\": RunResult} or {\"error\": ...}; a run with tools must stream"
                }, idempotency_key.clone()],
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
            }},
            "/v1/runs/{run}/calls/{call}": {
                "parameters": [run_id.clone(), call_id.clone()],
                "post": {
                    "summary": "Answer a host call of a streaming run (its `call` event): the tool's value, or its error",
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/CallAnswer"}}}},
                    "responses": {
                        "204": {"description": "the run has its answer"},
                        "400": err("not exactly one of ok and error"),
                        "404": err("no such call waits for an answer: answered, past its time, never made, or another caller's run")
                    }
                }
            },
            "/v1/sessions": {
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
            },
            "/v1/sessions/{id}": {
                "parameters": [session_id.clone()],
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
            },
            "/v1/sessions/{id}/runs": {
                "parameters": [session_id.clone()],
                "post": {
                    "summary": "Run code in the session's workspace: a fresh jail, /app holding the session's files; /app as the run leaves it is kept",
                    "parameters": [{"name": "stream", "in": "query", "required": false, "schema": {"type": "string", "enum": ["ndjson"]}, "description": "as for /v1/runs"}, idempotency_key],
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
            },
            "/v1/sessions/{id}/runs/{run}/calls/{call}": {
                "parameters": [session_id.clone(), run_id, call_id],
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
            },
            "/v1/sessions/{id}/files": {
                "parameters": [session_id.clone()],
                "get": {
                    "summary": "The workspace's files, with their sizes and modification times",
                    "responses": {
                        "200": {"description": "the files", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/FileList"}}}},
                        "403": err("not this token's"), "404": err("no such session"), "410": err("the session ended")
                    }
                }
            },
            "/v1/sessions/{id}/files/{path}": {
                "parameters": [session_id, {"name": "path", "in": "path", "required": true, "schema": {"type": "string"}, "description": "relative to the workspace: plain names only (no `..`, `.`, leading `/`, NUL); percent-encoded as a URL's path"}],
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
            },
            "/v1/health": {"get": {
                "summary": "Readiness, as /v1/health/ready (no token needed)",
                "responses": {
                    "200": {"description": "every runtime can run", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Readiness"}}}},
                    "503": {"description": "starting, a runtime unavailable, or draining", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Readiness"}}}}
                }
            }},
            "/v1/health/ready": {"get": {
                "summary": "Readiness: a jail of every runtime was built and none is failing (no token needed; for balancers and readiness probes)",
                "responses": {
                    "200": {"description": "every runtime can run", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Readiness"}}}},
                    "503": {"description": "starting, a runtime unavailable (named, with the reason), or draining", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Readiness"}}}}
                }
            }},
            "/v1/health/live": {"get": {
                "summary": "Liveness: the server answers (no token needed; for liveness probes)",
                "responses": {
                    "200": {"description": "alive", "content": {"application/json": {"schema": {"type": "object", "properties": {
                        "status": {"type": "string", "enum": ["alive"]},
                        "uptime-s": {"type": "integer"}
                    }}}}}
                }
            }},
            "/v1/info": {"get": {
                "summary": "Version, runtimes, policies with their limits, request caps, and what this host enforces of each runtime's jail",
                "responses": {"200": {"description": "what this server serves", "content": {"application/json": {"schema": {"type": "object"}}}}}
            }},
            "/metrics": {"get": {
                "summary": "Prometheus metrics (OpenMetrics text)",
                "responses": {"200": {"description": "metrics", "content": {"application/openmetrics-text": {"schema": {"type": "string"}}}}}
            }}
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "TCP listeners: a token from server.tokens-file; the unix socket is guarded by its mode and group"}}
        }
    })
}
