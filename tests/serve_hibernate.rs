//! Live interpreters hibernated and resumed, through the real server and a real HTTP client: a
//! hibernated session holds no jail, and its next run has the variables, functions, classes and
//! modules of the runs before; a fork of a live or a hibernated session goes on on its own (its
//! `random` drawn again); a draining server hibernates its live sessions and a restarted one
//! resumes them, after a SIGKILL too; an image changed on disk is refused, never run; an idle
//! interpreter hibernates by itself; one holding a file open is refused and goes on; a
//! JavaScript interpreter (QuickJS) hibernates and resumes too, its fork copying the workspace
//! only; one that has no image (the host's python3) is ended, the workspace kept; repeated
//! cycles leave no image behind. Needs the Wasm guests (skips without them, saying so).

mod common;
mod server;

use serde_json::{Value, json};
use server::*;
use std::path::PathBuf;

const RUNTIMES: &str = "[runtimes.python]\nguest = \"python\"\nwarm = 1\n\
                        [runtimes.javascript]\nguest = \"javascript\"\nwarm = 0\n";

fn ask(s: &Server, method: &str, path: &str, body: &Value) -> (u16, Value) {
    json_call(s, method, path, body)
}

fn live(s: &Server, runtime: &str) -> String {
    let (status, v) = ask(s, "POST", "/v1/sessions", &json!({"runtime": runtime, "mode": "live"}));
    assert_eq!(status, 201, "{v}");
    v["id"].as_str().expect("id").to_string()
}

/// A run of session `id`: its stdout, and what became of its interpreter (and why).
fn run(s: &Server, id: &str, code: &str) -> (String, String, Value) {
    let (status, v) = ask(s, "POST", &format!("/v1/sessions/{id}/runs"), &json!({"code": code}));
    assert_eq!(status, 200, "{v}");
    let out = v["stdout"]["text"].as_str().unwrap_or_default().to_string();
    let how = v["session"]["interpreter"].as_str().unwrap_or_default().to_string();
    (out, how, v)
}

fn hibernate(s: &Server, id: &str) -> Value {
    let (status, v) = ask(s, "POST", &format!("/v1/sessions/{id}/hibernate"), &Value::Null);
    assert_eq!(status, 200, "{v}");
    v
}

fn blobs(s: &Server, id: &str) -> Vec<PathBuf> {
    let dir = s.state_dir().join("sessions").join(id).join("blobs");
    std::fs::read_dir(dir).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default()
}

/// The server's jails' cgroups below its own (a live interpreter's among them).
fn jails_of(s: &Server) -> usize {
    descendants_of(s.pid()).len()
}

const STATE: &str = "import json, fractions\n\
                     x = 41\n\
                     def f(a): return a + 1\n\
                     class C:\n    def hi(self): return 'hi'\n\
                     data = {'k': list(range(100000))}\n\
                     print('ok')";
const CHECK: &str = "print(f(x), C().hi(), len(data['k']), json.dumps([1]), fractions.Fraction(1, 3))";
const CHECKED: &str = "42 hi 100000 [1] 1/3\n";

