//! The hibernation rows of `cargo xtask bench` (`load --hibernate ROUNDS`): live Python sessions
//! holding little, 50 MiB and 1 GiB of Python objects, and live JavaScript sessions holding little
//! and 50 MiB, each round a kept turn, a hibernation, a resumed turn and (Python) a fork, spaced; then `--cycles N` hibernations and resumed turns of one session
//! with what the server holds before and after (fds, cgroups, mounts, the state directory's files
//! and bytes); then `--parked N` hibernated sessions and the server's RSS before and after.

use super::{Client, pct};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// One POST with a JSON body: its status, its JSON answer and how long it took.
async fn post(client: &mut Client, uri: &str, body: &Value) -> (u16, Value, Duration) {
    let (status, answer, took) = client.send("POST", uri, body.to_string().into_bytes()).await;
    (status, serde_json::from_slice(&answer).unwrap_or(Value::Null), took)
}

/// A live session of `runtime`, its first run `code`: its id and that run's answer.
async fn live(client: &mut Client, runtime: &str, code: &str) -> (String, Value) {
    let (status, made, _) = post(client, "/v1/sessions", &json!({"runtime": runtime, "mode": "live"})).await;
    assert_eq!(status, 201, "{made}");
    let id = made["id"].as_str().expect("id").to_string();
    let (status, ran, _) = post(client, &format!("/v1/sessions/{id}/runs"), &json!({"code": code})).await;
    assert_eq!((status, &ran["status"]), (200, &json!("ok")), "{ran}");
    (id, ran)
}

/// A turn of session `id` that must say `how` of its interpreter: how long it took, and the
/// resume's own time when it resumed.
async fn turn(client: &mut Client, id: &str, how: &str) -> (Duration, f64) {
    let (status, ran, took) = post(client, &format!("/v1/sessions/{id}/runs"), &json!({"code": "x += 1"})).await;
    assert_eq!((status, &ran["session"]["interpreter"]), (200, &json!(how)), "{ran}");
    (took, ran["session"]["resume-ms"].as_f64().unwrap_or(0.0))
}

fn median(mut t: Vec<Duration>) -> f64 {
    t.sort();
    pct(&t, 500)
}

