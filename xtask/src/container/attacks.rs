//! The escape suite's network and filesystem attacks as runtimes of the containerized server:
//! each first run in the container outside a jail, where it must work, then in the jail, where it
//! must not; judged from the host's listeners and files.

use super::*;

/// A listener on the host: counts what reaches it.
struct Listener {
    hits: Arc<AtomicUsize>,
    target: String,
}

fn listen(kind: &str, socket_dir: &Path) -> Result<Listener, String> {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let count = move |_: ()| {
        h.fetch_add(1, Ordering::SeqCst);
    };
    let target = match kind {
        "tcp4" | "tcp6" => {
            let l =
                TcpListener::bind(if kind == "tcp4" { "127.0.0.1:0" } else { "[::1]:0" }).map_err(|e| e.to_string())?;
            let port = l.local_addr().map_err(|e| e.to_string())?.port();
            std::thread::spawn(move || l.incoming().flatten().for_each(|_| count(())));
            port.to_string()
        }
        "udp4" => {
            let s = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
            let port = s.local_addr().map_err(|e| e.to_string())?.port();
            std::thread::spawn(move || {
                let mut buf = [0u8; 64];
                while s.recv(&mut buf).is_ok() {
                    count(());
                }
            });
            port.to_string()
        }
        "abstract" => {
            use std::os::linux::net::SocketAddrExt;
            let name = format!("stockade-container-escape-{}", std::process::id());
            let addr =
                std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).map_err(|e| e.to_string())?;
            let l = UnixListener::bind_addr(&addr).map_err(|e| e.to_string())?;
            std::thread::spawn(move || l.incoming().flatten().for_each(|_| count(())));
            name
        }
        _ => {
            let path = socket_dir.join("escape.sock");
            let l = UnixListener::bind(&path).map_err(|e| e.to_string())?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).map_err(|e| e.to_string())?;
            std::thread::spawn(move || l.incoming().flatten().for_each(|_| count(())));
            "/run/stockade/escape.sock".into()
        }
    };
    Ok(Listener { hits, target })
}