#[test]
fn a_hibernated_session_holds_no_jail_and_resumes_with_its_state() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    s.wait_warm();
    let id = live(&s, "python");
    assert_eq!(run(&s, &id, STATE).0, "ok\n");
    let held = jails_of(&s);
    let v = hibernate(&s, &id);
    assert_eq!(v["state"], "hibernated", "{v}");
    assert!(v["hibernate-ms"].as_f64().is_some_and(|ms| ms > 0.0), "{v}");
    let image = v["image-bytes"].as_u64().expect("image-bytes");
    assert_eq!(blobs(&s, &id).len(), 1, "the image is the session's one blob");
    assert_eq!(std::fs::metadata(&blobs(&s, &id)[0]).expect("image").len(), image);
    assert_eq!(ask(&s, "GET", &format!("/v1/sessions/{id}"), &Value::Null).1["state"], "hibernated");
    // Its jail is gone: the server holds one process fewer (its warm pool's are as they were).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while jails_of(&s) >= held && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(jails_of(&s) < held, "the hibernated interpreter's jail is still there");
    // Hibernating a hibernated session changes nothing.
    assert_eq!(hibernate(&s, &id)["image-bytes"], json!(image));

    let (out, how, v) = run(&s, &id, CHECK);
    assert_eq!((out.as_str(), how.as_str()), (CHECKED, "resumed"), "{v}");
    assert!(v["session"]["resume-ms"].as_f64().is_some_and(|ms| ms > 0.0), "{v}");
    assert_eq!(ask(&s, "GET", &format!("/v1/sessions/{id}"), &Value::Null).1["state"], "live");
    // Resumed, its old image is no longer its state: it is gone from the disk.
    assert_eq!(blobs(&s, &id).len(), 0, "{:?}", blobs(&s, &id));
    let (out, how, _) = run(&s, &id, "x += 1\nprint(f(x))");
    assert_eq!((out.as_str(), how.as_str()), ("43\n", "kept"));

    // Cycles leave one image at most, and no jail.
    for n in 0..5 {
        hibernate(&s, &id);
        assert_eq!(blobs(&s, &id).len(), 1, "cycle {n}");
        // Its data crosses each time: a resumed interpreter's pages mapped from its last image
        // are in its next.
        let (out, how, _) = run(&s, &id, "x += 1\nprint(x, sum(data['k']))");
        assert_eq!((out, how.as_str()), (format!("{} 4999950000\n", 43 + n), "resumed"));
    }
    // An image past the policy's file-size limit (64 MiB) crosses: the jail sends it on a pipe,
    // and writes no file of the host's.
    run(&s, &id, "big = b'\\x01' * (80 << 20)");
    let v = hibernate(&s, &id);
    assert!(v["image-bytes"].as_u64().is_some_and(|b| b > 80 << 20), "{v}");
    let (out, how, _) = run(&s, &id, "print(len(big), big[-1])");
    assert_eq!((out.as_str(), how.as_str()), ("83886080 1\n", "resumed"));
}

#[test]
fn forks_go_on_on_their_own_their_random_drawn_again() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    s.wait_warm();
    let id = live(&s, "python");
    run(&s, &id, &format!("{STATE}\nimport random\nrandom.seed(7)"));
    // A live parent: its interpreter goes on, kept; the fork resumes a copy.
    let (status, fork) = ask(&s, "POST", &format!("/v1/sessions/{id}/fork"), &Value::Null);
    assert_eq!(status, 201, "{fork}");
    assert_eq!((&fork["state"], &fork["forked-from"]), (&json!("hibernated"), &json!(id)), "{fork}");
    let fid = fork["id"].as_str().expect("id").to_string();
    let draw = "print(random.random())";
    let (parent_draw, how, _) = run(&s, &id, draw);
    assert_eq!(how, "kept");
    let (fork_draw, how, v) = run(&s, &fid, &format!("{CHECK}\n{draw}"));
    assert_eq!(how, "resumed", "{v}");
    assert!(fork_draw.starts_with(CHECKED), "{fork_draw}");
    assert_ne!(&fork_draw[CHECKED.len()..], parent_draw, "the fork's random was drawn again");
    run(&s, &fid, "x = 7");
    assert_eq!(run(&s, &id, "print(x)").0, "41\n");
    assert_eq!(run(&s, &fid, "print(x)").0, "7\n");

    // A hibernated parent: both resume from the same image, each on its own.
    hibernate(&s, &id);
    let (status, fork) = ask(&s, "POST", &format!("/v1/sessions/{id}/fork"), &Value::Null);
    assert_eq!(status, 201, "{fork}");
    let second = fork["id"].as_str().expect("id").to_string();
    let (out, how, _) = run(&s, &second, "x = 0\nprint(f(x))");
    assert_eq!((out.as_str(), how.as_str()), ("1\n", "resumed"));
    // The token holds as many live interpreters as it may (2): the one idle longest (the first
    // fork's) is hibernated to make room.
    let (out, how, _) = run(&s, &id, "print(f(x))");
    assert_eq!((out.as_str(), how.as_str()), ("42\n", "resumed"));
    assert_eq!(ask(&s, "GET", &format!("/v1/sessions/{fid}"), &Value::Null).1["state"], "hibernated");
    assert_eq!(run(&s, &fid, "print(x)").0, "7\n");
}

