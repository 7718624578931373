//! `stockade policy check|explain|lint|score|diff|schema` and `stockade doctor` (CLI side: the
//! library computes, this prints).
//!
//! Imports (layers): none.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use stockade::Policy;
use stockade::audit::{self, Change, explain, lint};
use stockade::doctor::{self, Verdict};
use stockade::policy::{DEFAULT_POLICY_NAME, DEFAULT_POLICY_TOML, locate_key};

/// A policy with its text (for positions); `builtin:default` names the embedded one.
fn load(path: &Path) -> Result<(Policy, String, String), String> {
    let name = path.display().to_string();
    let text = if name == DEFAULT_POLICY_NAME {
        DEFAULT_POLICY_TOML.to_string()
    } else {
        // A file that cannot be read is stockade's error; an invalid one is the check's finding.
        stockade::policy::read_file(path).map_err(|e| format!("stockade: {e}"))?
    };
    let policy = Policy::from_toml(&text, &name).map_err(|e| e.to_string())?;
    Ok((policy, text, name))
}

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

fn exit(ok: bool) -> ExitCode {
    if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

pub fn check(files: &[PathBuf]) -> ExitCode {
    let mut ok = true;
    for f in files {
        match load(f) {
            Ok((_, _, name)) => println!("{name}: ok"),
            Err(e) => {
                ok = false;
                eprintln!("{e}");
            }
        }
    }
    exit(ok)
}

pub fn explain(file: &Path, as_json: bool, no_host: bool) -> ExitCode {
    match load(file) {
        Ok((p, _, _)) => {
            let e = explain::explain(&p, !no_host);
            if as_json {
                println!("{}", json(&e));
            } else {
                print!("{}", e.to_text());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

#[derive(serde::Serialize)]
struct LintOut {
    file: String,
    warnings: Vec<LocatedWarning>,
}

#[derive(serde::Serialize)]
struct LocatedWarning {
    line: Option<usize>,
    column: Option<usize>,
    #[serde(flatten)]
    warning: lint::Warning,
}

pub fn lint(files: &[PathBuf], as_json: bool, strict: bool) -> ExitCode {
    let mut ok = true;
    let mut all = Vec::new();
    for f in files {
        let (p, text, name) = match load(f) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("{e}");
                ok = false;
                continue;
            }
        };
        let warnings: Vec<LocatedWarning> = lint::lint(&p)
            .into_iter()
            .map(|w| {
                let pos = locate_key(&text, &w.key);
                LocatedWarning { line: pos.map(|x| x.0), column: pos.map(|x| x.1), warning: w }
            })
            .collect();
        if strict && !warnings.is_empty() {
            ok = false;
        }
        if !as_json {
            for w in &warnings {
                let at = w.line.zip(w.column).map(|(l, c)| format!(":{l}:{c}")).unwrap_or_default();
                let x = &w.warning;
                println!("{name}{at}: warning {} {}: {}: {}\n    fix: {}", x.id, x.name, x.key, x.why, x.fix);
            }
            match warnings.len() {
                0 => println!("{name}: no warnings"),
                1 => println!("{name}: 1 warning"),
                n => println!("{name}: {n} warnings"),
            }
        }
        all.push(LintOut { file: name, warnings });
    }
    if as_json {
        println!("{}", json(&all));
    }
    exit(ok)
}

#[derive(serde::Serialize)]
#[serde(rename_all = "kebab-case")]
struct ScoreOut {
    file: String,
    #[serde(flatten)]
    score: audit::Score,
    threshold: Option<f64>,
    pass: bool,
}

pub fn score(files: &[PathBuf], threshold: Option<f64>, as_json: bool) -> ExitCode {
    let mut ok = true;
    let mut all = Vec::new();
    for f in files {
        let (p, _, name) = match load(f) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("{e}");
                ok = false;
                continue;
            }
        };
        let s = audit::score(&p);
        let pass = threshold.is_none_or(|t| s.score <= t);
        ok &= pass;
        if !as_json {
            let verdict = threshold
                .map_or(String::new(), |t| format!(" (threshold {t:.1}: {})", if pass { "ok" } else { "ABOVE" }));
            println!("{name}: {:.1} / 10{verdict}", s.score);
            for c in s.contributors.iter().take(5) {
                println!("  +{:.2}  {} = {}  ({})", c.points, c.key, c.value, c.title);
            }
            if s.contributors.len() > 5 {
                let rest: f64 = s.contributors[5..].iter().map(|c| c.points).sum();
                println!("  +{rest:.2}  {} more settings", s.contributors.len() - 5);
            }
        }
        all.push(ScoreOut { file: name, score: s, threshold, pass });
    }
    if as_json {
        println!("{}", json(&all));
    }
    exit(ok)
}

pub fn diff(a: &Path, b: &Path, as_json: bool, fail_on_loosen: bool) -> ExitCode {
    let (pa, pb) = match (load(a), load(b)) {
        (Ok(x), Ok(y)) => (x, y),
        (ra, rb) => {
            for e in [ra.err(), rb.err()].into_iter().flatten() {
                eprintln!("{e}");
            }
            return ExitCode::FAILURE;
        }
    };
    let d = audit::diff(&pa.0, &pb.0);
    let loosened = d.loosened().count();
    if as_json {
        #[derive(serde::Serialize)]
        struct Out<'a> {
            from: &'a str,
            to: &'a str,
            #[serde(flatten)]
            diff: &'a audit::Diff,
        }
        println!("{}", json(&Out { from: &pa.2, to: &pb.2, diff: &d }));
    } else {
        println!("{} -> {}", pa.2, pb.2);
        let mut unchanged = 0;
        for r in &d.rows {
            let word = match r.change {
                Change::Unchanged => {
                    unchanged += 1;
                    continue;
                }
                Change::Tightened => "tightened",
                Change::Loosened => "loosened ",
                Change::Changed => "changed  ",
            };
            println!("  {word}  {}: {} -> {}", r.key, r.from, r.to);
        }
        println!("  ({unchanged} settings unchanged)");
        println!("score {:.1} -> {:.1} ({:+.1})", d.score_from, d.score_to, d.score_delta);
    }
    exit(!(fail_on_loosen && loosened > 0))
}

