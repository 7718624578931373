//! The runner's side of a jail that serves turns (a live session's interpreter; the supervisor's
//! side is [`crate::TurnEnd::Account`]). Each turn's frame ([`crate::handover::turn_frame`])
//! comes on the runner's stdin, which the guest never reads: the runner reads it, gives the guest
//! the turn, and says on its summary channel (fd 3, which the guest cannot reach: its WASI table
//! holds no host fd) when the guest's turn returned, with the turn's figures. Never bytes of the
//! guest's: the Python guest's turn returned when its `turn` export returns
//! (`python::python_turns`); the JavaScript guest's when it reads its stdin again with the
//! turn's bytes all read (its stdin is the runner's copy of the frame, see
//! `p1calls::js_turn_bytes`). A Wasm guest has no thread: between turns it waits in the runner,
//! and nothing of it runs.
//!
//! Imports: shared.rs, limits.rs, mod.rs; never store.rs, p1calls.rs or any file above them.

use serde::{Deserialize, Serialize};
use std::time::Instant;

/// What the runner says on its summary channel of a guest that serves turns, one line each
/// (before its last line, its [`super::shared::Summary`], when it ends).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Account {
    /// The guest is loaded and instantiated (and, resumed, given its image back), and waits
    /// for its first turn.
    Ready {
        load_ms: f64,
        instantiate_ms: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resumed: Option<ResumedFrom>,
    },
    /// The guest's image was written (a hibernation's frame): its size, its pages, its memory's
    /// size, the time it took. The guest waits for its next turn as before.
    #[serde(rename_all = "kebab-case")]
    Hibernated { image_bytes: u64, image_pages: usize, memory_bytes: usize, write_ms: f64 },
    /// No image was written, and why. The guest waits as before.
    NotHibernated { why: String },
    /// A turn returned: its status, and what it used of the guest's limits.
    #[serde(rename_all = "kebab-case")]
    Turn {
        status: i32,
        fuel_consumed: Option<u64>,
        memory_peak_bytes: u64,
        memory_limit_hit: bool,
        run_ms: f64,
        /// What the turn's code gave back (see [`crate::Report::give`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        given: Option<String>,
    },
    /// A batch's run ended (see `batch.rs`): its process's account, as a one-off run's.
    Ran(Box<super::shared::Summary>),
}

/// What a resumed guest says of its image as it is ready.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ResumedFrom {
    pub image_pages: usize,
    pub memory_bytes: usize,
    pub restore_ms: f64,
}

impl Account {
    /// A turn's account: its status, the fuel it used (`fuel` at its start, `left` after it),
    /// the guest's memory as its `limits` saw it, its time since `started`, what its code gave
    /// back (`given`, taken).
    pub(super) fn turn(
        status: i32,
        fuel: Option<u64>,
        left: Option<u64>,
        limits: &super::limits::Limits,
        started: Instant,
        given: &mut Vec<u8>,
    ) -> Account {
        let given = std::mem::take(given);
        Account::Turn {
            status,
            fuel_consumed: fuel.map(|f| f.saturating_sub(left.unwrap_or(0))),
            memory_peak_bytes: limits.memory_peak() as u64,
            memory_limit_hit: limits.memory_limit_hit(),
            run_ms: started.elapsed().as_secs_f64() * 1000.0,
            given: (!given.is_empty()).then(|| String::from_utf8_lossy(&given).into_owned()),
        }
    }

    /// One line of the summary channel read back (`None`: it is not a turn's account).
    pub fn read(line: &str) -> Option<Account> {
        serde_json::from_str(line.trim()).ok()
    }
}

impl super::WasmPrepared<'_> {
    /// Releases a jail whose guest serves turns ([`super::GuestCode::PythonTurns`],
    /// [`super::GuestCode::JsTurns`]; see [`crate::Prepared::run_turns`]): each turn's report carries the
    /// runner's account of it (its fuel, its guest's memory, its run time), and the end the
    /// runner's summary.
    pub fn run_turns(
        self,
        start: crate::Start,
        next: &mut dyn FnMut(crate::Turned) -> Option<crate::Turn>,
    ) -> Result<crate::Gated, crate::Error> {
        let wasm = self.wasm;
        let mut folded = |turned: crate::Turned| {
            let turned = match turned {
                crate::Turned::Returned { mut report, account } => {
                    if let Some(Account::Turn { fuel_consumed, memory_peak_bytes, run_ms, given, .. }) =
                        last_account(&account)
                    {
                        if let Some(given) = given {
                            report.give(given.as_bytes());
                        }
                        report.fuel_consumed = fuel_consumed;
                        report.wasm_memory_peak_bytes = Some(memory_peak_bytes);
                        report.wasm_time = Some(crate::report::WasmTime {
                            load_ms: 0.0,
                            compile_ms: None,
                            instantiate_ms: 0.0,
                            run_ms,
                        });
                    }
                    if let Some(Account::Ran(s)) = last_account(&account) {
                        super::figures(&mut report, &s);
                        if let Some(given) = &s.given {
                            report.give(given.as_bytes());
                        }
                    }
                    crate::Turned::Returned { report, account }
                }
                other => other,
            };
            next(turned)
        };
        Ok(wasm.settled(self.prepared.run_turns(start, &turn_told, &mut folded, super::guest_of)?))
    }
}

/// The last turn account of a runner's summary channel's bytes.
pub fn last_account(bytes: &[u8]) -> Option<Account> {
    String::from_utf8_lossy(bytes).lines().rev().find_map(Account::read)
}

