//! `stockade serve`'s spawner (issue 25): the warm jails built by its helpers outside the
//! server's address space, seen from outside (the process tree, `/v1/info`, the cgroups), and
//! what the server does when the spawner is killed under it. Needs the Wasm guests (skips
//! without them, saying so).

mod common;
mod server;

use common::*;
use serde_json::json;
use server::*;
use std::time::Duration;

/// The warm jails are built outside the server's address space: by default each one's init is
/// the child of a helper process, itself a child of the server's spawner (one process, the
/// server's only child, forked while the server had one thread), a Wasm jail's init runs its
/// guest itself, and the runs work as before; with `spawner = false` each init is the server's
/// own child.
#[test]
fn warm_jails_are_built_by_helpers_of_a_spawner() {
    if !guests() {
        return;
    }
    let field = |pid: i32, key: &str| -> Option<i32> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with(key))?;
        line[key.len()..].trim().split(' ').next()?.parse().ok()
    };
    // A jail's init is PID 1 of its namespace (the last of its `NSpid:`).
    let inits = |pid: u32| -> Vec<i32> {
        let init = |p: &i32| {
            let status = std::fs::read_to_string(format!("/proc/{p}/status")).unwrap_or_default();
            let nspid = status.lines().find_map(|l| l.strip_prefix("NSpid:")).unwrap_or_default();
            let ids: Vec<&str> = nspid.split_whitespace().collect();
            ids.len() > 1 && ids.last() == Some(&"1")
        };
        descendants_of(pid).into_iter().filter(init).collect()
    };
    let comm = |p: &i32| std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default().trim().to_string();
    let js = "[runtimes.javascript]\nguest = \"javascript\"\nwarm = 2\n";
    let s = Server::start("", js, false);
    s.wait_warm();
    let spawner = children_of(s.pid());
    assert_eq!(spawner.len(), 1, "the server's children: {spawner:?}");
    let waiting = inits(s.pid());
    assert_eq!(waiting.len(), 2, "{waiting:?}");
    for init in &waiting {
        let helper = field(*init, "PPid:").expect("init's parent");
        assert_eq!(field(helper, "PPid:"), Some(spawner[0]), "init {init}'s helper {helper}");
        assert!(field(helper, "Threads:").is_some_and(|n| n <= 2), "helper {helper} is small and alone");
        // A Wasm jail built by a helper is one process: its init runs the guest (no copy for an
        // init of ours, which would only wait for it), and nothing else is in its namespace.
        assert_eq!(comm(init), "stockade-runner", "init {init}");
        assert!(children_of(*init as u32).is_empty(), "init {init}'s children: {:?}", children_of(*init as u32));
    }
    assert_eq!(field(spawner[0], "Threads:"), Some(1), "the spawner has one thread");
    assert_eq!(get(&s.socket, "/v1/info").1["jails-built-by"], "spawner");
    for _ in 0..3 {
        let v = post_run(&s.socket, &json!({"runtime": "javascript", "code": "console.log(6 * 7)"})).json();
        assert_eq!((v["status"].as_str(), v["stdout"]["text"].as_str()), (Some("ok"), Some("42\n")), "{v}");
    }
    // The helpers of the runs are gone, reaped by the spawner (no zombie is left).
    s.wait_warm();
    let zombie = |p: &i32| std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|st| st.contains(") Z "));
    assert!(
        wait_for(Duration::from_secs(5), || !children_of(spawner[0] as u32).iter().any(zombie)),
        "the spawner left zombies: {:?}",
        children_of(spawner[0] as u32)
    );
    assert_eq!(inits(s.pid()).len(), 2, "two warm jails again");
    drop(s);

    let s = Server::start("spawner = false", js, false);
    s.wait_warm();
    // The pool's count and the process tree are read apart (a clean CI run once saw one init):
    // wait, bounded, until they agree; the log says whether a warm jail died meanwhile.
    assert!(wait_for(Duration::from_secs(5), || inits(s.pid()).len() == 2), "{:?}\n{}", inits(s.pid()), s.log());
    let waiting = inits(s.pid());
    assert_eq!(waiting.len(), 2, "{waiting:?}");
    assert!(waiting.iter().all(|i| field(*i, "PPid:").map(i32::cast_unsigned) == Some(s.pid())), "{waiting:?}");
    assert_eq!(get(&s.socket, "/v1/info").1["jails-built-by"], "threads");
    let v = post_run(&s.socket, &json!({"runtime": "javascript", "code": "console.log(6 * 7)"})).json();
    assert_eq!(v["stdout"]["text"].as_str(), Some("42\n"), "{v}");
}