pub(super) fn attacks(root: &Path, engine: &Engine) -> Result<(), String> {
    let ctx = root.join("target/container/escape-ctx");
    let _ = std::fs::remove_dir_all(&ctx);
    std::fs::create_dir_all(ctx.join("escape")).map_err(|e| e.to_string())?;
    for name in ATTACKS {
        crate::run(
            Command::new("gcc")
                .args(["-static", "-O1", "-Wall", "-Werror", "-o"])
                .arg(ctx.join("escape").join(name))
                .arg(root.join("tests/escape").join(format!("{name}.c"))),
        )?;
    }
    let socket_dir = engine.dir.join("run2");
    std::fs::create_dir_all(&socket_dir).map_err(|e| e.to_string())?;
    // A secret only the container (not the jail) can see: in the server's socket directory.
    let secret = format!("stockade-secret-{}-{:?}", std::process::id(), Instant::now());
    std::fs::write(socket_dir.join("secret"), &secret).map_err(|e| e.to_string())?;
    let kinds = ["tcp4", "tcp6", "udp4", "abstract", "unix"];
    let mut listeners = Vec::new();
    for kind in kinds {
        listeners.push(listen(kind, &socket_dir)?);
    }
    let dir = "/usr/libexec/stockade-escape";
    let mut config = std::fs::read_to_string(root.join("contrib/container/serve.toml")).map_err(|e| e.to_string())?;
    let mut attacks: Vec<(String, Vec<String>)> = Vec::new();
    for (kind, l) in kinds.iter().zip(&listeners) {
        attacks.push((format!("net-{kind}"), vec!["net".into(), (*kind).into(), l.target.clone()]));
    }
    attacks.push((
        "read".into(),
        vec!["read_files".into(), "/run/stockade/secret".into(), "/proc/1/root/run/stockade/secret".into()],
    ));
    attacks.push((
        "write".into(),
        vec!["write_files".into(), "/run/stockade/pwned".into(), "/proc/1/root/run/stockade/pwned".into()],
    ));
    for (name, argv) in &attacks {
        let args: Vec<String> = std::iter::once("attack".to_string()).chain(argv[1..].iter().cloned()).collect();
        config.push_str(&format!(
            "\n[runtimes.{name}]\nprogram = \"{dir}/{}\"\nargs = {}\nbootstrap = \"stdin\"\nwarm = 0\n",
            argv[0],
            serde_json::to_string(&args).map_err(|e| e.to_string())?
        ));
    }
    std::fs::write(ctx.join("serve.toml"), config).map_err(|e| e.to_string())?;
    std::fs::write(
        ctx.join("Containerfile"),
        format!("FROM {IMAGE}\nCOPY escape/ {dir}/\nCOPY serve.toml /etc/stockade/serve.toml\n"),
    )
    .map_err(|e| e.to_string())?;
    let file = ctx.join("Containerfile").display().to_string();
    engine.docker(&["build", "-q", "-t", ATTACK_IMAGE, "-f", &file, &ctx.display().to_string()])?;
    let line = run_line(root, engine, "stockade-escape", &socket_dir, "host", ATTACK_IMAGE);
    let server = Server::start(engine, &line, "stockade-escape", &socket_dir)?;
    let mut failures = Vec::new();
    println!("  attack                        in the container, outside a jail   through stockade serve");
    for ((name, argv), l) in attacks.iter().zip(listeners.iter().map(Some).chain(std::iter::repeat(None))) {
        // Outside a jail, in the same container: the attack must work, or it proves nothing.
        let exe = format!("{dir}/{}", argv[0]);
        let mut exec: Vec<&str> = vec!["exec", "stockade-escape", &exe, "attack"];
        exec.extend(argv[1..].iter().map(String::as_str));
        let bare_out = engine.command(&exec).output().map_err(|e| e.to_string())?;
        let bare_text = String::from_utf8_lossy(&bare_out.stdout).into_owned();
        std::thread::sleep(Duration::from_millis(100));
        // What it did there, how many reached the listener, and whether it worked.
        let (bare, before, bare_works) = match l {
            Some(l) => {
                let n = l.hits.load(Ordering::SeqCst);
                (format!("{n} reached the host's listener"), n, n > 0)
            }
            None if name == "read" => {
                let read = bare_text.contains(&secret);
                (format!("secret {}", if read { "read" } else { "NOT read" }), 0, read)
            }
            None => {
                let made = socket_dir.join("pwned").exists();
                let _ = std::fs::remove_file(socket_dir.join("pwned"));
                (format!("host file {}", if made { "written" } else { "NOT written" }), 0, made)
            }
        };
        let report = server.run(json!({"runtime": name, "code": "x"}))?;
        std::thread::sleep(Duration::from_millis(100));
        let said = format!(
            "{}{}",
            report["stdout"]["text"].as_str().unwrap_or(""),
            report["stderr"]["text"].as_str().unwrap_or("")
        );
        let (jailed, escaped) = match l {
            Some(l) => {
                let n = l.hits.load(Ordering::SeqCst) - before;
                (format!("{n} reached"), n > 0)
            }
            None if name == "read" => {
                let leaked = said.contains(&secret);
                (format!("secret {}", if leaked { "LEAKED" } else { "not read" }), leaked)
            }
            None => {
                let made = socket_dir.join("pwned").exists();
                (format!("host file {}", if made { "WRITTEN" } else { "not written" }), made)
            }
        };
        println!("  {name:<29} {bare:<34} {jailed} ({})", said.lines().last().unwrap_or("").trim());
        if !bare_works {
            failures
                .push(format!("{name}: the attack does not work outside a jail either ({bare}): it proves nothing"));
        }
        if escaped {
            failures.push(format!("{name}: escaped through stockade serve: {report}"));
        }
    }
    server.stop()?;
    let _ = std::fs::remove_file(socket_dir.join("escape.sock"));
    if failures.is_empty() { Ok(()) } else { Err(failures.join("\n")) }
}