pub fn doctor(policy: Option<&Path>, as_json: bool, guest_dir: Option<&Path>) -> ExitCode {
    let checks = doctor::host_checks(true, guest_dir);
    let host_ok = !checks.iter().any(|c| c.verdict == Verdict::Fail);
    let trial = policy.map(|path| {
        let name = path.display().to_string();
        let result = load(path).and_then(|(p, _, _)| {
            let exe = std::env::current_exe().map_err(|e| format!("cannot find stockade's own binary: {e}"))?;
            doctor::try_policy(&p, &exe).map_err(|e| e.to_string())
        });
        (name, result)
    });
    let runs = trial.as_ref().map(|(_, r)| r.as_ref().is_ok_and(doctor::runs_here));
    if as_json {
        #[derive(serde::Serialize)]
        struct PolicyOut<'a> {
            file: &'a str,
            runs: bool,
            #[serde(skip_serializing_if = "Option::is_none")]
            error: Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            enforcement: Option<&'a [stockade::LayerReport]>,
        }
        #[derive(serde::Serialize)]
        struct Out<'a> {
            checks: &'a [doctor::Check],
            #[serde(skip_serializing_if = "Option::is_none")]
            policy: Option<PolicyOut<'a>>,
        }
        let policy = trial.as_ref().map(|(file, r)| PolicyOut {
            file,
            runs: runs.unwrap_or(false),
            error: match r {
                Ok(rep) => rep.error.clone(),
                Err(e) => Some(e.clone()),
            },
            enforcement: r.as_ref().ok().map(|rep| rep.enforcement.as_slice()),
        });
        println!("{}", json(&Out { checks: &checks, policy }));
    } else {
        for c in &checks {
            let v = match c.verdict {
                Verdict::Ok => "ok  ",
                Verdict::Warn => "warn",
                Verdict::Fail => "FAIL",
            };
            println!("{v}  {:<11} {}", c.name, c.detail);
            if let Some(fix) = &c.fix {
                println!("      {:<11} fix: {fix}", "");
            }
        }
        if let Some((name, r)) = &trial {
            println!();
            match r {
                Ok(rep) if doctor::runs_here(rep) => println!("policy {name}: runs here; each layer:"),
                Ok(rep) => println!(
                    "policy {name}: does NOT run here: {}",
                    rep.error.clone().unwrap_or_else(|| format!("status {:?}", rep.status))
                ),
                Err(e) => println!("policy {name}: does NOT run here: {e}"),
            }
            if let Ok(rep) = r {
                for l in &rep.enforcement {
                    let why = l.reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default();
                    let status = serde_json::to_string(&l.status).unwrap_or_default().replace('"', "");
                    println!("  {status:<13} {:<18} {}{why}", l.layer, l.applied);
                }
            }
        }
    }
    exit(runs.unwrap_or(host_ok))
}

/// `stockade policy example [NAME]`: a shipped example policy, or the list of them.
pub fn example(name: Option<&str>) -> ExitCode {
    let examples = stockade::policy::EXAMPLES;
    let Some(name) = name else {
        for (n, what, _) in examples {
            println!("{n:<12} {what}");
        }
        return ExitCode::SUCCESS;
    };
    match examples.iter().find(|(n, _, _)| *n == name) {
        Some((_, _, text)) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        None => {
            let names: Vec<&str> = examples.iter().map(|(n, _, _)| *n).collect();
            eprintln!("stockade: policy example: no example {name:?} (there are: {})", names.join(", "));
            ExitCode::from(2)
        }
    }
}
