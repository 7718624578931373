//! `stockade policy check|lint|score|diff|explain|schema` on good and bad policies, compared
//! with golden files: the exact text, JSON and exit status a user (or a CI job) sees.
//!
//! After an intended change of output: `STOCKADE_BLESS=1 cargo test --test policy_tools`, then
//! review the diff of `tests/golden/*.out`.

mod common;

use common::*;
use std::path::Path;

const SHIPPED: [&str; 5] = [
    "policies/default.toml",
    "policies/examples/wrap-python.toml",
    "policies/examples/wrap-node.toml",
    "policies/examples/wide-open.toml",
    "policies/examples/python-allowlist.toml",
];

/// (golden name, arguments after `stockade`).
fn cases() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut c: Vec<(&str, Vec<&str>)> = vec![
        ("check-bad-types", vec!["policy", "check", "tests/golden/bad-types.toml"]),
        ("check-bad-unknown-key", vec!["policy", "check", "tests/golden/bad-unknown-key.toml"]),
        ("check-bad-values", vec!["policy", "check", "tests/golden/bad-values.toml"]),
        ("check-bad-contradictions", vec!["policy", "check", "tests/golden/bad-contradictions.toml"]),
        ("check-bad-version", vec!["policy", "check", "tests/golden/bad-version.toml"]),
        ("lint-weak", vec!["policy", "lint", "tests/golden/weak.toml"]),
        ("lint-weak-strict-json", vec!["policy", "lint", "--strict", "--json", "tests/golden/weak.toml"]),
        ("score-weak", vec!["policy", "score", "tests/golden/weak.toml"]),
        ("score-default-json", vec!["policy", "score", "--json", "policies/default.toml"]),
        ("score-threshold-pass", vec!["policy", "score", "--threshold", "1.0", "policies/default.toml"]),
        ("score-threshold-fail", vec!["policy", "score", "--threshold", "1.0", "policies/examples/wide-open.toml"]),
        (
            "diff-default-wrap-python",
            vec!["policy", "diff", "policies/default.toml", "policies/examples/wrap-python.toml"],
        ),
        (
            "diff-default-wide-open-fail",
            vec!["policy", "diff", "--fail-on-loosen", "policies/default.toml", "policies/examples/wide-open.toml"],
        ),
        (
            "diff-wide-open-default-json",
            vec![
                "policy",
                "diff",
                "--json",
                "--fail-on-loosen",
                "policies/examples/wide-open.toml",
                "policies/default.toml",
            ],
        ),
        ("diff-builtin-default", vec!["policy", "diff", "builtin:default", "policies/default.toml"]),
        ("explain-default", vec!["policy", "explain", "--no-host", "policies/default.toml"]),
        ("explain-wide-open", vec!["policy", "explain", "--no-host", "policies/examples/wide-open.toml"]),
        ("lint-bad-is-an-error", vec!["policy", "lint", "tests/golden/bad-values.toml"]),
    ];
    let mut check = vec!["policy", "check"];
    check.extend(SHIPPED);
    c.push(("check-shipped", check));
    let mut lint = vec!["policy", "lint"];
    lint.extend(SHIPPED);
    c.push(("lint-shipped", lint));
    let mut score = vec!["policy", "score"];
    score.extend(SHIPPED);
    c.push(("score-shipped", score));
    c
}

fn render(out: &std::process::Output) -> String {
    format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        out.status.code().map_or("signal".into(), |c| c.to_string()),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn outputs_match_the_golden_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bless = std::env::var_os("STOCKADE_BLESS").is_some();
    let mut failed = Vec::new();
    for (name, args) in cases() {
        let out = stockade().current_dir(root).args(&args).output().expect("run stockade");
        let got = render(&out);
        let file = root.join("tests/golden").join(format!("{name}.out"));
        if bless {
            std::fs::write(&file, &got).expect("bless");
            continue;
        }
        let want = std::fs::read_to_string(&file).unwrap_or_default();
        if got != want {
            failed.push(format!(
                "== {name} (stockade {}):\n{got}\n== expected ({}):\n{want}",
                args.join(" "),
                file.display()
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn the_schema_names_every_key_and_refuses_unknown_ones() {
    let out = stockade().args(["policy", "schema"]).output().expect("schema");
    assert!(out.status.success());
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(schema["required"], serde_json::json!(["version"]));
    assert_eq!(schema["additionalProperties"], serde_json::json!(false));
    let defs = &schema["$defs"];
    // Every key of the shipped default (which spells out every key) is in the schema.
    let shipped: toml::Table =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/default.toml"))
            .expect("read")
            .parse()
            .expect("toml");
    for (section, value) in &shipped {
        let Some(table) = value.as_table() else { continue };
        let reference = schema["properties"][section]["$ref"].as_str().unwrap_or_else(|| panic!("{section}"));
        let def = &defs[reference.trim_start_matches("#/$defs/")];
        for key in table.keys() {
            let found = !def["properties"][key].is_null();
            assert!(found, "schema lacks {section}.{key}");
        }
        assert_eq!(def["additionalProperties"], serde_json::json!(false), "{section}");
    }
}

#[test]
fn every_command_has_help_with_examples_and_completions_and_man_pages_generate() {
    let help = |args: &[&str]| {
        let out = stockade().args(args).arg("--help").output().expect("help");
        assert!(out.status.success(), "{args:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for cmd in [
        &["run"][..],
        &["doctor"],
        &["completions"],
        &["policy", "check"],
        &["policy", "explain"],
        &["policy", "lint"],
        &["policy", "score"],
        &["policy", "diff"],
        &["policy", "schema"],
        &["policy", "default"],
        &["guest", "install"],
        &["guest", "list"],
        &["guest", "verify"],
    ] {
        assert!(help(cmd).contains("Example"), "stockade {} --help has no example", cmd.join(" "));
    }
    // Every lint rule is named in `policy lint --help`.
    let lint_help = help(&["policy", "lint"]);
    for (id, name, _) in stockade::audit::lint::RULES {
        assert!(lint_help.contains(&format!("{id} {name}")), "{id} {name} missing from lint --help");
    }
    let out = stockade().args(["completions", "bash"]).output().expect("completions");
    assert!(String::from_utf8_lossy(&out.stdout).contains("policy"));
    let dir = tempfile::tempdir().expect("tmp");
    let out = stockade().arg("__man").arg(dir.path()).output().expect("man");
    assert!(out.status.success());
    for page in ["stockade.1", "stockade-run.1", "stockade-policy-score.1", "stockade-doctor.1"] {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap_or_else(|_| panic!("{page}"));
        assert!(text.contains(".TH"), "{page}");
    }
}
