//! Sessions among replicas (`sessions.replica-lease-ms`): a server acts on a session only while
//! it holds the session's lease (`state/lease.rs`). What it remembers of a session it does not
//! hold is what it last read: taking the lease reads the session again from its meta when
//! another server held it since. A held session is renewed every quarter of the lease; one
//! between runs with no interpreter is let go once it was not used for a lease's length, and at
//! once when another server wants it (one with an interpreter is hibernated first, by the
//! engine). A server alone holds every session, always.

use super::{Owner, Session, Sessions, disk, same_owner};
use crate::live::Interp;
use crate::state::{self, Taken};
use std::time::{Duration, Instant};
use stockade::api::{ApiError, ErrorCode};

/// This server's hold on a session.
#[derive(Debug, Clone, Copy)]
pub(super) struct Held {
    pub(super) epoch: u64,
    /// When it was taken or last asked for by a request of this server's.
    claimed: Instant,
}

impl Held {
    /// A server alone's hold: no lease on disk.
    pub(super) fn alone() -> Held {
        Held { epoch: 0, claimed: Instant::now() }
    }
}

/// How the replicas' leases go, for this server.
#[derive(Debug)]
pub(super) struct Leases {
    /// This server's name ([`state::replica_name`]).
    me: String,
    length: Duration,
    /// When the last round of renewals was over.
    renewed: std::sync::Mutex<Instant>,
    last_sweep: std::sync::Mutex<Instant>,
}

impl Leases {
    pub(super) fn new(length_ms: u64) -> Leases {
        let long_ago = Instant::now().checked_sub(Duration::from_secs(3600)).unwrap_or_else(Instant::now);
        Leases {
            me: state::replica_name(),
            length: Duration::from_millis(length_ms),
            renewed: std::sync::Mutex::new(Instant::now()),
            last_sweep: std::sync::Mutex::new(long_ago),
        }
    }

    /// Whether this server's leases were renewed less than half a lease ago: a server whose
    /// renewals stalled (it was stopped, or starved) acts on no session until they go on.
    fn fresh(&self) -> bool {
        self.renewed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).elapsed() < self.length / 2
    }

    /// Whether `every` passed since `last` (which it then becomes).
    fn due(last: &std::sync::Mutex<Instant>, every: Duration) -> bool {
        let mut l = last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let due = l.elapsed() >= every;
        if due {
            *l = Instant::now();
        }
        due
    }
}

/// What asking for a session's lease came to.
#[derive(Debug)]
pub enum Claim {
    /// This server holds it (or there is no such session of this owner: the request is then told
    /// as it is without replicas).
    Mine,
    /// Another server holds it, for `left` at most unless it renews it.
    Elsewhere { holder: String, left: Duration },
}

/// What a tick of the leases leaves the engine to do.
#[derive(Debug, Default)]
pub struct Tick {
    /// Sessions another server wants whose interpreter this one holds: hibernated, then let go.
    pub handover: Vec<String>,
    /// Interpreters of sessions whose lease this server lost: their jails end as they drop.
    pub lost: Vec<Interp>,
}

impl Sessions {
    /// The replicas' lease (`None`: a server alone).
    pub fn lease_length(&self) -> Option<Duration> {
        self.leases.as_ref().map(|l| l.length)
    }

    /// The hold a session made or found here starts with: a server alone's, or none.
    pub(super) fn first_hold(&self) -> Option<Held> {
        self.leases.is_none().then(Held::alone)
    }

    /// The lease of session `id`, made by this server just now (500 naming the state directory
    /// when it cannot be taken).
    pub(super) fn first_lease(&self, id: &str) -> Result<Held, ApiError> {
        let Some(l) = &self.leases else { return Ok(Held::alone()) };
        match self.dir.take_lease(id, &l.me, l.length) {
            Ok(Taken::Mine { epoch, .. }) => Ok(Held { epoch, claimed: Instant::now() }),
            Ok(Taken::Held { holder, .. }) => Err(super::internal(&format!("a new session {id} is held by {holder}"))),
            Err(e) => Err(self.disk_error(id, &e)),
        }
    }

