//! Sessions that outlive their server, through the real server and a real HTTP client: a server
//! stopped (SIGTERM) or killed (SIGKILL) and started again on its state directory has every
//! session again (ids, owners, clocks, workspaces); a meta or a file changed on disk by someone
//! without the directory's key is refused, never served; what no session owns is reaped; a
//! deleted session leaves nothing; a state directory another user could reach is refused. Needs
//! the Wasm guests (skips without them, saying so).

mod common;
mod server;

use common::*;
use serde_json::{Value, json};
use server::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

const RUNTIMES: &str = "[runtimes.python]\nguest = \"python\"\nwarm = 1\n\
                        [runtimes.javascript]\nguest = \"javascript\"\nwarm = 1\n";

/// A request over TCP with `token`: its status and JSON body.
fn ask(s: &Server, token: &str, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let auth = format!("Bearer {token}");
    let body = if body.is_null() { Vec::new() } else { body.to_string().into_bytes() };
    let r = request(To::Tcp(s.tcp.expect("a TCP listener")), method, path, &[JSON, ("authorization", &auth)], body);
    let v = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    (r.status, v)
}

fn session_dir(s: &Server, id: &str) -> PathBuf {
    s.state_dir().join("sessions").join(id)
}

#[test]
fn sessions_outlive_a_stopped_and_a_killed_server() {
    if !guests() {
        return;
    }
    let mut s = Server::start("", RUNTIMES, true);
    s.wait_warm();
    let (status, made) =
        ask(&s, TOKEN, "POST", "/v1/sessions", &json!({"runtime": "python", "idle-timeout-ms": 300_000}));
    assert_eq!(status, 201, "{made}");
    let id = made["id"].as_str().expect("id").to_string();
    let (status, live) = ask(&s, TOKEN, "POST", "/v1/sessions", &json!({"runtime": "python", "mode": "live"}));
    assert_eq!(status, 201, "{live}");
    let live_id = live["id"].as_str().expect("id").to_string();
    let runs = format!("/v1/sessions/{id}/runs");
    let code = json!({"code": "open('/app/n.txt', 'w').write('1')\nprint('one')"});
    let (_, v) = ask(&s, TOKEN, "POST", &runs, &code);
    assert_eq!(v["stdout"]["text"], "one\n", "{v}");
    let (_, v) = ask(&s, TOKEN, "POST", &format!("/v1/sessions/{live_id}/runs"), &json!({"code": "x = 41"}));
    assert_eq!(v["session"]["interpreter"], "started", "{v}");

    for signal in [libc::SIGTERM, libc::SIGKILL] {
        s = s.restart(signal);
        s.wait_warm();
        let (status, v) = ask(&s, TOKEN, "GET", &format!("/v1/sessions/{id}"), &Value::Null);
        assert_eq!(status, 200, "after signal {signal}: {v}");
        assert_eq!((&v["created-unix-ms"], &v["idle-timeout-ms"]), (&made["created-unix-ms"], &json!(300_000)), "{v}");
        // Its owner is its owner still: another token is told what it is told of no session.
        assert_eq!(ask(&s, OTHER_TOKEN, "GET", &format!("/v1/sessions/{id}"), &Value::Null).0, 403);
        let (_, listed) = ask(&s, TOKEN, "GET", "/v1/sessions", &Value::Null);
        assert_eq!(listed["sessions"].as_array().map(Vec::len), Some(2), "{listed}");
        // The next run reads what the last answered one wrote, and writes on.
        let code =
            json!({"code": "n = int(open('/app/n.txt').read())\nopen('/app/n.txt', 'w').write(str(n + 1))\nprint(n)"});
        let (_, v) = ask(&s, TOKEN, "POST", &runs, &code);
        assert_eq!(v["status"], "ok", "{v}");
        let want = if signal == libc::SIGTERM { "1\n" } else { "2\n" };
        assert_eq!(v["stdout"]["text"], want, "{v}");
    }
    // The live session's interpreter was hibernated as its server drained: it resumes.
    let (_, v) = ask(&s, TOKEN, "POST", &format!("/v1/sessions/{live_id}/runs"), &json!({"code": "print(x)"}));
    assert_eq!((&v["session"]["interpreter"], &v["stdout"]["text"]), (&json!("resumed"), &json!("41\n")), "{v}");
    // One that was not (its server killed) did not outlive it: its next run says so, with why.
    s = s.restart(libc::SIGKILL);
    s.wait_warm();
    let (_, v) = ask(&s, TOKEN, "POST", &format!("/v1/sessions/{live_id}/runs"), &json!({"code": "print(1)"}));
    assert_eq!(v["session"]["interpreter"], "restarted", "{v}");
    assert!(v["session"]["interpreter-reason"].as_str().is_some_and(|r| r.contains("server")), "{v}");
    let (_, v) = ask(&s, TOKEN, "POST", &format!("/v1/sessions/{live_id}/runs"), &json!({"code": "print(2)"}));
    assert_eq!((&v["session"]["interpreter"], v["session"].get("interpreter-reason")), (&json!("kept"), None), "{v}");
}