#[test]
fn hibernated_sessions_survive_a_drain_and_a_kill_and_a_changed_image_is_refused() {
    if !guests() {
        return;
    }
    let mut s = Server::start("", RUNTIMES, false);
    s.wait_warm();
    let id = live(&s, "python");
    let other = live(&s, "python");
    run(&s, &id, STATE);
    run(&s, &other, "y = 'kept'");
    // A drain hibernates every live interpreter; the restarted server resumes them.
    s = s.restart(libc::SIGTERM);
    s.wait_warm();
    assert_eq!(ask(&s, "GET", &format!("/v1/sessions/{id}"), &Value::Null).1["state"], "hibernated");
    let (out, how, v) = run(&s, &id, CHECK);
    assert_eq!((out.as_str(), how.as_str()), (CHECKED, "resumed"), "{v}");
    hibernate(&s, &id);
    // Killed: what was hibernated is on disk, and resumes.
    s = s.restart(libc::SIGKILL);
    s.wait_warm();
    let (out, how, _) = run(&s, &id, CHECK);
    assert_eq!((out.as_str(), how.as_str()), (CHECKED, "resumed"));

    // An image changed on disk (one byte) is refused, never run: a new interpreter starts.
    let image = blobs(&s, &other);
    assert_eq!(image.len(), 1, "{image:?}");
    s = s.restart_after(libc::SIGKILL, |_| {
        let mut bytes = std::fs::read(&image[0]).expect("image");
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x55;
        std::fs::write(&image[0], bytes).expect("write");
    });
    s.wait_warm();
    let (out, how, v) = run(&s, &other, "print(globals().get('y'))");
    assert_eq!((out.as_str(), how.as_str()), ("None\n", "restarted"), "{v}");
    let why = v["session"]["interpreter-reason"].as_str().unwrap_or_default();
    assert!(why.contains("changed on disk"), "{v}");
    assert!(s.log().contains("its bytes were changed on disk"), "{}", s.log());
}

#[test]
fn idle_interpreters_hibernate_by_themselves_and_open_files_refuse_it() {
    if !guests() {
        return;
    }
    let s = Server::start("", &format!("[sessions]\nhibernate-after-ms = 700\n{RUNTIMES}"), false);
    s.wait_warm();
    let id = live(&s, "python");
    let busy = live(&s, "python");
    run(&s, &id, "x = 41");
    run(&s, &busy, "f = open('/app/held.txt', 'w')\nf.write('a')");
    // Asked, one that holds a file open is refused (409), and goes on as it was.
    let (status, v) = ask(&s, "POST", &format!("/v1/sessions/{busy}/hibernate"), &Value::Null);
    assert_eq!((status, &v["error"]["code"]), (409, &json!("cannot-hibernate")), "{v}");
    let state = |sid: &str| ask(&s, "GET", &format!("/v1/sessions/{sid}"), &Value::Null).1["state"].clone();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while state(&id) != "hibernated" && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(state(&id), "hibernated");
    // Not hibernated by itself: it could not be, and stays live.
    assert_eq!(state(&busy), "live");
    let (out, how, _) = run(&s, &busy, "f.close()\nprint(open('/app/held.txt').read())");
    assert_eq!((out.as_str(), how.as_str()), ("a\n", "kept"));
    let (out, how, _) = run(&s, &id, "print(x)");
    assert_eq!((out.as_str(), how.as_str()), ("41\n", "resumed"));
}