/// The spawner killed under a running server (by an operator, the OOM killer): the jails its
/// helpers already hold still serve their runs (a helper lives as long as the server's end of its
/// socket, not the spawner), the next jails are built on the server's own threads, which the
/// server says (its log, `/v1/info`); the helpers' cgroups and processes are all gone after.
#[test]
fn a_killed_spawner_leaves_the_server_serving_on_its_threads() {
    if !guests() {
        return;
    }
    let js = "[runtimes.javascript]\nguest = \"javascript\"\nwarm = 2\n";
    let mut s = Server::start("", js, false);
    s.wait_warm();
    assert_eq!(get(&s.socket, "/v1/info").1["jails-built-by"], "spawner");
    let spawner = children_of(s.pid());
    assert_eq!(spawner.len(), 1, "{spawner:?}");
    let helpers = children_of(spawner[0] as u32);
    assert_eq!(helpers.len(), 2, "{helpers:?}");
    let of_helpers = |s: &Server| -> Vec<std::path::PathBuf> {
        let helper_made = |p: &std::path::PathBuf| p.file_name().is_some_and(|n| n.to_string_lossy().contains("-h"));
        cgroups_of(s.pid()).into_iter().filter(helper_made).collect()
    };
    assert!(!of_helpers(&s).is_empty() || !is_root(), "the helpers' jails have cgroups");
    // SAFETY: kill(2) with a pid this test read as its server's child; no memory is touched.
    assert_eq!(unsafe { libc::kill(spawner[0], libc::SIGKILL) }, 0);
    assert!(
        wait_for(Duration::from_secs(5), || get(&s.socket, "/v1/info").1["jails-built-by"] == "threads"),
        "the server did not see its spawner end"
    );
    // The two waiting jails serve; the pool then builds on the server's threads.
    for _ in 0..3 {
        let v = post_run(&s.socket, &json!({"runtime": "javascript", "code": "console.log(6 * 7)"})).json();
        assert_eq!((v["status"].as_str(), v["stdout"]["text"].as_str()), (Some("ok"), Some("42\n")), "{v}");
    }
    assert!(wait_for(Duration::from_secs(15), || s.log().contains("the spawner has ended")), "{}", s.log());
    s.wait_warm();
    let v = post_run(&s.socket, &json!({"runtime": "javascript", "code": "console.log(7)"})).json();
    assert_eq!(v["stdout"]["text"].as_str(), Some("7\n"), "{v}");
    assert!(s.child.try_wait().ok().flatten().is_none(), "the server died: {}", s.log());
    let gone = |p: &i32| !std::path::Path::new(&format!("/proc/{p}")).exists();
    assert!(wait_for(Duration::from_secs(5), || helpers.iter().all(gone)), "helpers left: {helpers:?}");
    assert!(wait_for(Duration::from_secs(5), || of_helpers(&s).is_empty()), "{:?}", of_helpers(&s));
    let init = |p: &i32| std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "stockade-init");
    assert!(children_of(s.pid()).iter().all(init), "the server's children: {:?}", children_of(s.pid()));
}

/// A warm Python jail's runner is a copy of its helper, the guest loaded by the spawner (no exec
/// of stockade; `stockade-runner`): it holds the program's fds and the guest's artifact only,
/// none of its helper's (the jail's channels, the server's socket, the mount trees); a trap of
/// its guest is a trap (the engine's fault handlers are there again); and neither the runner
/// nor the spawner holds the server's bearer token in its memory (the server itself does, which
/// shows the search finds it).
#[test]
fn a_warm_runner_is_a_copy_holding_its_guest_and_no_secret() {
    if !guests() {
        return;
    }
    let s = Server::start("", "[runtimes.python]\nguest = \"python\"\nwarm = 2\n", false);
    s.wait_warm();
    let runners = runners_of(&s);
    assert_eq!(runners.len(), 2, "the server's processes: {:?}", descendants_of(s.pid()));
    for runner in &runners {
        let fds: Vec<(i32, String)> = std::fs::read_dir(format!("/proc/{runner}/fd"))
            .expect("the runner's fds")
            .filter_map(|e| {
                let e = e.ok()?;
                Some((e.file_name().to_str()?.parse().ok()?, std::fs::read_link(e.path()).ok()?.display().to_string()))
            })
            .collect();
        // Its own: stdin, stdout, stderr, the summary channel and the host-call channel's two
        // pipes (fds 0-5, and a copy of stdin), the guest's directories (path-only, once each),
        // its runtime's event fds, the artifact; and as its jail's init, the writing end of the
        // jail's report, whose other end its helper reads. Not the helper's: a socket, another
        // pipe, another path-only fd (the mount trees, the program's), a Landlock ruleset, a
        // seccomp listener.
        let mut program_pipes: Vec<&String> = fds.iter().filter(|(fd, _)| *fd <= 5).map(|(_, l)| l).collect();
        let flags = |fd: i32| {
            let info = std::fs::read_to_string(format!("/proc/{runner}/fdinfo/{fd}")).unwrap_or_default();
            let flags = info.lines().find_map(|l| l.strip_prefix("flags:")).unwrap_or("0").trim().to_string();
            u32::from_str_radix(&flags, 8).unwrap_or(0)
        };
        let helper = std::fs::read_to_string(format!("/proc/{runner}/stat"))
            .ok()
            .and_then(|st| st.rsplit_once(") ")?.1.split(' ').nth(1)?.parse::<i32>().ok())
            .expect("the runner's parent");
        let helper_holds = |link: &String| {
            std::fs::read_dir(format!("/proc/{helper}/fd"))
                .into_iter()
                .flatten()
                .flatten()
                .any(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.display().to_string() == *link))
        };
        let report: Vec<&String> = fds
            .iter()
            .filter(|(fd, l)| *fd > 5 && l.starts_with("pipe:") && !program_pipes.contains(&l))
            .filter(|(fd, l)| flags(*fd) & libc::O_ACCMODE as u32 == libc::O_WRONLY as u32 && helper_holds(l))
            .map(|(_, l)| l)
            .collect();
        assert_eq!(report.len(), 1, "runner {runner} holds no report of its jail (helper {helper}): {fds:?}");
        program_pipes.extend(report);
        let channel = fds.iter().filter(|(fd, l)| (4..=5).contains(fd) && l.starts_with("pipe:")).count();
        assert_eq!(channel, 2, "runner {runner} has no host-call channel at fds 4 and 5: {fds:?}");
        let path_only = |fd: i32| flags(fd) & libc::O_PATH as u32 != 0;
        let dirs: Vec<&String> = fds.iter().filter(|(fd, _)| path_only(*fd)).map(|(_, l)| l).collect();
        let guest_dir = |l: &String| l == "/app" || l.contains("python314-lib-");
        assert!(dirs.iter().all(|l| guest_dir(l)), "runner {runner} holds {fds:?}");
        assert!(dirs.iter().all(|l| dirs.iter().filter(|m| m == &l).count() == 1), "runner {runner} holds {fds:?}");
        let foreign = |(_, link): &(i32, String)| {
            link.starts_with("socket:")
                || (link.starts_with("pipe:") && !program_pipes.contains(&link))
                || (link.starts_with("anon_inode:")
                    && !["anon_inode:[eventpoll]", "anon_inode:[eventfd]"].contains(&link.as_str()))
        };
        assert!(!fds.iter().any(foreign), "runner {runner} holds {fds:?}");
        assert!(fds.iter().any(|(_, link)| link.ends_with(".cwasm")), "runner {runner} has no guest loaded: {fds:?}");
    }
    let spawner = children_of(s.pid());
    assert_eq!(spawner.len(), 1, "{spawner:?}");
    assert!(memory_holds(s.pid() as i32, TOKEN.as_bytes()), "the search does not find the server's token");
    assert!(!memory_holds(spawner[0], TOKEN.as_bytes()), "the spawner holds the server's token");
    if is_root() {
        // Another uid's, not dumpable: only root reads it.
        for runner in &runners {
            assert!(!memory_holds(*runner, TOKEN.as_bytes()), "runner {runner} holds the server's token");
        }
    } else {
        eprintln!("skipping the runners' memory: reading it needs root");
    }
    let v = post_run(&s.socket, &json!({"runtime": "python", "code": "import os\nos.abort()"})).json();
    assert_eq!(v["status"], "wasm-trap", "{v}");
    shares_an_empty_network_namespace(&s);
    let v = post_run(&s.socket, &json!({"runtime": "python", "code": "print(6 * 7)"})).json();
    assert_eq!((v["status"].as_str(), v["stdout"]["text"].as_str()), (Some("ok"), Some("42\n")), "{v}");
}

