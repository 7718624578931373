//! Warm jails built outside the server's address space. A jail's init is a copy of the process
//! that forks it, and stays one for the whole run: forked from the server, each jail copied the
//! server's page tables and turned every page the server's threads then wrote into a
//! copy-on-write fault (measured: about a quarter of the CPU of a served static program). So
//! the server forks one **spawner** at its start, while it is still a single thread and small
//! (its pools' recipes made, no async runtime yet), and asks it for warm jails.
//!
//! For each jail the spawner forks a **helper** (a small, single-threaded copy of itself) that
//! builds the jail from the runtime's recipe exactly as a jail thread of the server would
//! ([`Recipe::prestart`], [`stockade::runtime::Waiting::run_gated`]): the helper is the jail's
//! supervisor. The server talks to it over a socket of its own ([`super::handoff`]): the helper
//! says the jail is ready, the server sends the run, the helper answers how it ended, then
//! removes the run's cgroup and exits.
//!
//! Lifetimes: the spawner dies with the server's main thread (its parent-death signal); a helper
//! with the server's end of its socket (waiting at the gate, the jail is taken down; during the
//! run, the helper exits at once), not with the spawner: a killed spawner leaves the jails its
//! helpers hold serving; a jail dies with its helper (its init's parent-death signal). A server
//! that stops closes the spawner's socket, and the spawner ends once its helpers have.
//!
//! The spawner loads the Wasm pools' guests before it forks any helper, so that the runner of a
//! helper's jail is a copy of the helper, its guest loaded (see [`stockade::InProcess`]); that
//! is why it wipes the server's bearer tokens from its copy of the server's memory first.
//!
//! The spawner holds the pools' recipes only: a run that finds no warm jail of its runtime gets
//! a helper's too (built for that run); jails built for a request's own limits or module are
//! built on the server's threads.
//!
//! Imports (layers): `ending`, `handoff`.

use super::ending::{AFTER_ANSWER, inject_panic, panic_words};
use super::handoff::{self, LENGTHS, Msg, recv_fds, send_with_fds};
use rustix::event::{PollFd, PollFlags, poll};
use rustix::net::{AddressFamily, SocketFlags, SocketType, socketpair};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use stockade::Gate;
use stockade::runtime::Recipe;

/// The longest runtime name a request to the spawner carries.
const NAME_MAX: usize = 256;

/// The server's end of its spawner.
#[derive(Debug)]
pub struct Spawner {
    control: OwnedFd,
    pidfd: OwnedFd,
    /// It was seen to have ended (and was reaped).
    ended: std::sync::atomic::AtomicBool,
}

/// What the spawner needs of a runtime's pool: its recipe, made again first when the host
/// changed under it (blocking). The pools give it ([`super::pool`]); the spawner holds copies of
/// them, and imports nothing above it.
pub trait RecipeSource {
    fn recipe_now(&self) -> Result<Arc<Recipe>, String>;
}

impl Spawner {
    /// Forks the spawner with `pools`' recipes. This process must have one thread (before the
    /// async runtime starts): `Err` otherwise, or when the fork fails. `scrub` runs first in the
    /// spawner: it wipes what the spawner's copy of this process must not hold (a copy of the
    /// spawner runs the guests of the Wasm pools).
    pub fn fork<P: RecipeSource>(pools: &BTreeMap<String, Arc<P>>, scrub: impl FnOnce()) -> io::Result<Spawner> {
        let (ours, theirs) = socketpair(AddressFamily::UNIX, SocketType::SEQPACKET, SocketFlags::CLOEXEC, None)?;
        // The spawner closes its copy of the server's end (it must see end of file when the
        // server goes); the server keeps it.
        let server_end = std::cell::Cell::new(Some(ours));
        let pools = pools.clone();
        let (_, pidfd) = stockade::helper::fork_helper(|| {
            drop(server_end.take());
            scrub();
            // The warm Wasm jails share one empty network namespace (root's service only: said
            // when root cannot make it).
            let empty = stockade::helper::make_net();
            if let Err(e) = &empty
                && rustix::process::geteuid().is_root()
            {
                eprintln!(
                    "stockade serve: each Wasm jail gets a network namespace of its own: cannot make a shared empty one: {e}"
                );
            }
            preload(&pools);
            // Every helper and runner is a copy of the spawner: its code is copied with it, not
            // faulted in again by each (see `code_in_huge_pages`).
            match stockade::helper::code_in_huge_pages() {
                Ok(0) => eprintln!(
                    "stockade serve: the spawner's code stays in its files' mappings (this host gives it no huge pages): each helper and runner faults it in"
                ),
                Ok(_) => {}
                Err(e) => eprintln!("stockade serve: the spawner's code stays in its files' mappings: {e}"),
            }
            spawner(&theirs, &pools, empty.ok())
        })?;
        let control = server_end.take().ok_or_else(|| io::Error::other("the spawner's socket is gone"))?;
        Ok(Spawner { control, pidfd, ended: std::sync::atomic::AtomicBool::new(false) })
    }