#[test]
fn a_javascript_interpreter_hibernates_and_one_without_an_image_is_ended_its_workspace_kept() {
    if !guests() {
        return;
    }
    let python3 = std::path::Path::new("/usr/bin/python3").exists();
    let host = if python3 {
        "[runtimes.python3]\nprogram = \"/usr/bin/python3\"\nbootstrap = \"python\"\npolicy = \"wrap-python\"\nwarm = 0\n"
    } else {
        eprintln!("skip python3: no /usr/bin/python3");
        ""
    };
    let s = Server::start("", &format!("{RUNTIMES}{host}"), false);
    s.wait_warm();
    // QuickJS: its var, let, functions and classes cross, twice.
    let js = live(&s, "javascript");
    run(
        &s,
        &js,
        "var x = 41; let lex = 'l'; function f(a) { return a + 1 } class C { hi() { return 'hi' } } globalThis.K = C;\n\
         const big = Array.from({ length: 100000 }, (_, i) => i); console.log('ok')",
    );
    let v = hibernate(&s, &js);
    assert_eq!(v["state"], "hibernated", "{v}");
    assert!(v["image-bytes"].as_u64().is_some_and(|b| b > 0), "{v}");
    let (out, how, v) = run(&s, &js, "console.log(f(x), lex, new K().hi(), big.reduce((a, b) => a + b, 0))");
    assert_eq!((out.as_str(), how.as_str()), ("42 l hi 4999950000\n", "resumed"), "{v}");
    hibernate(&s, &js);
    assert_eq!(run(&s, &js, "x += 1; console.log(f(x))").0, "43\n");
    // A file it holds open refuses (409), and it goes on.
    run(&s, &js, "var fh = std.open('/app/a.txt', 'w'); fh.puts('a')");
    let (status, v) = ask(&s, "POST", &format!("/v1/sessions/{js}/hibernate"), &Value::Null);
    assert_eq!((status, &v["error"]["code"]), (409, &json!("cannot-hibernate")), "{v}");
    let (out, how, _) = run(&s, &js, "fh.close(); console.log(std.loadFile('/app/a.txt'))");
    assert_eq!((out.as_str(), how.as_str()), ("a\n", "kept"));
    // Its fork copies the workspace only (Math.random cannot be drawn again): it says why.
    let (status, fork) = ask(&s, "POST", &format!("/v1/sessions/{js}/fork"), &Value::Null);
    assert_eq!(status, 201, "{fork}");
    let fid = fork["id"].as_str().expect("id");
    let (out, how, v) = run(&s, fid, "console.log(typeof x, std.loadFile('/app/a.txt'))");
    assert_eq!((out.as_str(), how.as_str()), ("undefined a\n", "restarted"), "{v}");
    assert!(v["session"]["interpreter-reason"].as_str().is_some_and(|r| r.contains("Math.random")), "{v}");
    for sid in [js.as_str(), fid] {
        assert_eq!(call(&s, "DELETE", &format!("/v1/sessions/{sid}"), Vec::new()).status, 204);
    }

    // The host's python3 has no image: ended, its workspace kept, its next run says why.
    if python3 {
        let id = live(&s, "python3");
        run(&s, &id, "x = 1\nopen('/app/kept.txt', 'w').write('k')");
        let v = hibernate(&s, &id);
        assert_eq!((&v["state"], v.get("image-bytes")), (&json!("none"), None), "{v}");
        let (out, how, v) = run(&s, &id, "print(globals().get('x'), open('/app/kept.txt').read())");
        assert_eq!((out.as_str(), how.as_str()), ("None k\n", "restarted"), "{v}");
        assert!(v["session"]["interpreter-reason"].as_str().is_some_and(|r| r.contains("cannot be hibernated")), "{v}");
    }
    // A workspace session has no interpreter to hibernate: 400 naming `mode`.
    let (status, made) = ask(&s, "POST", "/v1/sessions", &json!({"runtime": "python"}));
    assert_eq!(status, 201);
    let ws = made["id"].as_str().expect("id");
    let (status, v) = ask(&s, "POST", &format!("/v1/sessions/{ws}/hibernate"), &Value::Null);
    assert_eq!((status, &v["error"]["field"]), (400, &json!("mode")), "{v}");
}