/// The spawner's code, stockade's and its guests', is in anonymous huge pages before it forks
/// (on a host that gives huge pages to memory that asks): each helper and each runner, a copy of
/// it, has that code mapped from its fork on instead of faulting it in, page by page, as it
/// runs. A waiting runner that has run nothing maps all of it; nothing of stockade's code is left
/// in the file's mapping but the ends that fill no huge page, and of the Python guest's code, not
/// its start (beside its artifact's headers). A program's helper puts it back
/// in its files: its jail's program, which shares its init's memory until it execs, does not
/// report that code as its resident set. The runs work as before.
#[test]
fn a_warm_runner_has_its_code_mapped_from_its_fork() {
    if !guests() {
        return;
    }
    if !is_root() {
        eprintln!("skip: reading a runner's and a helper's mappings needs root (they are not dumpable)");
        return;
    }
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    if !(thp.contains("[always]") || thp.contains("[madvise]")) {
        eprintln!("skip: this host gives no transparent huge page to memory that asks ({})", thp.trim());
        return;
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let version: Vec<u32> = release.split(['.', '-']).take(2).filter_map(|n| n.trim().parse().ok()).collect();
    if version < vec![6, 1] {
        eprintln!("skip: the code is moved only where the kernel has MADV_COLLAPSE (6.1; this is {})", release.trim());
        return;
    }
    let mut config = String::from("[runtimes.python]\nguest = \"python\"\nwarm = 1\n");
    let program = python3().is_some();
    if program {
        config += "[runtimes.python3]\nprogram = \"/usr/bin/python3\"\nbootstrap = \"python\"\npolicy = \"wrap-python\"\nwarm = 1\n";
    }
    let s = Server::start("", &config, false);
    s.wait_warm();
    let runners = runners_of(&s);
    assert_eq!(runners.len(), 1, "the server's processes: {:?}", descendants_of(s.pid()));
    let parent = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|st| st.rsplit_once(") ")?.1.split(' ').nth(1)?.parse::<i32>().ok())
            .expect("a parent")
    };
    let helper = parent(runners[0]);
    let spawner = parent(helper);
    // The program's helper, taken while the pools are full (a run's refill starts another).
    let program_helpers: Vec<i32> = children_of(spawner as u32).into_iter().filter(|h| *h != helper).collect();
    let whole = |code: &[Mapping]| -> u64 {
        code.iter().filter(|m| m.path.is_empty() && m.kb >= 2048 && m.huge_kb == m.kb).map(|m| m.kb).sum()
    };
    for pid in [runners[0], helper, spawner] {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).expect("exe").display().to_string();
        let code = code_mappings(pid);
        let mapped = code.iter().filter(|m| m.path.is_empty() && m.kb >= 2048 && m.huge_kb == m.kb && m.rss_kb == m.kb);
        assert!(
            mapped.count() >= 2,
            "{pid} maps no code of stockade and its guest in huge pages: {code:#?}\n{}",
            s.log()
        );
        let in_file: Vec<&Mapping> = code.iter().filter(|m| m.path == exe).collect();
        assert!(in_file.iter().all(|m| m.kb < 2048), "{pid} runs stockade's code from its file: {in_file:#?}");
        // The Python guest's code begins beside its artifact's headers, in a huge page of its
        // file that it does not fill: that page moves too, and its first 2 MiB of code (all but
        // the headers' 4 KiB) is not run from the file.
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
        assert!(
            maps.lines().any(|l| l.contains("python") && l.ends_with(".cwasm")),
            "{pid} maps no Python guest: {maps}"
        );
        // Where its file maps it at a 2 MiB boundary (else the page holds more than its headers).
        let head = guest_head(&maps);
        let left = head.iter().filter(|m| (m.0 - m.1) % (2 << 20) == 0).collect::<Vec<_>>();
        assert!(left.is_empty(), "{pid} runs the start of the Python guest's code from its artifact: {left:#?}");
        if !head.is_empty() {
            eprintln!("skip: the Python guest's artifact is not mapped on a 2 MiB boundary in {pid}: {head:#?}");
        }
    }
    let v =
        post_run(&s.socket, &json!({"runtime": "python", "code": "import json\nprint(json.dumps([6 * 7]))"})).json();
    assert_eq!((v["status"].as_str(), v["stdout"]["text"].as_str()), (Some("ok"), Some("[42]\n")), "{v}");
    if !program {
        eprintln!("skip: a program's helper (no python3 on this host)");
        return;
    }
    let moved_kb = whole(&code_mappings(spawner));
    assert_eq!(
        program_helpers.len(),
        1,
        "the helpers under the spawner {spawner}, beside {helper}: {program_helpers:?}"
    );
    let code = code_mappings(program_helpers[0]);
    assert_eq!(whole(&code), 0, "the program's helper {} keeps the code mapped whole: {code:#?}", program_helpers[0]);
    // The guest's headers, moved executable with the start of its code, are read-only again there.
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", program_helpers[0])).expect("maps");
    let head = guest_head(&maps);
    assert!(
        head.iter().any(|m| m.1 == 0 && m.2 == "r--p") && head.iter().any(|m| m.1 > 0 && m.2 == "r-xp"),
        "the program's helper {} has not the guest's headers and code back as its artifact maps them: {head:#?}",
        program_helpers[0]
    );
    let v = post_run(&s.socket, &json!({"runtime": "python3", "code": "print(6 * 7)"})).json();
    assert_eq!((v["status"].as_str(), v["stdout"]["text"].as_str()), (Some("ok"), Some("42\n")), "{v}");
    let rss_kb = v["max-rss-bytes"].as_u64().expect("max-rss-bytes") / 1024;
    assert!(rss_kb < moved_kb, "a python3 run reports {rss_kb} kB resident, the code moved is {moved_kb} kB: {v}");
}