fn median_f(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// The rows by size: `(label, runtime, code that fills it, rounds)`.
pub async fn sizes(socket: &str, rounds: usize, spaced: Duration, big: &str) {
    let mut client = Client::connect(socket).await;
    println!(
        "held            kept turn p50 ms   hibernate p50 ms (server's)   resume + turn p50 ms (resume)   / kept turn   fork p50 ms   fork / hibernate   image MiB   image / memory it touched"
    );
    // Each language's fresh interpreter is its baseline: its memory peak and its image.
    let mut base: [(f64, f64); 2] = [(0.0, 0.0); 2];
    for (i, (runtime, code)) in [("python", "x = 0"), ("javascript", "var x = 0")].into_iter().enumerate() {
        let (small, first) = live(&mut client, runtime, code).await;
        base[i].0 = first["memory-peak-bytes"].as_f64().unwrap_or(0.0);
        let _ = client.send("DELETE", &format!("/v1/sessions/{small}"), Vec::new()).await;
    }
    let rows = [
        ("a fresh one", "python", "x = 0", rounds, 0),
        ("50 MiB", "python", "x = 0\ndata = list(range(1_300_000))", rounds, 0),
        ("1 GiB", big, "x = 0\ndata = [bytes(1000) for _ in range(1_000_000)]", rounds.min(5), 0),
        ("js, fresh", "javascript", "var x = 0", rounds, 1),
        ("js, 50 MiB", "javascript", "var x = 0; var data = Array.from({ length: 3_200_000 }, (_, i) => i)", rounds, 1),
    ];
    for (label, runtime, fill, n, lang) in rows {
        let (base_peak, base_image) = base[lang];
        let (id, ran) = live(&mut client, runtime, fill).await;
        let peak = ran["memory-peak-bytes"].as_f64().unwrap_or(0.0);
        let mut t: [Vec<Duration>; 4] = Default::default();
        let (mut server_ms, mut resume_ms, mut image) = (Vec::new(), Vec::new(), 0.0);
        for _ in 0..n {
            tokio::time::sleep(spaced).await;
            t[0].push(turn(&mut client, &id, "kept").await.0);
            tokio::time::sleep(spaced).await;
            let (status, info, took) = post(&mut client, &format!("/v1/sessions/{id}/hibernate"), &Value::Null).await;
            assert_eq!((status, &info["state"]), (200, &json!("hibernated")), "{info}");
            t[1].push(took);
            server_ms.push(info["hibernate-ms"].as_f64().unwrap_or(0.0));
            image = info["image-bytes"].as_f64().unwrap_or(0.0);
            tokio::time::sleep(spaced).await;
            let (took, resumed) = turn(&mut client, &id, "resumed").await;
            t[2].push(took);
            resume_ms.push(resumed);
            if lang == 1 {
                // A JavaScript fork copies the workspace only: not a fork of its interpreter.
                continue;
            }
            tokio::time::sleep(spaced).await;
            let (status, fork, took) = post(&mut client, &format!("/v1/sessions/{id}/fork"), &Value::Null).await;
            assert_eq!(status, 201, "{fork}");
            t[3].push(took);
            let _ =
                client.send("DELETE", &format!("/v1/sessions/{}", fork["id"].as_str().unwrap_or("")), Vec::new()).await;
        }
        let _ = client.send("DELETE", &format!("/v1/sessions/{id}"), Vec::new()).await;
        let forks = !t[3].is_empty();
        let [kept, hib, resumed, fork] = t.map(median);
        // What its data added to the image, against what it added to the jail's memory (the
        // cgroup's peak in its filling run, against a fresh interpreter's).
        let touched = if base_image == 0.0 {
            base[lang].1 = image;
            "(the baseline)".to_string()
        } else {
            format!("{:.3}", (image - base_image) / (peak - base_peak).max(1.0))
        };
        let (fork, ratio) =
            if forks { (format!("{fork:.2}"), format!("{:.2}", fork / hib)) } else { ("-".into(), "-".into()) };
        println!(
            "{label:<15} {kept:>17.2} {hib:>17.2} ({:>7.2}) {resumed:>22.2} ({:>6.2}) {:>13.2} {fork:>13} {ratio:>18} {:>11.1}   {touched}",
            median_f(server_ms),
            median_f(resume_ms),
            resumed / kept,
            image / f64::from(1 << 20),
        );
    }
}

/// What server `pid` holds: open fds, cgroups of its jails, mounts in its namespace, and the
/// files and bytes of its state directory `state`.
fn holds(pid: u32, state: &Path) -> [u64; 5] {
    let count = |p: String| std::fs::read_dir(p).map_or(0, |d| d.count() as u64);
    let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).map_or(0, |m| m.lines().count() as u64);
    let mut cgroups = 0;
    walk_cgroups(Path::new("/sys/fs/cgroup"), &format!("stockade-{pid}-"), 0, &mut cgroups);
    let (mut files, mut bytes) = (0, 0);
    du(state, &mut std::collections::HashSet::new(), &mut files, &mut bytes);
    [count(format!("/proc/{pid}/fd")), cgroups, mounts, files, bytes]
}

fn walk_cgroups(dir: &Path, prefix: &str, depth: usize, n: &mut u64) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) && depth < 12 {
            *n += u64::from(e.file_name().to_string_lossy().starts_with(prefix));
            walk_cgroups(&p, prefix, depth + 1, n);
        }
    }
}

