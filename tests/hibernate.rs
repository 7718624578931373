//! A live Python interpreter hibernated and resumed through the library: a jail of turns is
//! asked for its image between two turns (the frame `handover::HIBERNATE_FRAME`), ends, and a
//! new jail resumes from that image: the variables, functions, classes and modules the first
//! defined are there, its monotonic clock goes on, and the image holds only the pages the
//! interpreter wrote. Needs the Wasm guests (skips without them, saying so).

mod common;

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use stockade::runtime::{Code, Guest, Recipe, WORK_DIR};
use stockade::wasm::LiveImages;
use stockade::wasm::turns::{Account, last_account};
use stockade::{Exchange, Host, LiveRun, Start, Turn, TurnCalls, Turned};

fn guests() -> bool {
    let d = stockade::wasm::guests::default_dir();
    let ok = d.join("python314.wasm").exists();
    if !ok {
        eprintln!("skip: guests not installed in {} (stockade guest install)", d.display());
    }
    ok
}

/// The pipe a jail sends its images on, and a thread writing each into `dir/name` (its length
/// first, 8 bytes; 0: none) until the pipe's end.
fn image_pipe(dir: &std::path::Path, name: &str) -> (OwnedFd, std::thread::JoinHandle<()>) {
    use std::io::Read;
    let (from_jail, to_jail) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).expect("pipe");
    let path = dir.join(name);
    let reader = std::thread::spawn(move || {
        let mut pipe = std::fs::File::from(from_jail);
        let mut len = [0u8; 8];
        while pipe.read_exact(&mut len).is_ok() {
            let mut bytes = vec![0u8; usize::try_from(u64::from_le_bytes(len)).expect("length")];
            pipe.read_exact(&mut bytes).expect("the image whole");
            if !bytes.is_empty() {
                std::fs::write(&path, bytes).expect("image");
            }
        }
    });
    (to_jail, reader)
}

/// One jail of the Python guest's turns, passed `fds`: each of `codes` a turn (a `None` a
/// hibernation), answered with its stdout, or with the runner's account for a hibernation.
fn turns(images: LiveImages, fds: &[&OwnedFd], codes: &[Option<&str>]) -> (Vec<String>, Option<Account>) {
    let policy = stockade::Policy::builtin();
    let runner = common::stockade_bin();
    let recipe = Recipe::build_live_imaged(Code::Guest(Guest::Python), &policy, &runner, Some(images)).expect("recipe");
    let borrowed: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
    let waiting = recipe.prestart_passing(&borrowed).expect("prestart");
    let start = Start {
        files: Some(Exchange { dir: WORK_DIR.into(), put: Vec::new(), take: None }),
        live: Some(Arc::new(LiveRun::default())),
        host: Some(Host::Turns(Arc::new(TurnCalls::default()))),
        from_release: true,
        ..Start::default()
    };
    let mut out = Vec::new();
    let mut ready = None;
    let mut queue = codes.iter();
    let mut next = |turned: Turned| {
        match turned {
            Turned::Ready { account } => ready = last_account(&account),
            Turned::Returned { report, account } => {
                let said = last_account(&account);
                match said {
                    Some(Account::Hibernated { .. } | Account::NotHibernated { .. }) => {
                        out.push(serde_json::to_string(&said).unwrap_or_default())
                    }
                    _ => out.push(format!(
                        "{} {}",
                        report.status.as_str(),
                        report.stdout.text.clone().unwrap_or_default()
                    )),
                }
            }
            Turned::Refused(e) => panic!("refused: {e}"),
        }
        let code = queue.next()?;
        let stdin = match code {
            Some(c) => stockade::handover::turn_frame(c, b"", None),
            None => stockade::handover::HIBERNATE_FRAME.to_vec(),
        };
        Some(Turn {
            stdin,
            limits: stockade::policy::Limits::default(),
            stdout_to: None,
            stderr_to: None,
            host: None,
            argv_display: None,
        })
    };
    let ended = waiting.run_turns(start, &mut next).expect("turns");
    drop(ended);
    (out, ready)
}

#[test]
fn a_hibernated_interpreter_resumes_with_its_state() {
    if !guests() {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let (first, reader) = image_pipe(dir.path(), "one");
    let code = "import json, fractions, time\n\
                x = 41\n\
                def f(a): return a + 1\n\
                class C:\n    def hi(self): return 'hi'\n\
                data = {'k': list(range(200000))}\n\
                t0 = time.monotonic()\n\
                print('ok')";
    let (said, _) = turns(LiveImages::default(), &[&first], &[Some(code), None]);
    assert_eq!(said[0], "ok ok\n", "{said:?}");
    assert!(said[1].contains("hibernated"), "{said:?}");
    drop(first);
    reader.join().expect("reader");
    let bytes = std::fs::metadata(dir.path().join("one")).expect("image").len();
    // Only what the interpreter wrote: far less than its memory (the snapshot's pages are not in it).
    assert!(bytes > 1 << 20 && bytes < 64 << 20, "{bytes}");

    let (second, _reader) = image_pipe(dir.path(), "two");
    let resume: OwnedFd = std::fs::File::open(dir.path().join("one")).expect("open").into();
    let code =
        "print(f(x), C().hi(), len(data['k']), json.dumps([1]), fractions.Fraction(1, 3), time.monotonic() >= t0)";
    let (said, ready) = turns(LiveImages { resume: true, reseed: false }, &[&second, &resume], &[Some(code)]);
    assert!(matches!(ready, Some(Account::Ready { resumed: Some(_), .. })), "{ready:?}");
    assert_eq!(said[0], "ok 42 hi 200000 [1] 1/3 True\n", "{said:?}");
}