/// The mappings of the Python guest's artifact below 2 MiB into its file (its headers and the
/// start of its code) in `maps`: address, file offset, permissions.
fn guest_head(maps: &str) -> Vec<(usize, usize, String)> {
    maps.lines()
        .filter(|l| l.contains("python") && l.ends_with(".cwasm"))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let start = usize::from_str_radix(f.first()?.split_once('-')?.0, 16).ok()?;
            let offset = usize::from_str_radix(f.get(2)?, 16).ok()?;
            let perms = f.get(1)?.to_string();
            (offset < 2 << 20).then_some((start, offset, perms))
        })
        .collect()
}

/// A warm Python runner asks for its own copies of the pages a run writes while it waits for its
/// code: the list `stockade guest install` learned beside the guest. Before any code comes, every
/// page on the list is present in the runner, and each one of the guest's memory image (the
/// artifact's writable mapping, shared with the spawner until written) is the runner's own
/// (anonymous) page. Its run works as before.
#[test]
fn a_warm_python_runner_has_its_own_copies_of_what_a_run_writes_and_maps_what_it_reads() {
    if !guests() {
        return;
    }
    if !is_root() {
        eprintln!("skip: reading a runner's mappings needs root (it is not dumpable)");
        return;
    }
    let list = stockade::wasm::snapshot::pages_path(&stockade::wasm::guests::default_dir());
    let text = std::fs::read_to_string(&list)
        .unwrap_or_else(|e| panic!("{}: {e} (install the guests with this stockade)", list.display()));
    let page = |l: &str| l.parse::<usize>().unwrap_or_else(|e| panic!("{l:?}: {e}"));
    let (mut pages, mut read) = (Vec::new(), Vec::new());
    for l in text.lines().skip(1) {
        match l.strip_prefix("r ") {
            Some(n) => read.push(page(n)),
            None => pages.push(page(l)),
        }
    }
    assert!(pages.len() >= 50, "a run of print(1) writes more than {} pages: {text}", pages.len());
    assert!(read.len() >= 50, "a run of print(1) reads more than {} other pages: {text}", read.len());
    // Learned, not every page: the memory read before the learned run maps none it did not have.
    let memory_pages: usize = text
        .lines()
        .next()
        .and_then(|h| h.rsplit_once("memory-bytes="))
        .and_then(|(_, n)| n.parse::<usize>().ok())
        .expect("the list's memory size")
        / 4096;
    assert!(
        (pages.len() + read.len()) * 4 < memory_pages * 3,
        "{} written and {} read of the memory's {memory_pages} pages: more than a run of print(1) touches",
        pages.len(),
        read.len()
    );
    let s = Server::start("", "[runtimes.python]\nguest = \"python\"\nwarm = 1\n", false);
    s.wait_warm();
    let runners = runners_of(&s);
    assert_eq!(runners.len(), 1, "the server's processes: {:?}", descendants_of(s.pid()));
    let pid = runners[0];
    // The guest's memory: the artifact's writable mapping (its image) and the writable private
    // mappings around it.
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
    let rows: Vec<(usize, usize, bool, String)> = maps
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (a, b) = f[0].split_once('-').expect("a range");
            let n = |x: &str| usize::from_str_radix(x, 16).expect("hex");
            (n(a), n(b), f[1] == "rw-p", f.get(5).map_or(String::new(), |p| p.to_string()))
        })
        .collect();
    let i = rows.iter().position(|r| r.2 && r.3.ends_with(".cwasm")).expect("the guest's image");
    let mut start = i;
    while start > 0 && rows[start - 1].2 && rows[start - 1].1 == rows[start].0 {
        start -= 1;
    }
    let (base, image) = (rows[start].0, rows[i].0..rows[i].1);
    let entry = |addr: usize| -> u64 {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = std::fs::File::open(format!("/proc/{pid}/pagemap")).expect("pagemap");
        f.seek(SeekFrom::Start((addr / 4096 * 8) as u64)).expect("seek");
        let mut e = [0u8; 8];
        f.read_exact(&mut e).expect("an entry");
        u64::from_le_bytes(e)
    };
    // Its own: present, and mapped by this process alone (`PM_MMAP_EXCLUSIVE`), not shared
    // with the spawner copy-on-write. The image's pages are anonymous then, not the file's.
    let not_own = || -> Vec<usize> {
        let own = |p: &usize| {
            let e = entry(base + p * 4096);
            let exclusive = e & (1 << 63) != 0 && e & (1 << 56) != 0;
            exclusive && (!image.contains(&(base + p * 4096)) || e & (1 << 61) == 0)
        };
        pages.iter().copied().filter(|p| !own(p)).collect()
    };
    // Mapped: present, whether the file's page or the zero page (a read copies nothing).
    let unmapped =
        || -> Vec<usize> { read.iter().copied().filter(|p| entry(base + p * 4096) & (1 << 63) == 0).collect() };
    // Ready may be said before the runner has reached its wait: it gets a moment.
    let mut missing = (not_own(), unmapped());
    for _ in 0..40 {
        if missing.0.is_empty() && missing.1.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        missing = (not_own(), unmapped());
    }
    assert!(
        missing.0.is_empty(),
        "{} of {} listed pages written are not the waiting runner's own: {:?}",
        missing.0.len(),
        pages.len(),
        missing.0
    );
    assert!(
        missing.1.is_empty(),
        "{} of {} listed pages read are not mapped in the waiting runner: {:?}",
        missing.1.len(),
        read.len(),
        missing.1
    );
    let v = post_run(&s.socket, &json!({"runtime": "python", "code": "print(6 * 7)"})).json();
    assert_eq!((v["status"].as_str(), v["stdout"]["text"].as_str()), (Some("ok"), Some("42\n")), "{v}");
}

