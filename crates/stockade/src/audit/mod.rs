//! Policies for reviewers: an exposure score, a semantic diff, lint warnings and a plain-words
//! explanation, all computed from a validated [`Policy`] without running anything.
//!
//! Every setting a review cares about is one row of [`SETTINGS`]: the key it reads, a weight,
//! its exposure (0.0 = the tightest value, 1.0 = the wall is off) and its value in words. The
//! score is the weighted mean of the exposures on a 0-10 scale; the diff compares the same rows.
//! `docs/policy-score.md` lists the rows and their weights (a test checks it matches).
//!
//! Imports (layers): `host`, `layers`, `policy`, `sys`.

pub mod explain;
pub mod lint;
mod settings;

pub use settings::SETTINGS;
pub(crate) use settings::{bytes, opt_bytes, under};

use crate::policy::Policy;
use serde::Serialize;

/// One reviewed setting.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// The policy key(s) it reads, e.g. `namespaces.net`.
    pub key: &'static str,
    /// What it is, in words.
    pub title: &'static str,
    /// Its share of the score (0: shown in diffs, not scored).
    pub weight: f64,
    /// 0.0 (tightest) to 1.0 (wall off); never decreases as the setting loosens.
    pub exposure: fn(&Policy) -> f64,
    /// The setting's value, in words.
    pub value: fn(&Policy) -> String,
}

/// Directories that hold the system: writable grants there are the worst kind.
pub const SYSTEM_DIRS: &[&str] = &[
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/root", "/sbin", "/srv", "/sys",
    "/usr", "/var",
];

/// Host directories with users' or services' data: granting them even read-only exposes it.
pub const DATA_DIRS: &[&str] = &["/home", "/root", "/srv", "/var", "/mnt", "/media", "/run"];

/// Host files with credentials or host identity (a read-only grant of `/etc` itself counts as
/// all of them).
pub const SECRET_FILES: &[&str] = &[
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/sudoers",
    "/etc/machine-id",
    "/etc/krb5.keytab",
];

/// Environment names that look like they carry secrets.
pub fn looks_secret(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    ["TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "API_KEY", "APIKEY", "PRIVATE", "AUTH", "SESSION", "COOKIE"]
        .iter()
        .any(|s| n.contains(s))
        || n.starts_with("AWS_")
        || n.starts_with("GOOGLE_APPLICATION")
        || n.starts_with("AZURE_")
        || n.ends_with("_KEY")
        || n == "SSH_AUTH_SOCK"
        || n == "KUBECONFIG"
}

/// One setting's part in a score.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Contribution {
    pub key: &'static str,
    pub title: &'static str,
    pub value: String,
    pub weight: f64,
    pub exposure: f64,
    /// This setting's share of the 0-10 score.
    pub points: f64,
}

/// A policy's exposure score.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Score {
    /// 0.0 (tightest) to 10.0 (every wall off), rounded to one decimal.
    pub score: f64,
    /// Settings that add to the score, largest first.
    pub contributors: Vec<Contribution>,
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn total_weight() -> f64 {
    SETTINGS.iter().map(|s| s.weight).sum()
}

/// Scores a policy.
pub fn score(p: &Policy) -> Score {
    let total = total_weight();
    let mut contributors: Vec<Contribution> = SETTINGS
        .iter()
        .map(|s| {
            let exposure = (s.exposure)(p);
            Contribution {
                key: s.key,
                title: s.title,
                value: (s.value)(p),
                weight: s.weight,
                exposure: (exposure * 100.0).round() / 100.0,
                points: 10.0 * s.weight * exposure / total,
            }
        })
        .filter(|c| c.points > 0.0)
        .collect();
    let raw: f64 = contributors.iter().map(|c| c.points).sum();
    contributors.sort_by(|a, b| b.points.total_cmp(&a.points));
    for c in &mut contributors {
        c.points = (c.points * 100.0).round() / 100.0;
    }
    Score { score: round1(raw), contributors }
}

