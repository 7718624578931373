//! The playground from outside, through the real server and a real HTTP client: served at `/`
//! only when asked for (`server.ui`, `--ui`), from the binary, with a strict Content-Security-
//! Policy and no inline script, style or other host; the page needs no token, the API it calls
//! still does; a configuration whose playground no browser could reach is refused naming
//! `server.ui`; `--ui` without a tokens file makes a token for that run only and prints the page's
//! address with it. The page in a real browser is tests/browser/ (Chromium, in `.ci/run`).
//! Needs the Wasm guests (skips without them, saying so).

mod common;
mod server;

use common::*;
use server::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

const PYTHON: &str = "[runtimes.python]\nguest = \"python\"\nwarm = 0\n";
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn get_tcp(s: &Server, path: &str, token: Option<&str>) -> Response {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    request(To::Tcp(s.tcp.expect("a TCP listener")), "GET", path, &headers, Vec::new())
}

#[test]
fn the_playground_is_served_only_when_asked_for_with_a_strict_csp() {
    if !guests() {
        return;
    }
    let off = Server::start("", PYTHON, true);
    let r = get_tcp(&off, "/", Some(TOKEN));
    assert_eq!((r.status, r.json()["error"]["code"].as_str()), (404, Some("not-found")), "no playground unless asked");
    assert_eq!(get_tcp(&off, "/ui/app.js", Some(TOKEN)).status, 404);
    drop(off);

    let s = Server::start("ui = true", PYTHON, true);
    let page = get_tcp(&s, "/", None);
    assert_eq!(page.status, 200, "the page needs no token");
    let header = |r: &Response, h: &str| r.headers.get(h).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    assert_eq!(header(&page, "content-type"), "text/html; charset=utf-8");
    assert_eq!(header(&page, "content-security-policy"), CSP);
    assert_eq!(header(&page, "x-frame-options"), "DENY");
    assert_eq!(header(&page, "x-content-type-options"), "nosniff");
    assert_eq!(header(&page, "referrer-policy"), "no-referrer");
    let html = String::from_utf8_lossy(&page.body);
    // Everything from the server itself: no inline script or style, no other host.
    assert_eq!(html.matches("<script").count(), html.matches("<script src=\"/ui/").count(), "{html}");
    assert!(!html.contains(" style=") && !html.contains("<style") && !html.contains("//"), "{html}");
    for (path, kind) in [("/ui/app.js", "text/javascript; charset=utf-8"), ("/ui/app.css", "text/css; charset=utf-8")] {
        let r = get_tcp(&s, path, None);
        assert_eq!((r.status, header(&r, "content-type")), (200, kind.to_string()), "{path}");
        assert_eq!(header(&r, "content-security-policy"), CSP, "{path}");
        let text = String::from_utf8_lossy(&r.body);
        assert!(!text.contains("http://") && !text.contains("https://"), "{path} names another host");
        assert!(!text.contains("innerHTML") && !text.contains("eval("), "{path} makes markup or code of text");
    }
    // The API the page calls still wants the token.
    assert_eq!(get_tcp(&s, "/v1/info", None).status, 401);
    assert_eq!(get_tcp(&s, "/v1/info", Some(TOKEN)).status, 200);
    let r = request(To::Tcp(s.tcp.unwrap()), "POST", "/", &[], Vec::new());
    assert_eq!(r.status, 405, "the page only reads");
}

#[test]
fn a_playground_no_browser_can_reach_is_refused_naming_server_ui() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("serve.toml");
    let socket = dir.path().join("api.sock");
    std::fs::write(&config, format!("version = 1\n[server]\nlisten = [\"unix:{}\"]\nui = true\n", socket.display()))
        .expect("config");
    let out = stockade().args(["serve", "--check"]).arg(&config).output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "accepted: {err}");
    assert!(err.contains("serve.toml:4:6: server.ui: the playground needs a tcp: listener"), "{err}");
    assert!(!socket.exists(), "nothing left behind");
    // `--ui` on the command line listens where a browser can, and says so.
    let out =
        stockade().args(["serve", "--check", "--ui", "--listen"]).arg(format!("unix:{}", socket.display())).output();
    let text = String::from_utf8_lossy(&out.expect("run").stdout).into_owned();
    assert!(text.contains(&format!("listen: unix:{}, tcp:127.0.0.1:8787", socket.display())), "{text}");
    assert!(text.contains("playground: at / of the TCP listeners"), "{text}");
    // With neither a configuration nor --listen, only there (the built-in socket is root's).
    let out = stockade().args(["serve", "--check", "--ui"]).output().expect("run");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("listen: tcp:127.0.0.1:8787\n"), "{text}");
}

/// A server this test started, killed when the test ends (a failing one too).
struct Started(std::process::Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn ui_without_a_tokens_file_makes_a_token_for_this_run_only() {
    if !guests() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("serve.toml");
    std::fs::write(&config, format!("version = 1\n{PYTHON}")).expect("config");
    let mut child = Started(
        Command::new(stockade_bin())
            .args(["serve", "--ui", "--listen", "tcp:127.0.0.1:0", "--state-dir"])
            .arg(dir.path().join("state"))
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn stockade serve"),
    );
    let stderr = child.0.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut said = Vec::new();
    let page = loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(l) if l.contains("the playground: ") => break l,
            Ok(l) => said.push(l),
            Err(_) => panic!("no playground address: {said:?}"),
        }
    };
    let url = page.split("the playground: ").nth(1).unwrap_or_default().to_string();
    let (address, token) =
        url.strip_prefix("http://").and_then(|u| u.split_once("/#token=")).unwrap_or_else(|| panic!("{page}"));
    assert!(token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
    let to = || To::Tcp(address.parse().expect("an address"));
    let info = |t: Option<&str>| {
        let auth = t.map(|t| format!("Bearer {t}"));
        let h: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
        request(to(), "GET", "/v1/info", &h, Vec::new()).status
    };
    assert_eq!((info(Some(token)), info(None), info(Some(&"0".repeat(32)))), (200, 401, 403));
    assert_eq!(request(to(), "GET", "/", &[], Vec::new()).status, 200);
    // Never written anywhere: not in the configuration, not in the state directory.
    drop(child);
    assert!(!std::fs::read_to_string(&config).expect("config").contains(token));
    let mut stack = vec![dir.path().join("state")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                assert!(!String::from_utf8_lossy(&bytes).contains(token), "{} holds the token", p.display());
            }
        }
    }
}