/// A run that changes no file (nor an interpreter's image) does not write its session's meta
/// again (its clocks reach the disk with the next change, or at drain); one that changes a file
/// writes it before its answer.
#[test]
fn a_run_that_changes_nothing_writes_nothing() {
    if !guests() {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let s = Server::start("", RUNTIMES, true);
    s.wait_warm();
    let meta_inode = |id: &str| std::fs::metadata(session_dir(&s, id).join("meta")).expect("meta").ino();
    for mode in ["workspace", "live"] {
        let (status, made) = ask(&s, TOKEN, "POST", "/v1/sessions", &json!({"runtime": "python", "mode": mode}));
        assert_eq!(status, 201, "{made}");
        let id = made["id"].as_str().expect("id").to_string();
        let runs = format!("/v1/sessions/{id}/runs");
        let (_, v) = ask(&s, TOKEN, "POST", &runs, &json!({"code": "open('/app/a.txt', 'w').write('a')"}));
        assert_eq!(v["status"], "ok", "{v}");
        let before = meta_inode(&id);
        for code in ["x = 1", "print(open('/app/a.txt').read())"] {
            let (_, v) = ask(&s, TOKEN, "POST", &runs, &json!({"code": code}));
            assert_eq!(v["status"], "ok", "{mode}: {v}");
        }
        assert_eq!(meta_inode(&id), before, "{mode}: runs that changed nothing wrote its meta again");
        let (_, v) = ask(&s, TOKEN, "POST", &runs, &json!({"code": "open('/app/b.txt', 'w').write('b')"}));
        assert_eq!(v["status"], "ok", "{v}");
        assert_ne!(meta_inode(&id), before, "{mode}: a run that wrote a file did not write its meta");
    }
}

#[test]
fn what_was_changed_on_disk_is_refused_never_served() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    s.wait_warm();
    let open = || {
        let (status, v) = json_call(&s, "POST", "/v1/sessions", &json!({"runtime": "python"}));
        assert_eq!(status, 201, "{v}");
        v["id"].as_str().expect("id").to_string()
    };
    let (forged, changed) = (open(), open());
    for id in [&forged, &changed] {
        assert_eq!(call(&s, "PUT", &format!("/v1/sessions/{id}/files/a.py"), b"print('mine')".to_vec()).status, 200);
    }
    // A file's bytes changed: neither a run nor a download gets them.
    let blobs = session_dir(&s, &changed).join("blobs");
    let blob = std::fs::read_dir(&blobs).expect("blobs").flatten().next().expect("a blob").path();
    std::fs::write(&blob, b"print('evil')").expect("write");
    let (status, v) = json_call(
        &s,
        "POST",
        &format!("/v1/sessions/{changed}/runs"),
        &json!({"code": "exec(open('/app/a.py').read())"}),
    );
    assert_eq!(status, 500, "{v}");
    assert!(v["error"]["message"].is_string(), "{v}");
    // The server's log is read by a thread of this test: the answer may come before its line.
    let logged = |what: &[&str]| wait_for(Duration::from_secs(5), || what.iter().all(|w| s.log().contains(w)));
    assert!(logged(&["a.py", "changed on disk"]), "{}", s.log());
    assert_eq!(call(&s, "GET", &format!("/v1/sessions/{changed}/files/a.py"), Vec::new()).status, 500);
    // The session is free again, its workspace as it was.
    let (_, v) = json_call(&s, "GET", &format!("/v1/sessions/{changed}"), &Value::Null);
    assert_eq!(v["running"], Value::Null, "{v}");

    // A meta changed without the key while the server was down: that session is not served.
    let s = s.restart_after(libc::SIGTERM, |state| {
        let meta = state.join("sessions").join(&forged).join("meta");
        let text = std::fs::read_to_string(&meta).expect("meta");
        assert!(text.contains("\"runs\":0"), "{text}");
        std::fs::write(&meta, text.replace("\"runs\":0", "\"runs\":7")).expect("write");
    });
    let (status, _) = json_call(&s, "GET", &format!("/v1/sessions/{forged}"), &Value::Null);
    assert_eq!(status, 404);
    let logged =
        wait_for(Duration::from_secs(5), || s.log().contains(&forged) && s.log().contains("MAC does not hold"));
    assert!(logged, "{}", s.log());
}

