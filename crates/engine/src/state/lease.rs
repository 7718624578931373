//! Leases: which of the servers on one state directory (`sessions.replica-lease-ms`) holds a
//! session. A session's lease is a file of its directory, `lease.<epoch>`, holding its holder's
//! name; its mtime is when the holder last renewed it. A server takes a session by making the
//! next epoch's file (`O_EXCL`: of two servers that try at once, one makes it), once the last
//! one's holder let it go (its mtime set to the epoch of 1970) or stopped renewing it for the
//! lease's length; a holder that finds a later epoch than its own has lost the session. A server
//! that wants a session another holds says so (`want`): the holder lets it go once the session
//! is between runs (its interpreter hibernated first).
//!
//! Time is the fence: a holder renews its lease every quarter of its length and acts on a
//! session only while its last renewal is younger than half of it, so the replicas' clocks must
//! agree within a quarter of the lease (NTP does far better).

use super::{StateDir, TMP, hex, random16};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, SystemTime};

const LEASE: &str = "lease.";
const WANT: &str = "want";

/// A session's lease as its directory holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub epoch: u64,
    pub holder: String,
    /// When it was last renewed (the epoch of 1970 once let go).
    pub renewed: SystemTime,
}

/// What taking a session's lease came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// It is this server's, at `epoch`; `changed`: another server held it since this one did
    /// (what this server remembers of the session is not what is on disk).
    Mine { epoch: u64, changed: bool },
    /// Another server holds it, for `left` at most unless it renews it.
    Held { holder: String, left: Duration },
}

impl StateDir {
    /// Session `id`'s lease (`None`: it has never had one). `Err(NotFound)`: no such session.
    pub fn lease(&self, id: &str) -> io::Result<Option<Lease>> {
        let dir = self.session(id);
        let mut last: Option<u64> = None;
        for e in fs::read_dir(&dir)? {
            let name = e?.file_name();
            let epoch = name.to_str().and_then(|n| n.strip_prefix(LEASE)).and_then(|n| n.parse::<u64>().ok());
            if let Some(n) = epoch {
                last = Some(last.map_or(n, |l| l.max(n)));
            }
        }
        let Some(epoch) = last else { return Ok(None) };
        let path = dir.join(format!("{LEASE}{epoch}"));
        let mut holder = String::new();
        let f = match File::open(&path) {
            Ok(f) => f,
            // Made and gone meanwhile: a later one is there.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return self.lease(id),
            Err(e) => return Err(e),
        };
        let renewed = f.metadata()?.modified()?;
        f.take(256).read_to_string(&mut holder)?;
        Ok(Some(Lease { epoch, holder, renewed }))
    }

    /// Takes session `id`'s lease for `me`, unless another holds it (renewed less than `length`
    /// ago). `Err(NotFound)`: no such session.
    pub fn take_lease(&self, id: &str, me: &str, length: Duration) -> io::Result<Taken> {
        let now = SystemTime::now();
        let last = self.lease(id)?;
        if let Some(l) = &last
            && l.holder != me
        {
            let age = now.duration_since(l.renewed).unwrap_or(Duration::ZERO);
            if age < length {
                return Ok(Taken::Held { holder: l.holder.clone(), left: length - age });
            }
        }
        let epoch = last.as_ref().map_or(1, |l| l.epoch + 1);
        let dir = self.session(id);
        // Written beside it and linked into place: the name appears with its holder in it.
        let tmp = dir.join(format!("{TMP}{}", hex(&random16())));
        let made = (|| {
            let mut f = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
            f.write_all(me.as_bytes())?;
            fs::hard_link(&tmp, dir.join(format!("{LEASE}{epoch}")))
        })();
        let _ = fs::remove_file(&tmp);
        match made {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let holder = self.lease(id)?.map(|l| l.holder).unwrap_or_default();
                return Ok(Taken::Held { holder, left: length });
            }
            Err(e) => return Err(e),
        }
        if let Some(l) = &last {
            let _ = fs::remove_file(dir.join(format!("{LEASE}{}", l.epoch)));
        }
        let _ = fs::remove_file(dir.join(WANT));
        Ok(Taken::Mine { epoch, changed: last.is_some_and(|l| l.holder != me) })
    }

    /// Whether session `id`'s lease is still `epoch` (no later one was taken; it is there).
    pub fn holds_lease(&self, id: &str, epoch: u64) -> bool {
        let dir = self.session(id);
        dir.join(format!("{LEASE}{epoch}")).exists() && !dir.join(format!("{LEASE}{}", epoch + 1)).exists()
    }

    /// Renews session `id`'s lease `epoch`: `false` when it is no longer this server's.
    pub fn renew_lease(&self, id: &str, epoch: u64) -> bool {
        self.holds_lease(id, epoch) && self.stamp_lease(id, epoch, SystemTime::now())
    }

    /// Lets session `id`'s lease `epoch` go: another server may take it at once.
    pub fn release_lease(&self, id: &str, epoch: u64) {
        if self.holds_lease(id, epoch) {
            self.stamp_lease(id, epoch, SystemTime::UNIX_EPOCH);
        }
    }

    fn stamp_lease(&self, id: &str, epoch: u64, at: SystemTime) -> bool {
        File::open(self.session(id).join(format!("{LEASE}{epoch}"))).and_then(|f| f.set_modified(at)).is_ok()
    }

    /// Says that this server wants session `id`, which another holds.
    pub fn want(&self, id: &str) {
        let path = self.session(id).join(WANT);
        let _ = OpenOptions::new().write(true).create(true).truncate(false).mode(0o600).open(&path);
        let _ = File::open(&path).and_then(|f| f.set_modified(SystemTime::now()));
    }

    /// Whether another server wants session `id` (said since this server took it).
    pub fn wanted(&self, id: &str) -> bool {
        self.session(id).join(WANT).exists()
    }
}

/// This server's name among the replicas: its host, its pid and 32 random bits (a server
/// started again is another).
pub fn replica_name() -> String {
    let host = rustix::system::uname().nodename().to_string_lossy().into_owned();
    format!("{host}:{}:{}", std::process::id(), hex(&random16()[..4]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_goes_to_one_server_at_a_time() {
        let d = StateDir::temporary().expect("state");
        let id = "s-0123456789abcdef0123456789abcdef";
        d.create(id).expect("create");
        let long = Duration::from_secs(60);
        assert_eq!(d.take_lease(id, "a", long).expect("a"), Taken::Mine { epoch: 1, changed: false });
        assert!(matches!(d.take_lease(id, "b", long).expect("b"), Taken::Held { holder, .. } if holder == "a"));
        assert!(d.renew_lease(id, 1));
        d.release_lease(id, 1);
        assert_eq!(d.take_lease(id, "b", long).expect("b"), Taken::Mine { epoch: 2, changed: true });
        assert!(!d.renew_lease(id, 1), "a lost it");
        assert!(d.holds_lease(id, 2));
        // b stops renewing: once its lease lapsed, a takes it.
        assert_eq!(d.take_lease(id, "a", Duration::ZERO).expect("a"), Taken::Mine { epoch: 3, changed: true });
        assert_eq!(
            d.take_lease("s-00000000000000000000000000000000", "a", long).map_err(|e| e.kind()),
            Err(io::ErrorKind::NotFound)
        );
    }
}