/// A mapping of code (readable and executable) in `/proc/<pid>/smaps`.
#[derive(Debug)]
struct Mapping {
    /// The file mapped; empty for anonymous memory.
    path: String,
    kb: u64,
    rss_kb: u64,
    huge_kb: u64,
}

fn code_mappings(pid: i32) -> Vec<Mapping> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).expect("smaps");
    let mut all: Vec<(bool, Mapping)> = Vec::new();
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or_default();
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            let code = fields.next().is_some_and(|perms| perms.starts_with("r-x"));
            let path = fields.skip(3).collect::<Vec<_>>().join(" ");
            all.push((code, Mapping { path, kb: 0, rss_kb: 0, huge_kb: 0 }));
            continue;
        }
        let (Some((_, m)), Some(kb)) = (all.last_mut(), fields.next().and_then(|v| v.parse::<u64>().ok())) else {
            continue;
        };
        match first {
            "Size:" => m.kb = kb,
            "Rss:" => m.rss_kb = kb,
            "AnonHugePages:" => m.huge_kb = kb,
            _ => {}
        }
    }
    all.into_iter().filter(|(code, _)| *code).map(|(_, m)| m).collect()
}

/// The warm Wasm runners share one network namespace, neither the host's nor the server's, with
/// nothing in it to tell two runs apart or to use: no interface but `lo` (down: no address, no
/// route), no socket; a guest cannot make one; the report says the namespace is shared.
fn shares_an_empty_network_namespace(s: &Server) {
    if !is_root() {
        eprintln!("skipping the runners' network namespace: reading it needs root");
        return;
    }
    s.wait_warm();
    let runners = runners_of(s);
    assert_eq!(runners.len(), 2, "the server's processes: {:?}", descendants_of(s.pid()));
    let ns = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/net")).expect("a net namespace");
    let shared = ns(&runners[0].to_string());
    assert!(runners.iter().all(|r| ns(&r.to_string()) == shared), "the runners' namespaces differ");
    assert_ne!(shared, ns("self"), "the runners are in the host's network namespace");
    assert_ne!(shared, ns(&s.pid().to_string()), "the runners are in the server's network namespace");
    let lines = |file: &str| -> Vec<String> {
        let text = std::fs::read_to_string(format!("/proc/{}/net/{file}", runners[0])).expect("net file");
        text.lines().map(str::to_string).collect()
    };
    let dev = lines("dev");
    assert!(dev.len() == 3 && dev[2].trim_start().starts_with("lo:"), "interfaces: {dev:?}");
    for file in ["unix", "tcp", "tcp6", "udp", "udp6", "route", "raw", "packet"] {
        assert!(lines(file).len() <= 1, "{file}: {:?}", lines(file));
    }
    let code = "import socket\ntry:\n    socket.socket()\nexcept OSError as e:\n    print('refused')";
    let v = post_run(&s.socket, &json!({"runtime": "python", "code": code})).json();
    assert_eq!(v["stdout"]["text"], "refused\n", "{v}");
    let net = v["enforcement"].as_array().and_then(|l| l.iter().find(|l| l["layer"] == "namespace.net")).cloned();
    let applied = net.as_ref().and_then(|n| n["applied"].as_str()).unwrap_or_default();
    assert!(applied.starts_with("shared: an empty one"), "{net:?}");
}

/// The warm runners of a server's jails (each a copy of its helper).
fn runners_of(s: &Server) -> Vec<i32> {
    let comm = |p: &i32| std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default().trim().to_string();
    descendants_of(s.pid()).into_iter().filter(|p| comm(p) == "stockade-runner").collect()
}

/// Whether the readable memory of process `pid` holds `needle`.
fn memory_holds(pid: i32, needle: &[u8]) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
    let mut mem = std::fs::File::open(format!("/proc/{pid}/mem")).expect("mem");
    for line in maps.lines() {
        let mut parts = line.split_whitespace();
        let (Some(range), Some(perms)) = (parts.next(), parts.next()) else { continue };
        let Some((start, end)) = range.split_once('-') else { continue };
        let (Ok(start), Ok(end)) = (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16)) else { continue };
        if !perms.starts_with('r') || end - start > 1 << 30 {
            continue;
        }
        let mut bytes = Vec::new();
        if mem.seek(SeekFrom::Start(start)).is_ok()
            && mem.by_ref().take(end - start).read_to_end(&mut bytes).is_ok()
            && bytes.windows(needle.len()).any(|w| w == needle)
        {
            return true;
        }
    }
    false
}