/// What a runner's account of a turn says (`None`: it is not one, the runner is ending).
fn turn_told(bytes: &[u8]) -> Option<crate::TurnTold> {
    match last_account(bytes)? {
        Account::Ready { .. } | Account::Hibernated { .. } | Account::NotHibernated { .. } => {
            Some(crate::TurnTold { status: 0, guest: None, given: None })
        }
        Account::Ran(s) => {
            let guest = super::guest_end(&s);
            Some(crate::TurnTold { status: guest.exit_code(), guest: Some(guest), given: None })
        }
        Account::Turn { status, memory_limit_hit, .. } => Some(crate::TurnTold {
            status,
            guest: Some(crate::report::GuestEnd::Exited { code: status, memory_limit_hit }),
            given: None,
        }),
    }
}

/// Says `account` on the summary channel.
pub(super) fn tell(account: &Account) {
    let line = format!("{}\n", serde_json::to_string(account).unwrap_or_default());
    let mut rest = line.as_bytes();
    while !rest.is_empty() {
        match crate::sys::write(super::shared::SUMMARY_FD, rest) {
            Ok(n) if n > 0 => rest = &rest[n..],
            _ => return,
        }
    }
}

/// One turn's frame, as it came: its head, its code and its stdin, its fuel (`None`: the
/// session's).
pub(super) struct Frame {
    pub(super) bytes: Vec<u8>,
    code_len: usize,
    pub(super) fuel: Option<u64>,
}

impl Frame {
    pub(super) fn code(&self) -> &str {
        let head = crate::handover::TURN_HEAD_LEN;
        std::str::from_utf8(&self.bytes[head..head + self.code_len]).unwrap_or("")
    }

    pub(super) fn stdin(&self) -> &[u8] {
        &self.bytes[crate::handover::TURN_HEAD_LEN + self.code_len..]
    }
}

/// What comes next on the runner's stdin.
pub(super) enum Next {
    Turn(Frame),
    /// Write the guest's image ([`crate::handover::HIBERNATE_FRAME`]).
    Hibernate,
}

/// The next frame from the runner's stdin (blocking); `None` at its end, before a byte.
pub(super) fn next_frame() -> Result<Option<Next>, String> {
    let mut head = vec![0u8; crate::handover::TURN_HEAD_LEN];
    if !exact(&mut head)? {
        return Ok(None);
    }
    if head == crate::handover::HIBERNATE_FRAME {
        return Ok(Some(Next::Hibernate));
    }
    let (n, k, fuel) = crate::handover::parse_turn_head(&head).ok_or("a turn's frame has no head")?;
    let mut bytes = head;
    bytes.resize(crate::handover::TURN_HEAD_LEN + n + k, 0);
    if !exact(&mut bytes[crate::handover::TURN_HEAD_LEN..])? {
        return Err("a turn's frame ended early".into());
    }
    if std::str::from_utf8(&bytes[crate::handover::TURN_HEAD_LEN..crate::handover::TURN_HEAD_LEN + n]).is_err() {
        return Err("a turn's code is not UTF-8".into());
    }
    Ok(Some(Next::Turn(Frame { bytes, code_len: n, fuel })))
}

/// Fills `buf` from fd 0: `false` at its end before the first byte, an error after it.
pub(super) fn exact(buf: &mut [u8]) -> Result<bool, String> {
    let mut got = 0;
    while got < buf.len() {
        match crate::sys::read(0, &mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err("the runner's stdin ended in a turn's frame".into()),
            Ok(k) => got += k,
            Err(crate::sys::Errno(libc::EINTR)) => {}
            Err(e) => return Err(format!("cannot read a turn's frame: {e}")),
        }
    }
    Ok(true)
}

/// The fuel a turn runs with: its own when it asks less than the session's, else the session's
/// (`None`: the guest is not fuel-metered).
pub(super) fn turn_fuel(session: Option<u64>, asked: Option<u64>) -> Option<u64> {
    session.map(|s| asked.map_or(s, |a| a.min(s)))
}

/// The JavaScript guest's turn: the frame's bytes it has not read yet, what it said of its
/// status, and what the turn's account needs.
#[derive(Debug, Default)]
pub(super) struct TurnIo {
    pub(super) pending: Vec<u8>,
    pub(super) at: usize,
    pub(super) in_turn: bool,
    pub(super) status: Vec<u8>,
    pub(super) started: Option<Instant>,
    pub(super) fuel: Option<u64>,
    /// The session's fuel (`None`: not fuel-metered).
    pub(super) session_fuel: Option<u64>,
    /// Said at the guest's first read: it is ready.
    pub(super) ready: Option<Account>,
}

impl TurnIo {
    /// A guest's turns, fuel-metered with `session_fuel` a turn when it is.
    pub(super) fn new(session_fuel: Option<u64>) -> TurnIo {
        TurnIo { session_fuel, ..TurnIo::default() }
    }

    /// The guest wrote its status (its last line is the turn's).
    pub(super) fn said(&mut self, bytes: &[u8]) {
        self.status.extend_from_slice(bytes);
        // Only the end is kept: a line is a few bytes.
        if self.status.len() > 64 {
            self.status.drain(..self.status.len() - 64);
        }
    }

    /// Copies what is left of the turn's bytes into `buf`: how many.
    pub(super) fn give(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.pending.len() - self.at);
        buf[..n].copy_from_slice(&self.pending[self.at..self.at + n]);
        self.at += n;
        n
    }

    pub(super) fn status(&self) -> i32 {
        let text = String::from_utf8_lossy(&self.status);
        text.lines().rev().find_map(|l| l.trim().parse().ok()).unwrap_or(1)
    }
}