    /// A helper with a jail of `runtime` waiting at its gate: its socket, once the helper said
    /// the jail is ready (blocking), and where the jail's network namespace came from. `Err`:
    /// why there is none. `one_run`: the jail is built for the run about to open it
    /// ([`Gate::for_one_run`]).
    pub fn helper(&self, runtime: &str, one_run: bool) -> Result<(UnixStream, stockade::NetJoined), String> {
        let (mut ours, theirs) = UnixStream::pair().map_err(|e| format!("a helper's socket: {e}"))?;
        let mut request = vec![u8::from(one_run)];
        request.extend_from_slice(runtime.as_bytes());
        send_with_fds(self.control.as_fd(), &request, &[theirs.as_fd()])
            .map_err(|e| format!("the spawner is gone ({e})"))?;
        drop(theirs);
        match handoff::read_frame(&mut ours) {
            Ok((Msg::Ready(net), _)) => Ok((ours, net)),
            Ok((Msg::Refused(why), _)) => Err(why),
            Ok((other, _)) => Err(format!("a helper said {other:?} before its jail was ready")),
            Err(e) => Err(format!("a helper ended before its jail was ready ({e})")),
        }
    }

    /// Shuts the spawner's socket and waits (blocking) until it has ended, after its helpers.
    pub fn stop(&self) {
        let _ = rustix::net::shutdown(&self.control, rustix::net::Shutdown::Both);
        if !self.ended.swap(true, Ordering::SeqCst) {
            let _ = stockade::helper::reap(self.pidfd.as_fd());
        }
    }

    /// Whether the spawner is still there (its pidfd does not poll readable); one that has
    /// ended is reaped the first time it is seen.
    pub fn alive(&self) -> bool {
        if self.ended.load(Ordering::SeqCst) {
            return false;
        }
        let mut fds = [PollFd::new(&self.pidfd, PollFlags::IN)];
        if matches!(poll(&mut fds, Some(&rustix::event::Timespec { tv_sec: 0, tv_nsec: 0 })), Ok(0)) {
            return true;
        }
        if !self.ended.swap(true, Ordering::SeqCst) {
            let _ = stockade::helper::reap(self.pidfd.as_fd());
        }
        false
    }
}

/// Loads the Wasm pools' guests into the spawner: every helper it forks has them, and the
/// runner of each jail a helper builds is a copy of the helper instead of an exec of stockade
/// (see [`stockade::InProcess`]). A guest that cannot be loaded is said, and its jails' runners
/// are exec'd.
fn preload<P: RecipeSource>(pools: &BTreeMap<String, Arc<P>>) {
    for (name, pool) in pools {
        let loaded = pool.recipe_now().and_then(|r| r.preload());
        if let Err(e) = loaded {
            eprintln!("stockade serve: the spawner cannot load {name}'s guest ({e}): its runners are exec'd");
        }
    }
}

/// The spawner's life: a helper per request, until the server's end closes; then it waits for
/// its helpers and exits.
fn spawner<P: RecipeSource>(control: &OwnedFd, pools: &BTreeMap<String, Arc<P>>, empty: Option<OwnedFd>) -> Infallible {
    let mut helpers: Vec<Helper> = Vec::new();
    let mut nets = Nets { free: Vec::new(), can: true, empty };
    loop {
        let mut fds: Vec<PollFd<'_>> = std::iter::once(control.as_fd())
            .chain(helpers.iter().map(|h| h.pidfd.as_fd()))
            .map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN))
            .collect();
        if poll(&mut fds, None).is_err() {
            continue;
        }
        let control_ready = !fds[0].revents().is_empty();
        let exited: Vec<bool> = fds[1..].iter().map(|f| !f.revents().is_empty()).collect();
        drop(fds);
        let mut i = 0;
        helpers.retain_mut(|h| {
            let ended = exited[i];
            i += 1;
            if !ended {
                return true;
            }
            // An exited helper's pidfd polls readable: reaping it does not wait. One that cannot
            // be reaped is let go all the same (kept, its pidfd would poll readable at once,
            // round after round), and the namespace it was lent with it: whether its jail is
            // gone cannot be told.
            match stockade::helper::reap(h.pidfd.as_fd()) {
                Ok(code) => {
                    if let Some(net) = h.net.take() {
                        nets.back(net, code == Some(CLEAN));
                    }
                }
                Err(e) => eprintln!("stockade serve: the spawner cannot reap a helper ({e}): it lets it go"),
            }
            false
        });
        if !control_ready {
            continue;
        }
        let mut name = [0u8; NAME_MAX];
        match recv_with_fd(control.as_fd(), &mut name) {
            // The server is gone or stopping: its helpers end once their runs do.
            Ok((0, _)) => break,
            Err(e) => {
                eprintln!("stockade serve: the spawner stops: its socket: {e}");
                break;
            }
            Ok((_, None)) => {}
            Ok((n, Some(sock))) => {
                let (one_run, runtime) = (name[0] == 1, String::from_utf8_lossy(&name[1..n]).into_owned());
                if let Some(helper) = start_helper(pools, &runtime, one_run, sock, &mut nets, &mut helpers) {
                    helpers.push(helper);
                }
            }
        }
    }
    for h in &helpers {
        let _ = stockade::helper::reap(h.pidfd.as_fd());
    }
    stockade::helper::exit(0)
}