/// Each warm runner runs its own copy of the guest's instance, made once by the spawner and
/// never called: nothing one served run does is seen by the next (a module's attribute, a
/// global), the `random` module is drawn again, and a policy whose limits would not have
/// admitted that instance gets what a run of its own instantiation gets (the same refusal as the
/// CLI's cold run).
#[test]
fn each_warm_run_has_its_own_copy_of_a_never_called_instance() {
    if !guests() {
        return;
    }
    let policies = tempfile::tempdir().expect("temp dir");
    let small = "version = 1\n[wasm]\nmemory-max-bytes = 8388608\n";
    std::fs::write(policies.path().join("small.toml"), small).expect("policy");
    std::fs::write(policies.path().join("metered.toml"), "version = 1\n[wasm]\nfuel = 200000000\n").expect("policy");
    let config = format!(
        "[policies]\ndir = \"{}\"\n[runtimes.python]\nguest = \"python\"\nwarm = 2\n\
         [runtimes.javascript]\nguest = \"javascript\"\nwarm = 2\n\
         [runtimes.tight]\nguest = \"python\"\npolicy = \"small\"\nwarm = 1\n\
         [runtimes.metered]\nguest = \"python\"\npolicy = \"metered\"\nwarm = 1\n\
         [runtimes.metered-js]\nguest = \"javascript\"\npolicy = \"metered\"\nwarm = 1\n",
        policies.path().display()
    );
    let s = Server::start("", &config, false);
    s.wait_warm();
    let py = "import json, random, sys\n\
              print(getattr(sys, 'left_behind', None), getattr(json, 'left_behind', None), \
              globals().get('seen'), random.random())\n\
              sys.left_behind = json.left_behind = 'by an earlier run'\nseen = 1";
    let js = "console.log(String(globalThis.leftBehind), String(Math.leftBehind));\n\
              globalThis.leftBehind = 'by an earlier run'; Math.leftBehind = 1;";
    let mut draws = Vec::new();
    for _ in 0..4 {
        let v = post_run(&s.socket, &json!({"runtime": "python", "code": py})).json();
        let out = v["stdout"]["text"].as_str().unwrap_or_default().to_string();
        assert_eq!(
            (v["status"].as_str(), &out.split_whitespace().take(3).collect::<Vec<_>>()[..]),
            (Some("ok"), &["None"; 3][..]),
            "{v}"
        );
        assert!(v["wasm-time"]["instantiate-ms"].as_f64().is_some(), "{v}");
        draws.push(out.split_whitespace().nth(3).unwrap_or_default().to_string());
        let v = post_run(&s.socket, &json!({"runtime": "javascript", "code": js})).json();
        assert_eq!(
            (v["status"].as_str(), v["stdout"]["text"].as_str()),
            (Some("ok"), Some("undefined undefined\n")),
            "{v}"
        );
        s.wait_warm();
    }
    draws.sort();
    draws.dedup();
    assert_eq!(draws.len(), 4, "runs drew the same random numbers: {draws:?}");
    // The copy's store is this run's: its fuel, all of it counted.
    for (runtime, spin) in [("metered", "while True: pass"), ("metered-js", "for (;;) {}")] {
        let v = post_run(&s.socket, &json!({"runtime": runtime, "code": spin})).json();
        assert_eq!(
            (v["status"].as_str(), v["fuel-consumed"].as_u64()),
            (Some("fuel-exhausted"), Some(200_000_000)),
            "{v}"
        );
    }
    let served = post_run(&s.socket, &json!({"runtime": "tight", "code": "print(1)"})).json();
    let p = policy_file(small);
    let (cold, _) = run_report(&["--policy", &path_of(&p), "--python", "print(1)"]);
    assert_ne!(served["status"], "ok", "{served}");
    let cold = serde_json::to_value(&cold).expect("report");
    assert_eq!(served["status"], cold["status"], "served {served}\ncold {cold}");
    assert!(cold["error"].as_str().is_some_and(|e| e.contains("exceeds memory limits")), "{cold}");
    assert_eq!(served["error"], cold["error"], "served {served}\ncold {cold}");
}

/// A warm Wasm jail's runner is its jail's init (see `warm_jails_are_built_by_helpers_of_a_spawner`),
/// and ends as a program under an init would: PID 1 of a namespace does not get the signals the
/// kernel sends a process for its own acts, so the runner reports the one that would have ended
/// it. A write past `rlimits.file-size-bytes` ends a served run by SIGXFSZ, as it ends the CLI's
/// cold run (its runner exec'd, PID 2 under an init); a write within it is written. Its deadline
/// kills it.
#[test]
fn a_warm_runner_is_its_jail_s_init_and_ends_as_a_program_would() {
    if !guests() {
        return;
    }
    let capped = "version = 1\n[rlimits]\nfile-size-bytes = 1048576\n";
    let policies = tempfile::tempdir().expect("temp dir");
    std::fs::write(policies.path().join("capped.toml"), capped).expect("policy");
    let config = format!(
        "[policies]\ndir = \"{}\"\n[runtimes.python]\nguest = \"python\"\npolicy = \"capped\"\nwarm = 1\n",
        policies.path().display()
    );
    let s = Server::start("", &config, false);
    s.wait_warm();
    let write = |n: u32| format!("f = open('/app/big', 'wb')\nf.write(b'x' * {n})\nf.close()\nprint('written')");
    let v = post_run(&s.socket, &json!({"runtime": "python", "code": write(1000)})).json();
    assert_eq!((v["status"].as_str(), v["stdout"]["text"].as_str()), (Some("ok"), Some("written\n")), "{v}");
    s.wait_warm();
    let served = post_run(&s.socket, &json!({"runtime": "python", "code": write(2_000_000)})).json();
    assert_eq!((served["status"].as_str(), served["signal"].as_i64()), (Some("signaled"), Some(25)), "{served}");
    let p = policy_file(capped);
    let (cold, _) = run_report(&["--policy", &path_of(&p), "--python", &write(2_000_000)]);
    let cold = serde_json::to_value(&cold).expect("report");
    assert_eq!((&served["status"], &served["signal"]), (&cold["status"], &cold["signal"]), "cold {cold}");
    // No init of ours takes the deadline's signal: the runner blocked outside its guest's code
    // (in a host call) ends at the deadline, its own or the supervisor's kill.
    s.wait_warm();
    let t = std::time::Instant::now();
    let slow = json!({"runtime": "python", "code": "import time\ntime.sleep(30)", "limits": {"wall-timeout-ms": 300}});
    let v = post_run(&s.socket, &slow).json();
    assert_eq!(v["status"], "timeout", "{v}");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
}

