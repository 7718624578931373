//! The memory rows of `cargo xtask bench`: what a warm Python jail of `stockade serve` holds while
//! it waits (the proportional set size of its processes: pages shared with the spawner or with
//! the other jails are counted by their share), and what one Python run takes (its report's
//! figures). Reading another uid's processes needs root: without it, the rows say so.

use std::path::Path;
use std::process::Command;

/// A process's comm, parent and proportional set size (kB; `None`: not readable).
struct Proc {
    pid: u32,
    comm: String,
    parent: u32,
    pss_kb: Option<u64>,
}

/// A jail: its init when that is not the runner itself, its program (the runner), and the
/// process above it when that is not the server (a helper of the spawner).
type Jail<'a> = (Option<&'a Proc>, &'a Proc, Option<&'a Proc>);

fn proc_of(pid: u32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, rest) = stat.rsplit_once(") ")?;
    let comm = head.split_once(" (")?.1.to_string();
    let parent = rest.split(' ').nth(1)?.parse().ok()?;
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let pss_kb = rollup
        .lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok());
    Some(Proc { pid, comm, parent, pss_kb })
}

/// Whether process `pid` holds the Python guest's artifact open (its runner).
fn runs_python(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd")).into_iter().flatten().flatten().any(|e| {
        std::fs::read_link(e.path()).is_ok_and(|l| {
            let l = l.to_string_lossy();
            l.contains("python314-") && l.ends_with(".cwasm")
        })
    })
}

fn mb(kb: u64) -> String {
    format!("{:.1} MB", kb as f64 / 1024.0)
}

/// Prints what each warm Python jail of the server `server` holds, by process, and the server's
/// and its spawner's own (`label` names the server).
pub fn warm_jails(server: u32, label: &str) {
    let all: Vec<Proc> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| proc_of(e.file_name().to_str()?.parse().ok()?))
        .collect();
    let by_pid = |pid: u32| all.iter().find(|p| p.pid == pid);
    let below = |p: &Proc| {
        let mut at = p.parent;
        for _ in 0..8 {
            if at == server {
                return true;
            }
            match by_pid(at) {
                Some(q) => at = q.parent,
                None => return false,
            }
        }
        false
    };
    // Each jail: its runner, the init above it (none when the runner is its jail's init: one a
    // helper built), and the process that supervises it (a helper of the spawner, or the server).
    // A runner holds the guest's artifact, and so do the spawner and its helpers (they loaded it):
    // a runner is one that is named so, or one an init of ours started (an exec'd runner).
    let under_init = |p: &Proc| by_pid(p.parent).is_some_and(|q| q.comm == "stockade-init");
    let jails: Vec<Jail<'_>> = all
        .iter()
        .filter(|p| below(p) && (p.comm == "stockade-runner" || under_init(p)) && runs_python(p.pid))
        .filter_map(|runner| {
            let above = by_pid(runner.parent)?;
            let (init, supervisor) =
                if above.comm == "stockade-init" { (Some(above), above.parent) } else { (None, above.pid) };
            Some((init, runner, by_pid(supervisor).filter(|h| h.pid != server)))
        })
        .collect();
    if jails.is_empty() {
        println!("{label}: no warm Python jail readable (reading another uid's processes needs root)");
        return;
    }
    let n = jails.len() as u64;
    let sum = |f: &dyn Fn(&Jail<'_>) -> Option<u64>| -> Option<u64> {
        jails.iter().map(f).sum::<Option<u64>>().map(|s| s / n)
    };
    let init = sum(&|j| j.0.map_or(Some(0), |i| i.pss_kb));
    let runner = sum(&|j| j.1.pss_kb);
    let helper = sum(&|j| j.2.map_or(Some(0), |h| h.pss_kb));
    let (Some(init), Some(runner), Some(helper)) = (init, runner, helper) else {
        println!("{label}: the jails' memory is not readable (it needs root)");
        return;
    };
    let spawner = all.iter().find(|p| p.parent == server && p.comm == "stockade").and_then(|p| p.pss_kb);
    let parts = if jails.iter().all(|j| j.0.is_none()) {
        format!("helper {}, runner {}: its jail's init", mb(helper), mb(runner))
    } else {
        format!("helper {}, init {}, runner {}", mb(helper), mb(init), mb(runner))
    };
    println!(
        "{label}: per warm Python jail (PSS, mean of {n}): {} ({parts}); the server {}{}",
        mb(helper + init + runner),
        by_pid(server).and_then(|p| p.pss_kb).map_or("?".into(), mb),
        spawner.map_or(String::new(), |s| format!(", its spawner {}", mb(s)))
    );
}

/// Prints what a Python `print(1)` run on `socket` takes, from its report: the median of 5 runs
/// (the first run of a server may be charged the page cache of what it is the first to read).
pub fn one_run(socket: &Path) {
    const RUNS: usize = 5;
    let keys = ["memory-peak-bytes", "wasm-memory-peak-bytes", "max-rss-bytes"];
    let mut figures: Vec<[Option<u64>; 3]> = Vec::new();
    for _ in 0..RUNS {
        let out = Command::new("curl")
            .args(["-sS", "--max-time", "60", "-X", "POST", "--unix-socket"])
            .arg(socket)
            .args([
                "-H",
                "content-type: application/json",
                "--data-binary",
                r#"{"runtime":"python","code":"print(1)"}"#,
            ])
            .arg("http://stockade/v1/runs")
            .output();
        let report: Option<serde_json::Value> = out.ok().and_then(|o| serde_json::from_slice(&o.stdout).ok());
        let Some(r) = report else {
            println!("per Python run: no report (curl)");
            return;
        };
        figures.push(keys.map(|k| r[k].as_u64()));
    }
    let first = figures[0][0].map_or("?".into(), |b| mb(b / 1024));
    let median = |i: usize| {
        let mut v: Vec<u64> = figures.iter().filter_map(|f| f[i]).collect();
        v.sort_unstable();
        v.get(v.len() / 2).map_or("?".into(), |b| mb(b / 1024))
    };
    println!(
        "per Python run (print(1), median of {RUNS}): the jail's cgroup memory peak {} (the first run's {}), the guest's linear memory {}, the runner's peak RSS {} (counting the code it shares with the spawner)",
        median(0),
        first,
        median(1),
        median(2)
    );
}