/// A helper the spawner forked: its pidfd, and the network namespace it lent it.
struct Helper {
    pidfd: OwnedFd,
    net: Option<OwnedFd>,
}

/// A helper's exit code when it ended with no process of its jail left ([`helper_exit`]).
const CLEAN: i32 = 0;

/// The empty network namespaces the spawner lends its helpers' program jails, one jail at a
/// time ([`stockade::Plan::takes_net_in_turn`]): a jail's creation and clean-up of its own cost a
/// served static program about a seventh of its CPU. A namespace comes back when its helper
/// ended clean (its jail's init reaped: every process of the jail gone) and it holds no socket;
/// otherwise it is dropped, and the kernel cleans it up as it would have.
struct Nets {
    free: Vec<OwnedFd>,
    /// This process can make them (root's service).
    can: bool,
    /// The empty one the Wasm jails share (their runners make no socket), when it was made.
    empty: Option<OwnedFd>,
}

impl Nets {
    fn lend(&mut self) -> Option<OwnedFd> {
        if let Some(net) = self.free.pop() {
            return Some(net);
        }
        if !self.can {
            return None;
        }
        match stockade::helper::make_net() {
            Ok(net) => Some(net),
            Err(e) => {
                // Said once (by root's service: no other can make one): from now on each program
                // jail creates its own, as it did before.
                self.can = false;
                if rustix::process::geteuid().is_root() {
                    eprintln!(
                        "stockade serve: the spawner cannot make network namespaces ahead ({e}): each program's jail creates its own"
                    );
                }
                None
            }
        }
    }

    fn back(&mut self, net: OwnedFd, helper_clean: bool) {
        if !helper_clean {
            return;
        }
        match stockade::helper::net_holds_no_socket(net.as_fd()) {
            Ok(true) => self.free.push(net),
            Ok(false) => {}
            Err(e) => {
                eprintln!("stockade serve: a network namespace made ahead is dropped: cannot read its sockets ({e})")
            }
        }
    }
}

/// Forks the helper of one jail of `runtime`, which answers on `sock`; or says why not there.
fn start_helper<P: RecipeSource>(
    pools: &BTreeMap<String, Arc<P>>,
    runtime: &str,
    one_run: bool,
    sock: OwnedFd,
    nets: &mut Nets,
    others: &mut [Helper],
) -> Option<Helper> {
    let recipe = match pools.get(runtime).map(|p| p.recipe_now()) {
        Some(Ok(r)) => r,
        Some(Err(why)) => return refuse(sock, &why),
        None => return refuse(sock, &format!("the spawner has no runtime {runtime}")),
    };
    // A program's jail may take a network namespace in turn; a Wasm jail shares the empty one.
    let net = (matches!(&*recipe, Recipe::Program(p) if p.takes_net_in_turn())).then(|| nets.lend()).flatten();
    let sock = std::cell::Cell::new(Some(sock));
    let forked = stockade::helper::fork_helper(|| {
        // The helper's copies of the other namespaces (free, or lent to other helpers' jails)
        // are closed: it holds its own jail's only.
        nets.free.clear();
        others.iter_mut().for_each(|h| drop(h.net.take()));
        let join = match (&net, &nets.empty) {
            (Some(lent), _) => stockade::JoinNet::InTurn(lent.as_fd()),
            (None, Some(empty)) => stockade::JoinNet::Shared(empty.as_fd()),
            (None, None) => stockade::JoinNet::Own,
        };
        helper(&recipe, one_run, sock.take(), join)
    });
    match forked {
        Ok((_, pidfd)) => Some(Helper { pidfd, net }),
        Err(e) => {
            if let Some(n) = net {
                nets.free.push(n);
            }
            refuse(sock.take()?, &format!("the spawner cannot fork a helper: {e}"))
        }
    }
}

fn refuse<T>(sock: OwnedFd, why: &str) -> Option<T> {
    let _ = handoff::write_frame(&mut UnixStream::from(sock), &Msg::Refused(why.into()), &handoff::Blobs::default());
    None
}

