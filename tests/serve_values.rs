//! What a run's code gives back beside its output, through the real server and a real HTTP
//! client: the value of its last expression (a notebook cell's) as `value` when it is JSON, else
//! its repr as `value-repr`, none for a run that ends with a statement or a value of
//! `None`/`undefined`; the same in every turn of a live session; and, for the host's python3
//! with matplotlib, the figures left open as PNG `outputs`. Needs the Wasm guests (skips without
//! them, saying so); python3 and matplotlib each skip, saying so, when the host has none.

mod common;
mod server;

use base64::Engine as _;
use common::*;
use serde_json::{Value, json};
use server::*;

const RUNTIMES: &str = "[runtimes.python]\nguest = \"python\"\nwarm = 1\n\
                        [runtimes.javascript]\nguest = \"javascript\"\nwarm = 1\n\
                        [runtimes.python3]\nprogram = \"/usr/bin/python3\"\nbootstrap = \"python\"\n\
                        policy = \"wrap-python\"\nwarm = 1\n";

fn run(s: &Server, runtime: &str, code: &str) -> Value {
    let (status, v) = json_call(s, "POST", "/v1/runs", &json!({"runtime": runtime, "code": code}));
    assert_eq!(status, 200, "{runtime}: {v}");
    v
}

fn said(v: &Value) -> (Option<&Value>, Option<&str>) {
    (v.get("value"), v["value-repr"].as_str())
}

/// The Python runtimes' cases: a value, a repr, none, and an error's none.
fn python_cases() -> Vec<(&'static str, Option<Value>, Option<&'static str>)> {
    vec![
        ("1 + 1", Some(json!(2)), None),
        ("x = [1, 2]\n{'x': x, 'ok': True, 'n': None}", Some(json!({"x": [1, 2], "ok": true, "n": null})), None),
        ("(1, 2)", None, Some("(1, 2)")),
        ("{1: 'a'}", None, Some("{1: 'a'}")),
        ("float('nan')", None, Some("nan")),
        ("print(3)", None, None),
        ("x = 1", None, None),
        ("None", None, None),
        ("def f():\n    return 5\nf()", Some(json!(5)), None),
        ("1/0", None, None),
    ]
}

#[test]
fn a_run_s_last_expression_is_its_value() {
    if !guests() {
        return;
    }
    let mut runtimes = vec!["python"];
    match python3() {
        Some(_) => runtimes.push("python3"),
        None => eprintln!("skip python3: no /usr/bin/python3"),
    }
    for spawner in ["true", "false"] {
        let s = Server::start(&format!("spawner = {spawner}"), RUNTIMES, false);
        for rt in &runtimes {
            for (code, value, repr) in python_cases() {
                let v = run(&s, rt, code);
                let what = format!("{rt}, spawner = {spawner}: {code:?}");
                assert_eq!(said(&v), (value.as_ref(), repr), "{what}: {v}");
                let ok = if code == "1/0" { "exited-nonzero" } else { "ok" };
                assert_eq!(v["status"], ok, "{what}: {v}");
            }
            // What the code printed stays its stdout; a traceback its stderr, its lines its own.
            let v = run(&s, rt, "print('a')\n'b'");
            assert_eq!((v["stdout"]["text"].as_str(), said(&v)), (Some("a\n"), (Some(&json!("b")), None)), "{rt}: {v}");
            let v = run(&s, rt, "x = 1\nx.nope");
            let err = v["stderr"]["text"].as_str().unwrap_or("");
            assert!(err.contains("line 2, in <module>") && !err.contains("_cell"), "{rt}: {v}");
            // Past the cap, a repr is cut; a value too large for JSON's cap comes as its repr.
            let v = run(&s, rt, "'x' * 20000");
            let repr = v["value-repr"].as_str().unwrap_or("");
            assert_eq!((v.get("value"), repr.len()), (None, 16384), "{rt}");
        }
        for (code, value, repr) in [
            ("[1, 2].map(x => x * 2)", Some(json!([2, 4])), None),
            ("({a: 1, b: 'two'})", Some(json!({"a": 1, "b": "two"})), None),
            ("new Map([[1, 2]])", None, Some("[object Map]")),
            ("10n ** 3n", None, Some("1000")),
            ("console.log(1)", None, None),
            ("let y = 2", None, None),
            ("undefined", None, None),
        ] {
            let v = run(&s, "javascript", code);
            assert_eq!(said(&v), (value.as_ref(), repr), "javascript, spawner = {spawner}: {code:?}: {v}");
        }
    }
}

#[test]
fn each_turn_of_a_live_session_has_its_value() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    let mut runtimes =
        vec![("python", "x = 41", "x + 1", "print(x)"), ("javascript", "var x = 41", "x + 1", "print(x)")];
    if python3().is_some() {
        runtimes.push(("python3", "x = 41", "x + 1", "print(x)"));
    }
    for (rt, first, second, third) in runtimes {
        let (status, v) = json_call(&s, "POST", "/v1/sessions", &json!({"runtime": rt, "mode": "live"}));
        assert_eq!(status, 201, "{v}");
        let id = v["id"].as_str().expect("an id").to_string();
        let at = format!("/v1/sessions/{id}/runs");
        let (_, v) = json_call(&s, "POST", &at, &json!({"code": first}));
        assert_eq!(said(&v), (None, None), "{rt}: {v}");
        let (_, v) = json_call(&s, "POST", &at, &json!({"code": second}));
        assert_eq!(
            (said(&v), v["session"]["interpreter"].as_str()),
            ((Some(&json!(42)), None), Some("kept")),
            "{rt}: {v}"
        );
        let (_, v) = json_call(&s, "POST", &at, &json!({"code": third}));
        assert_eq!((said(&v), v["stdout"]["text"].as_str()), ((None, None), Some("41\n")), "{rt}: {v}");
        assert_eq!(call(&s, "DELETE", &format!("/v1/sessions/{id}"), Vec::new()).status, 204);
    }
}

