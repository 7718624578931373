//! `stockade serve` with a program runtime whose policy has an egress list, against servers on
//! this host's loopback: a run reaches what the list names (its answer lists each connection), a
//! request narrows the list and what it left out is refused, a request that would widen it is a
//! 400 naming the entry, a live session's turns each report their own connections (its
//! interpreter's variables kept), and `/metrics` counts the refusals by reason.

mod common;
mod server;

use common::*;
use serde_json::json;
use server::*;

fn metric(s: &Server, name: &str) -> Option<f64> {
    let (_, text) = get_text(s, "/metrics");
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[test]
fn a_runtime_s_list_is_reached_narrowed_by_a_request_and_never_widened() {
    let Some(_) = python3() else {
        eprintln!("skip: no /usr/bin/python3");
        return;
    };
    let (a, b) = (Host::serving(b"from a\n".to_vec()), Host::serving(b"from b\n".to_vec()));
    let dir = tempfile::tempdir().expect("tmp");
    let wrap = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/examples/wrap-python.toml"),
    )
    .expect("wrap-python");
    let listed = |h: &Host| format!("127.0.0.1:{}", h.port);
    let net = format!("{wrap}\n[network]\negress-allow = [{:?}, {:?}]\n", listed(&a), listed(&b));
    std::fs::write(dir.path().join("net.toml"), net).expect("policy");
    let s = Server::start(
        "",
        &format!(
            "[policies]\ndir = \"{}\"\n[runtimes.py]\nprogram = \"/usr/bin/python3\"\nbootstrap = \"python\"\n\
             policy = \"net\"\nwarm = 1\n",
            dir.path().display()
        ),
        false,
    );
    s.wait_warm();
    let fetch = |h: &Host| format!("http://127.0.0.1:{}/", h.port);
    let code = format!(
        "import urllib.request\nfor url in [{:?}, {:?}]:\n    try:\n        print(urllib.request.urlopen(url).read().decode(), end='')\n\
         \x20   except Exception as e:\n        print('refused', e.code)\n",
        fetch(&a),
        fetch(&b)
    );
    // The runtime's whole list, in a warm jail.
    let r = post_run(&s.socket, &json!({"runtime": "py", "code": code}));
    let v = r.json();
    assert_eq!((r.status, v["stdout"]["text"].as_str()), (200, Some("from a\nfrom b\n")), "{v}");
    assert_eq!(v["egress"]["allowed"], 2, "{v}");
    assert_eq!(v["egress"]["connections"][1]["host"], "127.0.0.1", "{v}");
    // Narrowed to a: b is refused, and never contacted.
    let before = b.accepted();
    let r = post_run(&s.socket, &json!({"runtime": "py", "code": code, "egress-allow": [listed(&a)]}));
    let v = r.json();
    assert_eq!((r.status, v["stdout"]["text"].as_str()), (200, Some("from a\nrefused 403\n")), "{v}");
    assert_eq!(v["egress"]["connections"][1]["refused"], "not-listed", "{v}");
    assert_eq!(b.accepted(), before);
    // Widened: refused before anything runs, naming the entry.
    let r = post_run(&s.socket, &json!({"runtime": "py", "code": "1", "egress-allow": [listed(&a), "pypi.org:443"]}));
    let v = r.json();
    assert_eq!((r.status, v["error"]["field"].as_str()), (400, Some("egress-allow[1]")), "{v}");
    assert!(v["error"]["message"].as_str().is_some_and(|m| m.contains("may only narrow")), "{v}");
    // A live session's interpreter keeps its proxy between turns; each turn's answer has its own.
    let (st, sess) = json_call(&s, "POST", "/v1/sessions", &json!({"runtime": "py", "mode": "live"}));
    assert_eq!(st, 201, "{sess}");
    let id = sess["id"].as_str().expect("id");
    let turn = |code: String| json_call(&s, "POST", &format!("/v1/sessions/{id}/runs"), &json!({ "code": code }));
    let (st, v) = turn(format!(
        "import urllib.request\nseen = urllib.request.urlopen({:?}).read().decode()\nprint(seen, end='')",
        fetch(&a)
    ));
    assert_eq!(
        (st, v["stdout"]["text"].as_str(), v["egress"]["allowed"].as_u64()),
        (200, Some("from a\n"), Some(1)),
        "{v}"
    );
    let (st, v) = turn(format!("print(seen + urllib.request.urlopen({:?}).read().decode(), end='')", fetch(&b)));
    assert_eq!((st, v["stdout"]["text"].as_str()), (200, Some("from a\nfrom b\n")), "{v}");
    assert_eq!(v["session"]["interpreter"], "kept", "{v}");
    assert_eq!(
        (v["egress"]["allowed"].as_u64(), v["egress"]["connections"][0]["port"].as_u64()),
        (Some(1), Some(u64::from(b.port))),
        "{v}"
    );
    assert_eq!(metric(&s, "stockade_egress_refusals_total{reason=\"not-listed\"}"), Some(1.0));
    assert_eq!(metric(&s, "stockade_egress_connections_total"), Some(5.0));
}