/// Sets `path`'s modification time an hour back (past the reaper's grace).
fn age(path: &Path) {
    let ok = std::process::Command::new("touch").args(["-h", "-d", "1 hour ago"]).arg(path).status();
    assert!(ok.is_ok_and(|s| s.success()), "touch {}", path.display());
}

#[test]
fn what_no_session_owns_is_reaped_and_a_deleted_session_leaves_nothing() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    let (_, v) = json_call(&s, "POST", "/v1/sessions", &json!({"runtime": "python"}));
    let id = v["id"].as_str().expect("id").to_string();
    assert_eq!(call(&s, "PUT", &format!("/v1/sessions/{id}/files/keep.txt"), b"kept".to_vec()).status, 200);
    let dir = session_dir(&s, &id);
    // A blob no meta names and a write cut short (a crash between a write and its rename), and
    // the directory of a session whose making was cut short: old enough to be reaped.
    let stray = dir.join("blobs").join("ab".repeat(32));
    std::fs::write(&stray, b"stray").expect("stray");
    age(&stray);
    let cut = dir.join(".tmp-0123");
    std::fs::write(&cut, b"half").expect("tmp");
    age(&cut);
    let unmade = s.state_dir().join("sessions").join(format!("s-{}", "cd".repeat(16)));
    std::fs::create_dir_all(unmade.join("blobs")).expect("unmade");
    age(&unmade);
    // A fresh one is left alone: another server on the directory may be about to name it.
    let fresh = dir.join("blobs").join("ef".repeat(32));
    std::fs::write(&fresh, b"fresh").expect("fresh");
    let s = s.restart(libc::SIGKILL);
    assert!(!stray.exists() && !cut.exists() && !unmade.exists(), "not reaped");
    assert!(fresh.exists(), "a fresh blob was reaped");
    let r = call(&s, "GET", &format!("/v1/sessions/{id}/files/keep.txt"), Vec::new());
    assert_eq!((r.status, r.body.as_ref()), (200, b"kept".as_ref()));
    assert_eq!(call(&s, "DELETE", &format!("/v1/sessions/{id}"), Vec::new()).status, 204);
    assert!(!dir.exists(), "a deleted session left {}", dir.display());
    let trash: Vec<_> = std::fs::read_dir(s.state_dir().join("trash")).expect("trash").collect();
    assert!(trash.is_empty(), "{trash:?}");
}

/// `stockade serve` on `state` with a configuration of its own in `dir`: its exit and stderr.
fn serve_on(dir: &Path, state: &Path) -> (bool, String) {
    let config = dir.join("other.toml");
    std::fs::write(&config, format!("version = 1\n[server]\nlisten = [\"unix:{}/other.sock\"]\n", dir.display()))
        .expect("config");
    let out = std::process::Command::new(stockade_bin())
        .arg("serve")
        .arg(&config)
        .arg("--state-dir")
        .arg(state)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("serve");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).to_string())
}

#[test]
fn one_server_at_a_time_on_a_state_directory() {
    let s = Server::start("", "", false);
    let (ok, err) = serve_on(s.dir.path(), &s.state_dir());
    assert!(!ok, "{err}");
    assert!(err.contains("sessions.state-dir") && err.contains(&format!("pid {}", s.pid())), "{err}");
}

