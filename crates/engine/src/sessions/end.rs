//! A session's end: deleted, past one of its clocks ([`Sessions::reap`]), or let go by a
//! draining server ([`Sessions::release_all`]); an ended session is remembered for a while to
//! tell its owner why.

use super::{
    ENDED_KEPT, ENDED_MAX, End, Ended, Hash, LOST_IN_DRAIN, Owner, Save, Sessions, State, find, millis, unix_ms,
};
use crate::metrics::Metrics;
use std::collections::HashSet;
use std::time::Instant;
use stockade::api::ApiError;

impl Sessions {
    /// Ends a session and removes its files (a run in progress goes on to its end, its
    /// workspace not kept).
    pub fn delete(&self, id: &str, owner: Owner) -> Result<(), ApiError> {
        let mut st = self.lock();
        let s = find(&mut st, id, owner)?;
        self.held(s, id)?;
        st.open.remove(id);
        end(&mut st, id, owner, End::Deleted, &self.metrics);
        drop(st);
        self.dir.remove(id).map_err(|e| self.disk_error(id, &e))
    }

    /// Ends every session past one of its clocks (not while it runs: its run's own wall limit
    /// ends that, and the session after it). Returns how many ended.
    pub fn reap(&self) -> usize {
        let mut st = self.lock();
        let now = unix_ms();
        let expired: Vec<(String, Owner, End)> = st
            .open
            .iter()
            .filter(|(_, s)| s.running.is_none() && s.lease.is_some())
            .filter_map(|(id, s)| {
                let why = if now >= s.created_unix_ms.saturating_add(millis(s.spec.lifetime)) {
                    End::Lifetime
                } else if now >= s.last_used_unix_ms.saturating_add(millis(s.spec.idle)) {
                    End::Idle
                } else {
                    return None;
                };
                Some((id.clone(), s.owner, why))
            })
            .collect();
        for (id, owner, why) in &expired {
            st.open.remove(id);
            end(&mut st, id, *owner, *why, &self.metrics);
        }
        let cutoff = Instant::now().checked_sub(ENDED_KEPT);
        while st.ended.front().is_some_and(|e| cutoff.is_some_and(|c| e.at < c)) {
            st.ended.pop_front();
        }
        let garbage: Vec<(String, HashSet<Hash>)> = st
            .open
            .iter_mut()
            .filter(|(_, s)| s.gc && s.running.is_none() && s.lease.is_some())
            .map(|(id, s)| {
                s.gc = false;
                (id.clone(), s.blobs())
            })
            .collect();
        drop(st);
        for (id, _, _) in &expired {
            let _ = self.dir.remove(id);
        }
        for (id, keep) in garbage {
            self.dir.reap_garbage(&id, &keep);
        }
        expired.len()
    }

    /// A draining server lets go of its sessions: their live interpreters go now (the next run
    /// of each says why), and every session's clocks are written, so that a server started
    /// again on the state directory has each as this one left it.
    pub fn release_all(&self) {
        let mut st = self.lock();
        let saves: Vec<Save> = st
            .open
            .iter_mut()
            .map(|(id, s)| {
                if s.interp.take().is_some() {
                    s.lost = Some(LOST_IN_DRAIN.to_string());
                }
                s.changed(id)
            })
            .collect();
        drop(st);
        for save in saves {
            let _ = self.write(save);
        }
        self.let_all_go();
    }
}

pub(super) fn ended_why(why: End) -> &'static str {
    match why {
        End::Idle => "its idle timeout passed with no run or file operation (idle-timeout-ms)",
        End::Lifetime => "its lifetime was over (max-lifetime-ms)",
        End::Deleted => "it was deleted",
    }
}

pub(super) fn end(st: &mut State, id: &str, owner: Owner, why: End, metrics: &Metrics) {
    if st.ended.len() >= ENDED_MAX {
        st.ended.pop_front();
    }
    st.ended.push_back(Ended { id: id.to_string(), owner, why, at: Instant::now() });
    metrics.session_ended(why.as_str(), st.open.len());
}
