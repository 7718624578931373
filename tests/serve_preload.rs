//! A program runtime's Python environment, through the real server: the modules it names in
//! `preload` are imported by its interpreters before their code arrives (a warm one while it
//! waits), from the virtual environment it names in `venv` (granted read-only, its packages on
//! the path, a runtime without it has none of them); pandas preloaded answers the line;
//! a wrong `preload` or `venv` is refused by `serve --check`, naming the key. Needs
//! `/usr/bin/python3` (skips without, saying so); pandas skips without python3-pandas.

mod common;
mod server;

use common::*;
use serde_json::json;
use server::*;
use std::path::{Path, PathBuf};

/// A virtual environment (on the host's site-packages too) holding `stockade_probe`, a module
/// that notes when it was imported; readable by every uid (the jail's is not ours).
fn venv(dir: &Path) -> PathBuf {
    let v = dir.join("venv");
    let made = std::process::Command::new("/usr/bin/python3")
        .args(["-m", "venv", "--without-pip", "--system-site-packages"])
        .arg(&v)
        .status()
        .expect("python3 -m venv");
    assert!(made.success());
    let out = std::process::Command::new("/usr/bin/python3")
        .args(["-c", "import sys; print('python%d.%d' % sys.version_info[:2])"])
        .output()
        .expect("python3");
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let site = v.join("lib").join(version).join("site-packages");
    std::fs::write(site.join("stockade_probe.py"), "import time\nLOADED = time.time()\n").expect("probe");
    let chmod = std::process::Command::new("chmod").args(["-R", "a+rX"]).arg(dir).status().expect("chmod");
    assert!(chmod.success());
    v
}

fn runtime(name: &str, extra: &str) -> String {
    format!(
        "[runtimes.{name}]\nprogram = \"/usr/bin/python3\"\nbootstrap = \"python\"\npolicy = \"wrap-python\"\nwarm = 1\n{extra}\n"
    )
}

fn run(s: &Server, runtime: &str, code: &str) -> serde_json::Value {
    let (status, v) = json_call(
        s,
        "POST",
        "/v1/runs",
        &json!({"runtime": runtime, "code": code, "limits": {"wall-timeout-ms": 30000}}),
    );
    assert_eq!(status, 200, "{runtime}: {v}");
    v
}

fn out(v: &serde_json::Value) -> &str {
    v["stdout"]["text"].as_str().unwrap_or("")
}

#[test]
fn preloaded_modules_are_imported_before_the_code_arrives_from_the_runtime_s_venv() {
    if python3().is_none() {
        return;
    }
    let dir = tempfile::Builder::new().prefix("stockade-venv").tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("dir");
    let v = venv(dir.path());
    let rest = runtime("data", &format!("venv = \"{}\"\npreload = [\"stockade_probe\", \"json\"]", v.display()))
        + &runtime("plain", "");
    let s = Server::start("", &rest, false);
    s.wait_warm();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs_f64();
    let code = format!(
        "import sys\nprint('stockade_probe' in sys.modules, 'json' in sys.modules)\nimport stockade_probe\nprint(stockade_probe.LOADED < {now})"
    );
    let r = run(&s, "data", &code);
    assert_eq!((r["status"].as_str(), out(&r)), (Some("ok"), "True True\nTrue\n"), "{r}");
    assert!(r.get("warm-start").is_some(), "a warm jail, its modules imported while it waited: {r}");
    // A run's code and argv are its own; the runtime's arguments are gone from sys.argv.
    let (_, r) = json_call(
        &s,
        "POST",
        "/v1/runs",
        &json!({"runtime": "data", "code": "import sys; print(sys.argv)", "argv": ["a"]}),
    );
    assert_eq!(out(&r), "['-c', 'a']\n", "{r}");
    // The venv is the runtime's: another has neither its modules nor its directory.
    let r = run(&s, "plain", "import stockade_probe");
    assert!(r["stderr"]["text"].as_str().unwrap_or("").contains("No module named 'stockade_probe'"), "{r}");
    let r = run(&s, "plain", &format!("import os; print(os.path.exists({:?}))", v.display().to_string()));
    assert_eq!(out(&r), "False\n", "{r}");
    // /v1/info says what each runtime preloads, and from where.
    let (_, info) = json_call(&s, "GET", "/v1/info", &json!(null));
    let data = info["runtimes"].as_array().and_then(|a| a.iter().find(|r| r["name"] == "data")).expect("data");
    assert_eq!(data["runs"]["preload"], json!(["stockade_probe", "json"]), "{data}");
}

#[test]
fn pandas_preloaded_answers_at_warm_speed() {
    if python3().is_none() {
        return;
    }
    let has = std::process::Command::new("/usr/bin/python3").args(["-c", "import pandas"]).status();
    if !has.is_ok_and(|s| s.success()) {
        eprintln!("skip: the host's python3 has no pandas (apt-get install python3-pandas)");
        return;
    }
    let s = Server::start("", &runtime("data", "preload = [\"pandas\"]"), false);
    s.wait_warm();
    let r = run(&s, "data", "import pandas as pd; print(pd.DataFrame({\"a\": [1, 2]}).a.sum())");
    assert_eq!((r["status"].as_str(), out(&r)), (Some("ok"), "3\n"), "{r}");
    assert!(r.get("warm-start").is_some(), "{r}");
    // A warm run that imports pandas takes less than a tenth of what importing it takes.
    assert!(r["wall-ms"].as_f64().unwrap_or(1e9) < 2000.0, "{r}");
}

#[test]
fn a_wrong_preload_or_venv_is_refused_naming_its_key() {
    let dir = tempfile::tempdir().expect("dir");
    for (extra, key, says) in [
        ("preload = [\"os; import x\"]", "runtimes.p.preload[0]", "a module's name"),
        ("preload = [\"1abc\"]", "runtimes.p.preload[0]", "a module's name"),
        ("venv = \"relative/venv\"", "runtimes.p.venv", "pyvenv.cfg"),
        (&format!("venv = \"{}\"", dir.path().display()), "runtimes.p.venv", "pyvenv.cfg"),
    ] {
        let config = dir.path().join("serve.toml");
        let text = format!("version = 1\n[server]\nlisten = [\"unix:/tmp/never.sock\"]\n{}", runtime("p", extra));
        std::fs::write(&config, text).expect("config");
        let got = stockade().args(["serve", "--check"]).arg(&config).output().expect("stockade");
        let err = String::from_utf8_lossy(&got.stderr);
        assert!(!got.status.success() && err.contains(key) && err.contains(says), "{extra}: {err}");
    }
    let stdin = "version = 1\n[server]\nlisten = [\"unix:/tmp/never.sock\"]\n[runtimes.p]\nprogram = \"/usr/bin/python3\"\nbootstrap = \"stdin\"\npreload = [\"json\"]\n";
    let config = dir.path().join("stdin.toml");
    std::fs::write(&config, stdin).expect("config");
    let got = stockade().args(["serve", "--check"]).arg(&config).output().expect("stockade");
    let err = String::from_utf8_lossy(&got.stderr);
    assert!(!got.status.success() && err.contains("bootstrap = \"python\""), "{err}");
}