    /// Takes session `id`'s lease for this server when another does not hold it, reading the
    /// session again when another held it since.
    pub fn try_claim(&self, id: &str, owner: Owner) -> Result<Claim, ApiError> {
        let Some(l) = &self.leases else { return Ok(Claim::Mine) };
        if !state::valid_id(id) {
            return Ok(Claim::Mine);
        }
        let known = {
            let mut st = self.lock();
            match st.open.get_mut(id) {
                Some(s) if !same_owner(&s.owner, &owner) => return Ok(Claim::Mine),
                Some(s) => match &mut s.lease {
                    Some(h) => {
                        h.claimed = Instant::now();
                        return Ok(Claim::Mine);
                    }
                    None => true,
                },
                None => false,
            }
        };
        if !known {
            // Made by another server since this one read the directory.
            match disk::load_one(&self.dir, id) {
                Ok(s) if same_owner(&s.owner, &owner) => {
                    let mut st = self.lock();
                    st.open.entry(id.to_string()).or_insert(s);
                    self.metrics.sessions_open(st.open.len());
                }
                _ => return Ok(Claim::Mine),
            }
        }
        let taken = match self.dir.take_lease(id, &l.me, l.length) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.forget(id);
                return Ok(Claim::Mine);
            }
            Err(e) => return Err(self.disk_error(id, &e)),
            Ok(t) => t,
        };
        let (epoch, changed) = match taken {
            Taken::Held { holder, left } => return Ok(Claim::Elsewhere { holder, left }),
            Taken::Mine { epoch, changed } => (epoch, changed),
        };
        let fresh = changed.then(|| disk::load_one(&self.dir, id));
        let mut st = self.lock();
        match fresh {
            Some(Ok(s)) => {
                st.open.insert(id.to_string(), s);
            }
            Some(Err(why)) => {
                st.open.remove(id);
                drop(st);
                self.dir.release_lease(id, epoch);
                return Err(super::internal(&format!("session {id} is not served: {why}")));
            }
            None => {}
        }
        match st.open.get_mut(id) {
            Some(s) => s.lease = Some(Held { epoch, claimed: Instant::now() }),
            None => self.dir.release_lease(id, epoch),
        }
        Ok(Claim::Mine)
    }

    /// 409 when this server does not hold session `s` (`id`): another may act on it.
    pub(super) fn held(&self, s: &Session, id: &str) -> Result<(), ApiError> {
        match s.lease {
            Some(_) if self.leases.as_ref().is_none_or(Leases::fresh) => Ok(()),
            _ => Err(ApiError::new(
                ErrorCode::SessionBusy,
                format!("session {id} was taken by another replica meanwhile: try again"),
            )
            .retry_after(1)),
        }
    }

    /// Reads session `id` again from its meta when this server does not hold it (what another
    /// made of it since), or learns that it is gone.
    pub fn refresh(&self, id: &str) {
        if self.leases.is_none() || !state::valid_id(id) {
            return;
        }
        if self.lock().open.get(id).is_some_and(|s| s.lease.is_some()) {
            return;
        }
        match disk::load_one(&self.dir, id) {
            Ok(s) => {
                let mut st = self.lock();
                if st.open.get(id).is_none_or(|o| o.lease.is_none()) {
                    st.open.insert(id.to_string(), s);
                    self.metrics.sessions_open(st.open.len());
                }
            }
            Err(_) if !self.dir.exists(id) => self.forget(id),
            Err(_) => {}
        }
    }

    /// Drops what this server remembers of session `id`, gone from the directory.
    fn forget(&self, id: &str) {
        let mut st = self.lock();
        if st.open.remove(id).is_some() {
            self.metrics.sessions_open(st.open.len());
        }
    }

    /// Whether a change of session `id` made under lease `epoch` may be written: this server
    /// holds it still (always, for a server alone).
    pub(super) fn may_write(&self, id: &str, epoch: Option<u64>) -> bool {
        match &self.leases {
            None => true,
            Some(l) => l.fresh() && epoch.is_some_and(|e| self.dir.holds_lease(id, e)),
        }
    }

    /// Renews the leases this server holds (the engine calls it every quarter of their length),
    /// lets go of those it need not hold, and, every few leases, reads the sessions other
    /// servers made or ended.
    pub fn lease_tick(&self) -> Tick {
        let mut tick = Tick::default();
        let Some(l) = &self.leases else { return tick };
        let started = Instant::now();
        let held: Vec<(String, u64)> =
            self.lock().open.iter().filter_map(|(id, s)| s.lease.map(|h| (id.clone(), h.epoch))).collect();
        let renewed: Vec<(String, u64, bool, bool)> = held
            .into_iter()
            .map(|(id, epoch)| {
                let ok = self.dir.renew_lease(&id, epoch);
                let wanted = ok && self.dir.wanted(&id);
                (id, epoch, ok, wanted)
            })
            .collect();
        let mut release = Vec::new();
        let mut st = self.lock();
        for (id, epoch, ok, wanted) in renewed {
            let Some(s) = st.open.get_mut(&id).filter(|s| s.lease.is_some_and(|h| h.epoch == epoch)) else { continue };
            if !ok {
                s.lease = None;
                tick.lost.extend(s.interp.take());
                continue;
            }
            let unused = s.lease.is_some_and(|h| h.claimed.elapsed() >= l.length)
                && super::unix_ms().saturating_sub(s.last_used_unix_ms) >= super::millis(l.length);
            if s.running.is_none() && s.interp.is_none() && (wanted || unused) {
                s.lease = None;
                release.push((id, epoch));
            } else if wanted && s.running.is_none() {
                tick.handover.push(id);
            }
        }
        // An interpreter of a session not held (its lease lost while it ran) goes too.
        for s in st.open.values_mut().filter(|s| s.lease.is_none()) {
            tick.lost.extend(s.interp.take());
        }
        drop(st);
        *l.renewed.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = started;
        for (id, epoch) in release {
            self.dir.release_lease(&id, epoch);
        }
        if Leases::due(&l.last_sweep, l.length * 4) {
            self.sweep();
        }
        tick
    }

    /// Lets go of session `id`'s lease now (it was hibernated: another server may resume it).
    pub(super) fn let_go(&self, id: &str) {
        if self.leases.is_none() {
            return;
        }
        let epoch = {
            let mut st = self.lock();
            let Some(s) = st.open.get_mut(id).filter(|s| s.hibernated()) else { return };
            s.lease.take().map(|h| h.epoch)
        };
        if let Some(e) = epoch {
            self.dir.release_lease(id, e);
        }
    }

    /// Lets go of every lease (a draining server, its interpreters hibernated).
    pub(super) fn let_all_go(&self) {
        if self.leases.is_none() {
            return;
        }
        let held: Vec<(String, u64)> =
            self.lock().open.iter_mut().filter_map(|(id, s)| s.lease.take().map(|h| (id.clone(), h.epoch))).collect();
        for (id, epoch) in held {
            self.dir.release_lease(&id, epoch);
        }
    }

    /// Reads the sessions other servers made since, forgets those they ended, and takes those
    /// whose clocks ran out by what this server last read (the reaper ends them once read again).
    fn sweep(&self) {
        let Ok(ids) = self.dir.ids() else { return };
        let on_disk: std::collections::HashSet<&String> = ids.iter().collect();
        let (unknown, gone, expired) = {
            let st = self.lock();
            let now = super::unix_ms();
            let unknown: Vec<String> = ids.iter().filter(|id| !st.open.contains_key(*id)).cloned().collect();
            let gone: Vec<String> = st
                .open
                .iter()
                .filter(|(id, s)| s.lease.is_none() && !on_disk.contains(id))
                .map(|(id, _)| id.clone())
                .collect();
            let expired: Vec<(String, Owner)> = st
                .open
                .iter()
                .filter(|(_, s)| s.lease.is_none() && s.expires() <= now)
                .map(|(id, s)| (id.clone(), s.owner))
                .collect();
            (unknown, gone, expired)
        };
        for id in gone {
            self.forget(&id);
        }
        for id in unknown {
            if let Ok(s) = disk::load_one(&self.dir, &id) {
                let mut st = self.lock();
                st.open.entry(id).or_insert(s);
                self.metrics.sessions_open(st.open.len());
            }
        }
        for (id, owner) in expired {
            let _ = self.try_claim(&id, owner);
        }
    }
}