/// A warm run's CPU time is its own, counted from its opening: the opening reads what the jail
/// spent waiting before the program can have its code. (The supervisor's thread once read it
/// when it woke, which on a busy CPU came after the run, and a served `print(1)` was reported
/// with no CPU time at all, in about one run of five.) And once its runner has accounted for the
/// run, the run's cgroup is frozen until the runner is killed after the answer (cgroup2 hosts).
#[test]
fn a_warm_run_counts_its_own_cpu_time_and_its_runner_is_frozen_after_its_account() {
    if !guests() {
        return;
    }
    let s = Server::start("", "[runtimes.python]\nguest = \"python\"\nwarm = 1\n", false);
    let mut frozen_seen = 0;
    for _ in 0..10 {
        s.wait_warm();
        // A warm runner is counted once its jail is built, and names itself just after; the last
        // run's goes a few milliseconds after its answer.
        wait_for(Duration::from_secs(5), || runners_of(&s).len() == 1);
        let runners = runners_of(&s);
        assert_eq!(runners.len(), 1, "the server's processes: {:?}", descendants_of(s.pid()));
        let freeze = cgroup2_file(runners[0], "cgroup.freeze");
        let v = post_run(&s.socket, &json!({"runtime": "python", "code": "print(1)"})).json();
        // Read while the runner and its cgroup are still there (they go 5 ms after the answer:
        // gone is fine); a cgroup still there is frozen.
        if let Some(text) = freeze.and_then(|f| std::fs::read_to_string(f).ok()) {
            assert_eq!(text.trim(), "1", "the run's cgroup after the answer: not frozen");
            frozen_seen += 1;
        }
        assert_eq!(v["status"], "ok", "{v}");
        let cpu = v["cpu-user-ms"].as_f64().unwrap_or(0.0) + v["cpu-sys-ms"].as_f64().unwrap_or(0.0);
        assert!(cpu > 0.0, "a run of print(1) used some CPU: {v}");
        assert!(v["warm-start"]["cpu-ms"].as_f64().is_some_and(|w| w > 0.0), "{v}");
    }
    eprintln!("the run's cgroup seen frozen after {frozen_seen} of 10 answers (the others were gone)");
}

/// A file of the cgroup2 cgroup of process `pid`, when the host has cgroup2 mounted.
fn cgroup2_file(pid: i32, name: &str) -> Option<std::path::PathBuf> {
    let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let root = mounts.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        (right.split_whitespace().next() == Some("cgroup2")).then(|| left.split_whitespace().nth(4))?
    })?;
    Some(std::path::Path::new(root).join(path.trim_start_matches('/')).join(name))
}