/// How one setting changed between two policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    Tightened,
    Loosened,
    /// Different, neither tighter nor looser (e.g. the hostname).
    Changed,
    Unchanged,
}

/// One row of a diff.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct DiffRow {
    pub key: &'static str,
    pub title: &'static str,
    pub change: Change,
    pub from: String,
    pub to: String,
}

/// A semantic diff of two policies.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Diff {
    pub rows: Vec<DiffRow>,
    pub score_from: f64,
    pub score_to: f64,
    pub score_delta: f64,
}

impl Diff {
    pub fn loosened(&self) -> impl Iterator<Item = &DiffRow> {
        self.rows.iter().filter(|r| r.change == Change::Loosened)
    }
}

/// Compares every setting of `a` with `b`.
pub fn diff(a: &Policy, b: &Policy) -> Diff {
    let rows = SETTINGS
        .iter()
        .map(|s| {
            let (from, to) = ((s.value)(a), (s.value)(b));
            let (ea, eb) = ((s.exposure)(a), (s.exposure)(b));
            let change = if from == to {
                Change::Unchanged
            } else if eb < ea {
                Change::Tightened
            } else if eb > ea {
                Change::Loosened
            } else {
                Change::Changed
            };
            DiffRow { key: s.key, title: s.title, change, from, to }
        })
        .collect();
    let (sa, sb) = (score(a).score, score(b).score);
    Diff { rows, score_from: sa, score_to: sb, score_delta: round1(sb - sa) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Limit, ProcMode, RlimitKey, StdinMode, SyscallGroup};
    use settings::{log_scale, rlimit};

    fn shipped() -> Vec<Policy> {
        let files = [
            ("default", include_str!("../../../../policies/default.toml")),
            ("wide-open", include_str!("../../../../policies/examples/wide-open.toml")),
            ("wrap-python", include_str!("../../../../policies/examples/wrap-python.toml")),
            ("wrap-node", include_str!("../../../../policies/examples/wrap-node.toml")),
        ];
        files.iter().map(|(n, t)| Policy::from_toml(t, n).expect(n)).collect()
    }

    /// Policies between the shipped ones: wide-open with one section at a time taken from the
    /// default, so every setting is seen both tight and loose next to the others.
    fn bases() -> Vec<Policy> {
        let all = shipped();
        let (tight, open) = (&all[0], &all[1]);
        let mut out = all.clone();
        let mixes: [fn(&mut Policy, &Policy); 7] = [
            |p, t| p.namespaces = t.namespaces,
            |p, t| p.seccomp = t.seccomp.clone(),
            |p, t| p.cgroups = t.cgroups.clone(),
            |p, t| p.filesystem = t.filesystem.clone(),
            |p, t| p.rlimits = t.rlimits.clone(),
            |p, t| (p.env_pass, p.stdin) = (t.env_pass.clone(), t.stdin),
            |p, t| (p.landlock, p.wall_timeout, p.wasm) = (t.landlock, t.wall_timeout, t.wasm.clone()),
        ];
        for mix in mixes {
            let mut p = open.clone();
            mix(&mut p, tight);
            out.push(p);
            let mut p = tight.clone();
            mix(&mut p, open);
            out.push(p);
        }
        // The default with an egress list of every kind of entry.
        let mut egress = tight.clone();
        for e in ["pypi.org:443", "*.pythonhosted.org:443", "127.0.0.1:8080", "1.1.1.1:53"] {
            egress.add_egress(e, "test").expect("egress");
        }
        out.push(egress);
        out
    }

    /// Every way to tighten one setting a little.
    fn tightenings(p: &Policy) -> Vec<(String, Policy)> {
        let mut out = Vec::new();
        let mut add = |what: String, f: &dyn Fn(&mut Policy)| {
            let mut q = p.clone();
            f(&mut q);
            out.push((what, q));
        };
        for i in 0..p.network.egress_allow.len() {
            add(format!("egress entry {i} removed"), &|q| {
                q.network.egress_allow.remove(i);
            });
        }
        for i in 0..7 {
            add(format!("namespace {i} on"), &|q| {
                let n = &mut q.namespaces;
                *[&mut n.user, &mut n.pid, &mut n.mount, &mut n.net, &mut n.ipc, &mut n.uts, &mut n.cgroup][i] = true;
            });
        }
        for g in &p.seccomp.allow {
            add(format!("deny {}", g.name()), &|q| q.seccomp.allow.retain(|x| x != g));
        }
        for g in SyscallGroup::ALL {
            add(format!("kill {}", g.name()), &|q| {
                if !q.seccomp.allow.contains(&g) && !q.seccomp.kill.contains(&g) {
                    q.seccomp.kill.push(g);
                }
            });
        }
        add("seccomp required".into(), &|q| q.seccomp.required = true);
        add("landlock required".into(), &|q| q.landlock.required = true);
        add("landlock abi + 1".into(), &|q| q.landlock.min_abi = (q.landlock.min_abi + 1).min(6));
        add("host ids nobody".into(), &|q| (q.identity.host_uid, q.identity.host_gid) = (65534, 65534));
        for i in 0..p.filesystem.grants.len() {
            add(format!("drop grant {i}"), &|q| {
                q.filesystem.grants.remove(i);
            });
            add(format!("grant {i} read-only"), &|q| q.filesystem.grants[i].writable = false);
        }
        add("no writable exec".into(), &|q| q.filesystem.writable_exec = false);
        add("proc narrower".into(), &|q| {
            q.filesystem.proc = match q.filesystem.proc {
                ProcMode::Full => ProcMode::PidOnly,
                _ => ProcMode::None,
            }
        });
        add("tmp halved".into(), &|q| q.filesystem.tmp_size_bytes = q.filesystem.tmp_size_bytes.map(|t| t / 2));
        add("no tmp".into(), &|q| q.filesystem.tmp_size_bytes = None);
        add("shm halved".into(), &|q| q.filesystem.shm_size_bytes = q.filesystem.shm_size_bytes.map(|t| t / 2));
        add("quota halved".into(), &|q| {
            q.filesystem.writable_max_bytes = (q.filesystem.writable_max_bytes / 2).max(4096)
        });
        add("files halved".into(), &|q| q.filesystem.writable_max_files = (q.filesystem.writable_max_files / 2).max(2));
        add("owner uids on".into(), &|q| q.identity.owner_uids = Some((0x7f00_0000, 65536)));
        add("no dev".into(), &|q| q.filesystem.dev = false);
        add("timeout halved".into(), &|q| {
            q.wall_timeout = (q.wall_timeout / 2).max(std::time::Duration::from_millis(1))
        });
        add("cgroups on".into(), &|q| q.cgroups.enabled = true);
        add("cgroups required".into(), &|q| q.cgroups.best_effort = false);
        add("memory halved or set".into(), &|q| {
            q.cgroups.memory_max_bytes = Some(q.cgroups.memory_max_bytes.map_or(64 << 30, |m| (m / 2).max(1 << 20)))
        });
        add("pids halved or set".into(), &|q| {
            q.cgroups.pids_max = Some(q.cgroups.pids_max.map_or(4096, |n| (n / 2).max(1)))
        });
        add("cpu halved or set".into(), &|q| {
            q.cgroups.cpu_max_us =
                Some(q.cgroups.cpu_max_us.map_or((1_600_000, 100_000), |(c, per)| ((c / 2).max(1000), per)))
        });
        for key in
            [RlimitKey::CoreBytes, RlimitKey::MaxOpenFiles, RlimitKey::FileSizeBytes, RlimitKey::AddressSpaceBytes]
        {
            add(format!("rlimit {} tighter", key.key()), &|q| {
                let next = match rlimit(q, key) {
                    Some(Limit::Value(v)) => v / 2,
                    _ => 1 << 40,
                };
                q.rlimits.retain(|(k, _)| *k != key);
                q.rlimits.push((key, Limit::Value(next)));
            });
        }
        add("stdout cap".into(), &|q| q.stdout_max_bytes = Some(q.stdout_max_bytes.map_or(1 << 30, |b| b / 2)));
        add("stderr cap".into(), &|q| q.stderr_max_bytes = Some(q.stderr_max_bytes.map_or(1 << 30, |b| b / 2)));
        for i in 0..p.env_pass.len() {
            add(format!("stop passing env {i}"), &|q| {
                q.env_pass.remove(i);
            });
        }
        add("stdin null".into(), &|q| q.stdin = StdinMode::Null);
        add("wasm memory halved".into(), &|q| q.wasm.memory_max_bytes = (q.wasm.memory_max_bytes / 2).max(65536));
        add("wasm fuel".into(), &|q| q.wasm.fuel = Some(q.wasm.fuel.map_or(1 << 40, |f| (f / 2).max(1))));
        out
    }

    /// Tightening any one setting never raises any setting's exposure, hence never the score.
    #[test]
    fn tightening_never_raises_the_score() {
        for base in bases() {
            let before = score(&base);
            for (what, q) in tightenings(&base) {
                for s in SETTINGS {
                    let (a, b) = ((s.exposure)(&base), (s.exposure)(&q));
                    assert!(b <= a + 1e-12, "{}: {what} raised {} from {a} to {b}", base.origin, s.key);
                }
                assert!(score(&q).score <= before.score, "{}: {what}", base.origin);
            }
        }
    }

    #[test]
    fn wide_open_scores_ten_and_default_at_most_one() {
        let all = shipped();
        assert!(score(&all[0]).score <= 1.0);
        assert_eq!(score(&all[1]).score, 10.0, "{:?}", score(&all[1]));
        // Every scored setting is fully open in wide-open.toml.
        for s in SETTINGS.iter().filter(|s| s.weight > 0.0) {
            assert_eq!((s.exposure)(&all[1]), 1.0, "{}", s.key);
        }
    }

    #[test]
    fn diff_is_symmetric() {
        let all = bases();
        for a in &all {
            for b in &all {
                let (ab, ba) = (diff(a, b), diff(b, a));
                assert_eq!(ab.score_delta, -ba.score_delta);
                for (x, y) in ab.rows.iter().zip(&ba.rows) {
                    let mirrored = match x.change {
                        Change::Tightened => Change::Loosened,
                        Change::Loosened => Change::Tightened,
                        other => other,
                    };
                    assert_eq!((x.key, mirrored, &x.from, &x.to), (y.key, y.change, &y.to, &y.from));
                }
            }
        }
    }

    #[test]
    fn a_policy_diffed_with_itself_is_unchanged() {
        for p in bases() {
            assert!(diff(&p, &p).rows.iter().all(|r| r.change == Change::Unchanged));
        }
    }

    #[test]
    fn docs_list_every_setting_with_its_weight() {
        let doc = include_str!("../../../../docs/policy-score.md");
        for s in SETTINGS {
            let row = format!("| `{}` | {} |", s.key, s.weight);
            assert!(doc.contains(&row), "docs/policy-score.md lacks the row {row}");
        }
    }

    #[test]
    fn the_default_policy_scores_at_most_one() {
        let s = score(&Policy::builtin());
        assert!(s.score <= 1.0, "{s:?}");
    }

    #[test]
    fn log_scale_is_monotone_and_clamped() {
        let mut last = 0.0;
        for t in [1.0, 10.0, 100.0, 1000.0, 1e4, 1e5, 1e9] {
            let e = log_scale(t, 10.0, 1e5);
            assert!(e >= last && (0.0..=1.0).contains(&e));
            last = e;
        }
        assert_eq!(log_scale(1e5, 10.0, 1e5), 1.0);
    }

    #[test]
    fn secret_looking_names() {
        for n in ["GITHUB_TOKEN", "AWS_ACCESS_KEY_ID", "DB_PASSWORD", "OPENAI_API_KEY", "SSH_AUTH_SOCK"] {
            assert!(looks_secret(n), "{n}");
        }
        for n in ["PATH", "LANG", "TERM", "TZ", "HOME"] {
            assert!(!looks_secret(n), "{n}");
        }
    }
}