/// A helper's life: builds one jail (joining `net` where its plan allows), says it is ready, runs it through its gate when the server
/// sends the run (or takes it down when the server closes the socket), answers, cleans up.
fn helper(recipe: &Recipe, one_run: bool, sock: Option<OwnedFd>, net: stockade::JoinNet<'_>) -> Infallible {
    let Some(sock) = sock else { stockade::helper::exit(1) };
    let mut sock = UnixStream::from(sock);
    let say = |sock: &mut UnixStream, msg: Msg| handoff::write_frame(sock, &msg, &handoff::Blobs::default());
    // A jail's init is a copy of this helper, and a program it execs (a program's, or a runner
    // not loaded here) shares the init's memory until its exec: the code the spawner mapped
    // whole is put back in its files, so that the program's report does not count it as its own
    // resident set. (A runner that is a copy of this helper keeps it mapped.)
    if !recipe.runs_in_process()
        && let Err(e) = stockade::helper::code_back_in_files()
    {
        let _ = say(&mut sock, Msg::Refused(format!("a helper cannot map its code back: {e}")));
        match helper_exit() {}
    }
    let gate = if one_run { Gate::for_one_run() } else { Gate::new() };
    let built = gate.and_then(|gate| Ok((gate, recipe.prestart_joining(net)?)));
    let (gate, waiting) = match built {
        Ok(b) => b,
        Err(e) => {
            let _ = say(&mut sock, Msg::Refused(e.to_string()));
            match helper_exit() {}
        }
    };
    let gate = Arc::new(gate);
    let opened = sock.try_clone().and_then(|reader| {
        let g = gate.clone();
        std::thread::Builder::new().name("stockade-helper".into()).spawn(move || match read_start(&reader) {
            Ok(start) => {
                g.open(start);
                server_gone(reader)
            }
            Err(_) => g.cancel(),
        })
    });
    if opened.is_err() || say(&mut sock, Msg::Ready(waiting.net())).is_err() {
        gate.cancel();
    }
    // A panic is a bug of ours: this run is lost (its jail taken down as the helper unwinds),
    // the server is told, and goes on.
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let gated = waiting.run_gated(&gate);
        inject_panic(&gated);
        gated
    }));
    let ended = match ran {
        Ok(gated) => handoff::ended_out(gated),
        Err(payload) => {
            let why = panic_words(payload.as_ref());
            eprintln!("stockade serve: internal error: a jail's helper panicked ({why}); its run is lost");
            handoff::encode(&Msg::Panicked(why), &handoff::Blobs::default()).map(|frame| (frame, None))
        }
    };
    if let Ok((frame, cleanup)) = ended {
        let _ = std::io::Write::write_all(&mut sock, &frame);
        drop(sock);
        if cleanup.is_some() {
            std::thread::sleep(AFTER_ANSWER);
        }
        if let Some(note) = cleanup.and_then(stockade::Cleanup::done) {
            eprintln!("stockade serve: {note}");
        }
    }
    helper_exit()
}

/// Ends a helper: [`CLEAN`] when no process of its jail is left (it has no child: its jail's
/// init, reaped, took every process of the jail's PID namespace with it), so that the spawner
/// may lend its network namespace again; 2 otherwise.
fn helper_exit() -> Infallible {
    stockade::helper::exit(if stockade::helper::no_child_left() { CLEAN } else { 2 })
}

/// Waits for the end of the server's socket while the run goes on. The server holds its end
/// until this helper is done (it reads until the end of file): an end before that is the
/// server's death, and the helper ends at once; its jail goes with it (its init's parent-death
/// signal), as a jail of the server's own thread would. (A helper's own parent-death signal is
/// no tie: the kernel clears it when a jail's build changes the helper's credentials.)
fn server_gone(mut sock: UnixStream) {
    let mut buf = [0u8; 64];
    while let Ok(n) = sock.read(&mut buf)
        && n > 0
    {}
    stockade::helper::exit(1)
}

/// The run's start, read from the server (its output pipes with its first byte).
fn read_start(sock: &UnixStream) -> io::Result<stockade::Start> {
    let mut sock = sock;
    let mut lengths = [0u8; LENGTHS];
    let (n, fds) = recv_fds(sock.as_fd(), &mut lengths)?;
    if n == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    sock.read_exact(&mut lengths[n..])?;
    match handoff::read_rest(&mut sock, &lengths)? {
        (Msg::Start(wire), bytes) => handoff::start_in(*wire, &bytes, fds, sock),
        (other, _) => Err(io::Error::other(format!("the server sent {other:?}, not a run"))),
    }
}

/// [`recv_fds`] for one fd.
fn recv_with_fd(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    let (n, fds) = recv_fds(sock, buf)?;
    Ok((n, fds.into_iter().next()))
}