#[test]
fn a_state_directory_another_user_could_reach_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("state");
    let owned = std::process::Command::new("chown").arg("65534").arg(&state).status().is_ok_and(|s| s.success());
    if !owned {
        return eprintln!("skip: cannot give the directory to another user (needs root)");
    }
    let (ok, err) = serve_on(dir.path(), &state);
    assert!(!ok, "{err}");
    assert!(err.contains("sessions.state-dir") && err.contains(&state.display().to_string()), "{err}");
    assert!(!state.join("key").exists(), "it wrote a key into a directory it refused");
}

#[test]
fn a_fork_has_a_copy_of_the_workspace_and_goes_on_on_its_own() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, true);
    s.wait_warm();
    let (_, made) = ask(&s, TOKEN, "POST", "/v1/sessions", &json!({"runtime": "python"}));
    let id = made["id"].as_str().expect("id").to_string();
    let write = |sid: &str, text: &str| {
        let code = format!("open('/app/who.txt', 'w').write({text:?})\nprint(open('/app/big.bin', 'rb').read(3))");
        let (_, v) = ask(&s, TOKEN, "POST", &format!("/v1/sessions/{sid}/runs"), &json!({"code": code}));
        assert_eq!(v["stdout"]["text"], "b'\\x07\\x07\\x07'\n", "{v}");
    };
    let r = request(
        To::Tcp(s.tcp.expect("tcp")),
        "PUT",
        &format!("/v1/sessions/{id}/files/big.bin"),
        &[("authorization", &format!("Bearer {TOKEN}"))],
        vec![7u8; 1 << 20],
    );
    assert_eq!(r.status, 200);
    write(&id, "parent");
    let r = request(
        To::Tcp(s.tcp.expect("tcp")),
        "POST",
        &format!("/v1/sessions/{id}/fork"),
        &[("authorization", &format!("Bearer {TOKEN}"))],
        Vec::new(),
    );
    let fork: Value = serde_json::from_slice(&r.body).expect("JSON");
    assert_eq!((r.status, &fork["forked-from"]), (201, &json!(id)), "{fork}");
    let fid = fork["id"].as_str().expect("id").to_string();
    assert_ne!(fid, id);
    let location = r.headers.get("location").and_then(|l| l.to_str().ok());
    assert_eq!(location, Some(format!("/v1/sessions/{fid}").as_str()));
    assert_eq!((fork["runs"].as_u64(), fork["workspace"]["files"].as_u64()), (Some(0), Some(2)), "{fork}");
    // Another token cannot fork it; each goes on on its own.
    assert_eq!(ask(&s, OTHER_TOKEN, "POST", &format!("/v1/sessions/{id}/fork"), &Value::Null).0, 403);
    write(&fid, "fork");
    let read = |sid: &str| {
        let r = request(
            To::Tcp(s.tcp.expect("tcp")),
            "GET",
            &format!("/v1/sessions/{sid}/files/who.txt"),
            &[("authorization", &format!("Bearer {TOKEN}"))],
            Vec::new(),
        );
        String::from_utf8_lossy(&r.body).to_string()
    };
    assert_eq!((read(&id), read(&fid)), ("parent".to_string(), "fork".to_string()));
    // The megabyte both hold is one file on disk, linked.
    let inode = |sid: &str| {
        use std::os::unix::fs::MetadataExt;
        let blobs = session_dir(&s, sid).join("blobs");
        let mut inodes: Vec<(u64, u64)> = std::fs::read_dir(blobs)
            .expect("blobs")
            .flatten()
            .filter_map(|e| e.metadata().ok())
            .map(|m| (m.size(), m.ino()))
            .collect();
        inodes.sort();
        inodes.last().copied()
    };
    assert_eq!(inode(&id), inode(&fid));
    // A live session with no interpreter yet forks to one with none (its interpreter's forks are
    // serve_hibernate.rs's).
    let (_, live) = ask(&s, TOKEN, "POST", "/v1/sessions", &json!({"runtime": "python", "mode": "live"}));
    let (status, v) =
        ask(&s, TOKEN, "POST", &format!("/v1/sessions/{}/fork", live["id"].as_str().unwrap_or("")), &Value::Null);
    assert_eq!((status, &v["state"], &v["mode"]), (201, &json!("none"), &json!("live")), "{v}");
}