/// A JavaScript run's bootstrap gets the sources of `host` and of what gives the value back in
/// the guest's environment and takes them out before the code runs: the code sees the policy's
/// environment alone (a one-off run, a live session's turn), and its value is given even when
/// it replaced the globals the bootstrap read them with.
#[test]
fn a_javascript_run_sees_the_policy_s_environment_alone() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    let env = json!(r#"{"PATH":"/usr/local/bin:/usr/bin:/bin","HOME":"/tmp","LANG":"C.UTF-8"}"#);
    let v = run(&s, "javascript", "JSON.stringify(std.getenviron())");
    assert_eq!(v["value"], env, "{v}");
    let v = run(&s, "javascript", "globalThis.eval = null; std.getenv = () => 'x'; [1, 2]");
    assert_eq!(said(&v), (Some(&json!([1, 2])), None), "{v}");
    let (status, v) = json_call(&s, "POST", "/v1/sessions", &json!({"runtime": "javascript", "mode": "live"}));
    assert_eq!(status, 201, "{v}");
    let at = format!("/v1/sessions/{}/runs", v["id"].as_str().expect("an id"));
    let (_, v) = json_call(&s, "POST", &at, &json!({"code": "eval = null; 41"}));
    assert_eq!(said(&v), (Some(&json!(41)), None), "{v}");
    let (_, v) = json_call(&s, "POST", &at, &json!({"code": "JSON.stringify(std.getenviron())"}));
    assert_eq!(v["value"], env, "{v}");
}

/// The host's python3 with matplotlib: the figures left open come back as PNG (matplotlib's
/// non-interactive backend: none is shown), each a real PNG of its size; past the cap on their
/// count the rest are left out, said; a live session's figures are closed once given.
#[test]
fn figures_left_open_come_back_as_png() {
    if !guests() || python3().is_none() {
        return;
    }
    let has = std::process::Command::new("/usr/bin/python3").args(["-c", "import matplotlib"]).status();
    if !has.is_ok_and(|s| s.success()) {
        eprintln!("skip: the host's python3 has no matplotlib (apt-get install python3-matplotlib)");
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    let code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('squares')\nprint('drawn')";
    let (status, v) = json_call(
        &s,
        "POST",
        "/v1/runs",
        &json!({"runtime": "python3", "code": code, "limits": {"wall-timeout-ms": 30000}}),
    );
    assert_eq!((status, v["status"].as_str()), (200, Some("ok")), "{v}");
    assert_eq!(v["stdout"]["text"], "drawn\n", "{v}");
    let outputs = v["outputs"].as_array().expect("outputs");
    assert_eq!((outputs.len(), outputs[0]["type"].as_str()), (1, Some("image/png")), "{v}");
    let png = base64::engine::general_purpose::STANDARD.decode(outputs[0]["base64"].as_str().unwrap()).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG's signature");
    assert_eq!(outputs[0]["bytes"].as_u64(), Some(png.len() as u64));
    // Its width and height, from the IHDR chunk: matplotlib's default 6.4 x 4.8 in at 100 dpi.
    let (w, h) =
        (u32::from_be_bytes(png[16..20].try_into().unwrap()), u32::from_be_bytes(png[20..24].try_into().unwrap()));
    assert_eq!((w, h), (640, 480));
    assert!(png.len() > 5000, "a plot, not an empty image: {} bytes", png.len());

    let many = "import matplotlib.pyplot as plt\nfor i in range(10):\n    plt.figure(); plt.plot([i])";
    let (_, v) = json_call(
        &s,
        "POST",
        "/v1/runs",
        &json!({"runtime": "python3", "code": many, "limits": {"wall-timeout-ms": 30000}}),
    );
    assert_eq!(v["outputs"].as_array().map(Vec::len), Some(8), "{v}");
    assert!(v["error"].as_str().unwrap_or("").contains("2 figure(s) left out"), "{v}");

    let (status, v) = json_call(&s, "POST", "/v1/sessions", &json!({"runtime": "python3", "mode": "live"}));
    assert_eq!(status, 201, "{v}");
    let at = format!("/v1/sessions/{}/runs", v["id"].as_str().unwrap());
    let body = |code: &str| json!({"code": code, "limits": {"wall-timeout-ms": 30000}});
    let (_, v) = json_call(&s, "POST", &at, &body("import matplotlib.pyplot as plt\nplt.plot([1, 2])\n1 + 1"));
    assert_eq!((v["outputs"].as_array().map(Vec::len), v.get("value")), (Some(1), Some(&json!(2))), "{v}");
    let (_, v) = json_call(&s, "POST", &at, &body("print(len(plt.get_fignums()))"));
    assert_eq!((v.get("outputs"), v["stdout"]["text"].as_str()), (None, Some("0\n")), "{v}");
}