/// A program's jail takes an empty network namespace the spawner made ahead, one jail at a
/// time, instead of creating one (issue 25): a later run may get the namespace of an earlier
/// one, never while another run is in it, and never with anything of the earlier run in it. The
/// earlier runs here leave the most a run can: a bound unix socket kept alive past the run's end
/// (in flight, passed over a socket nobody reads); the later ones look for it by its name (a
/// bind that would fail) and in the namespace's socket table. A namespace is told by its cookie
/// (`SO_NETNS_COOKIE`, never reused while the host runs; an inode number can be a freed
/// namespace's). Needs root (making a namespace ahead takes `CAP_SYS_ADMIN`) and the host's
/// python3.
#[test]
fn a_program_s_jail_takes_a_network_namespace_in_turn_and_finds_nothing_of_another_run() {
    if !is_root() {
        eprintln!("skip: a network namespace made ahead needs root (CAP_SYS_ADMIN)");
        return;
    }
    let Some(_) = python3() else { return };
    // Room for the three runs below to run at once (a third queued behind two may take a
    // namespace one of them has given back, all of its processes gone).
    let s = Server::start(
        "concurrency = 4",
        "[runtimes.python3]\nprogram = \"/usr/bin/python3\"\nbootstrap = \"python\"\npolicy = \"wrap-python\"\nwarm = 2\n",
        false,
    );
    s.wait_warm();
    helpers_hold_no_other_jail_s_namespace(&s);
    // The namespace's cookie, from a unix socket (the only kind the jail may make).
    let cookie = "import socket\n\
                  def cookie():\n    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n    \
                  c = int.from_bytes(s.getsockopt(socket.SOL_SOCKET, 71, 8), 'little')\n    s.close()\n    return c\n";
    let run = |code: &str| {
        let v = post_run(&s.socket, &json!({"runtime": "python3", "code": format!("{cookie}{code}")})).json();
        assert_eq!(v["status"], "ok", "{v}");
        let net = v["enforcement"].as_array().and_then(|l| l.iter().find(|l| l["layer"] == "namespace.net"));
        let applied = net.and_then(|n| n["applied"].as_str()).unwrap_or_default();
        assert!(applied.starts_with("new, made ahead"), "{v}");
        v["stdout"]["text"].as_str().unwrap_or_default().split_whitespace().map(String::from).collect::<Vec<_>>()
    };
    let leave = "import array, os, socket\n\
                 l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n\
                 l.bind('\\0stockade-left-behind'); l.listen()\n\
                 a, b = socket.socketpair()\n\
                 a.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [l.fileno(), b.fileno()]))])\n\
                 table = open('/proc/self/net/unix').read()\n\
                 print(cookie(), table.count('stockade-left-behind'))";
    let probe = "import os, socket\n\
                 table = open('/proc/self/net/unix').read().splitlines()\n\
                 s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n\
                 try:\n    s.bind('\\0stockade-left-behind'); bound = 'bound'\n\
                 except OSError as e:\n    bound = 'in-use'\n\
                 print(cookie(), len(table), bound)";
    let mut seen = std::collections::BTreeMap::<String, u32>::new();
    for _ in 0..4 {
        let out = run(leave);
        assert_eq!(out.get(1).map(String::as_str), Some("1"), "the run saw its own socket: {out:?}");
        *seen.entry(out[0].clone()).or_default() += 1;
        s.wait_warm();
        for _ in 0..3 {
            let out = run(probe);
            // Only the table's header line, and the name free.
            assert_eq!(out.get(1..3), Some(&["1".to_string(), "bound".to_string()][..]), "{out:?}");
            *seen.entry(out[0].clone()).or_default() += 1;
            s.wait_warm();
        }
    }
    assert!(seen.values().any(|&n| n > 1), "no namespace was taken again: {seen:?}");
    // Runs at the same time are never in the same one.
    let sleepy = "import time\nprint(cookie())\ntime.sleep(0.5)";
    let together: Vec<String> = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..3).map(|_| scope.spawn(|| run(sleepy).concat())).collect();
        runs.into_iter().map(|r| r.join().expect("run")).collect()
    });
    let mut distinct = together.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "runs at the same time shared a namespace: {together:?}");
}

/// No helper holds the network namespace lent to another helper's jail (each of them forked
/// from the spawner, which holds them all): its fds name its own jail's only.
fn helpers_hold_no_other_jail_s_namespace(s: &Server) {
    let link = |p: String| std::fs::read_link(p).map(|l| l.to_string_lossy().into_owned()).unwrap_or_default();
    let comm = |p: i32| std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
    // Each waiting jail's init, its helper (its parent) and the namespace it is in.
    let jails: Vec<(i32, String)> = descendants_of(s.pid())
        .into_iter()
        .filter(|&p| comm(p).trim() == "stockade-init")
        .filter_map(|init| {
            let helper = children_of(s.pid())
                .into_iter()
                .flat_map(|spawner| children_of(spawner as u32))
                .find(|&h| children_of(h as u32).contains(&init))?;
            Some((helper, link(format!("/proc/{init}/ns/net"))))
        })
        .collect();
    assert_eq!(jails.len(), 2, "the waiting jails: {jails:?}");
    for (helper, _) in &jails {
        let held: Vec<String> = std::fs::read_dir(format!("/proc/{helper}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| link(e.path().display().to_string()))
            .filter(|l| l.starts_with("net:"))
            .collect();
        for (other, net) in jails.iter().filter(|(h, _)| h != helper) {
            assert!(!held.contains(net), "helper {helper} holds {net}, the namespace of helper {other}'s jail");
        }
    }
}

/// `GET /v1/info` says of each runtime's network namespace what its runs' reports say: shared
/// (a Wasm guest's warm jails, root's spawner) or made ahead (a program's), and new where the
/// jails are built on the server's threads. With the build before, info said `new` for all.
#[test]
fn info_says_where_a_runtime_s_network_namespace_comes_from_as_its_runs_do() {
    if !guests() || !is_root() {
        eprintln!("skip: the namespaces made ahead need root (CAP_SYS_ADMIN) and the guests");
        return;
    }
    let Some(_) = python3() else { return };
    let rest = "[runtimes.python]\nguest = \"python\"\nwarm = 1\n\
                [runtimes.python3]\nprogram = \"/usr/bin/python3\"\nbootstrap = \"python\"\npolicy = \"wrap-python\"\nwarm = 1\n";
    let net_of = |layers: &serde_json::Value| -> String {
        let net = layers.as_array().and_then(|l| l.iter().find(|l| l["layer"] == "namespace.net"));
        net.and_then(|n| n["applied"].as_str()).unwrap_or_default().to_string()
    };
    for (server, python, python3) in [("", "shared: ", "new, made ahead: "), ("spawner = false", "new", "new")] {
        let s = Server::start(server, rest, false);
        s.wait_warm();
        let (status, info) = get(&s.socket, "/v1/info");
        assert_eq!(status, 200, "{info}");
        for (runtime, words) in [("python", python), ("python3", python3)] {
            let rt = info["runtimes"].as_array().and_then(|r| r.iter().find(|r| r["name"] == runtime));
            let told = net_of(&rt.expect("the runtime in /v1/info")["enforcement"]);
            let v = post_run(&s.socket, &json!({"runtime": runtime, "code": "print(1)"})).json();
            assert_eq!(v["status"], "ok", "{v}");
            let ran = net_of(&v["enforcement"]);
            assert_eq!(told, ran, "{runtime} ({server:?}): /v1/info and its run differ");
            // A namespace of its own is said as the one word.
            let said = if words == "new" { ran == "new" } else { ran.starts_with(words) };
            assert!(said, "{runtime} ({server:?}): {ran}");
        }
    }
}