/// The files under `dir` and their bytes, each inode once (a fork's blobs are links).
fn du(dir: &Path, seen: &mut std::collections::HashSet<(u64, u64)>, files: &mut u64, bytes: &mut u64) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        match e.metadata() {
            Ok(m) if m.is_dir() => du(&e.path(), seen, files, bytes),
            Ok(m) if seen.insert((m.dev(), m.ino())) => {
                *files += 1;
                *bytes += m.len();
            }
            Ok(_) | Err(_) => {}
        }
    }
}

/// `cycles` hibernations and resumed turns of one session: what the server holds after against
/// before (after one cycle, so that both are of a hibernated session).
pub async fn cycles(socket: &str, pid: u32, state: &Path, cycles: usize) {
    let mut client = Client::connect(socket).await;
    let (id, _) = live(&mut client, "python", "x = 0\ndata = list(range(100_000))").await;
    let hibernate = format!("/v1/sessions/{id}/hibernate");
    let (mut hib, mut res) = (Vec::new(), Vec::new());
    let mut before = [0; 5];
    for i in 0..=cycles {
        let (status, _, took) = post(&mut client, &hibernate, &Value::Null).await;
        assert_eq!(status, 200);
        if i == 0 {
            // Settled: the jails it ended are gone, the warm pool full.
            tokio::time::sleep(Duration::from_millis(1500)).await;
            before = holds(pid, state);
        } else {
            hib.push(took);
        }
        if i < cycles {
            res.push(turn(&mut client, &id, "resumed").await.0);
        }
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = holds(pid, state);
    let _ = client.send("DELETE", &format!("/v1/sessions/{id}"), Vec::new()).await;
    println!(
        "{cycles} cycles: hibernate p50 {:.2} ms, resume + turn p50 {:.2} ms; the server held before / after: fds {} / {}, jail cgroups {} / {}, mounts {} / {}, state directory files {} / {}, bytes {} / {}",
        median(hib),
        median(res),
        before[0],
        after[0],
        before[1],
        after[1],
        before[2],
        after[2],
        before[3],
        after[3],
        before[4],
        after[4]
    );
}

/// `n` hibernated sessions (forks of one hibernated session: the same state each, made without
/// a jail apiece): the server's RSS before and after, and what each costs on disk.
pub async fn parked(socket: &str, pid: u32, state: &Path, n: usize) {
    let mut client = Client::connect(socket).await;
    let (id, _) = live(&mut client, "python", "x = 0").await;
    let (status, info, _) = post(&mut client, &format!("/v1/sessions/{id}/hibernate"), &Value::Null).await;
    assert_eq!(status, 200, "{info}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss = || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status.lines().find_map(|l| l.strip_prefix("VmRSS:")?.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
    };
    let (before, disk_before) = (rss().unwrap_or(0), holds(pid, state)[4]);
    let mut forks = Vec::with_capacity(n);
    for _ in 0..n {
        let (status, fork, _) = post(&mut client, &format!("/v1/sessions/{id}/fork"), &Value::Null).await;
        assert_eq!(status, 201, "{fork}");
        forks.push(fork["id"].as_str().unwrap_or("").to_string());
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = rss().unwrap_or(0);
    let disk_after = holds(pid, state)[4];
    let one = forks[forks.len() / 2].clone();
    let (took, _) = turn(&mut client, &one, "resumed").await;
    println!(
        "{n} hibernated sessions: the server's RSS {:.1} MiB before, {:.1} MiB after (+{:.1} MiB, {:.0} bytes each); on disk {:.0} bytes each (their images are hard links of one: each inode counted once); one of them resumed in {:.2} ms",
        before as f64 / 1024.0,
        after as f64 / 1024.0,
        after.saturating_sub(before) as f64 / 1024.0,
        after.saturating_sub(before) as f64 * 1024.0 / n as f64,
        disk_after.saturating_sub(disk_before) as f64 / n as f64,
        took.as_secs_f64() * 1000.0
    );
    for f in forks.iter().chain([&id]) {
        let _ = client.send("DELETE", &format!("/v1/sessions/{f}"), Vec::new()).await;
    }
}
