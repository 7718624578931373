//! Lists decoded no further than their caps: a body of a million empty arguments stops at the
//! cap's first one past it, before it costs memory (the caps of the [`decode`](super::decode) under way).

use super::FileBody;
use serde::de::{Deserialize, Deserializer, Error, SeqAccess, Visitor};
use std::cell::Cell;

thread_local! {
    /// `argv-max-count`, `files-max-count`, `return-patterns-max`, `batch-max-runs` of the decode
    /// under way.
    pub(super) static CAPS: Cell<[usize; 4]> = const { Cell::new([usize::MAX; 4]) };
}

struct Capped<T> {
    max: usize,
    what: &'static str,
    key: &'static str,
    _t: std::marker::PhantomData<T>,
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for Capped<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a list of at most {} {}", self.max, self.what)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(self.max).min(64));
        while let Some(item) = seq.next_element()? {
            if out.len() == self.max {
                let key = if self.key.is_empty() { String::new() } else { format!(" (requests.{})", self.key) };
                return Err(A::Error::custom(format!("more than {} {}{key}", self.max, self.what)));
            }
            out.push(item);
        }
        Ok(out)
    }
}

fn capped<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
    which: usize,
    what: &'static str,
    key: &'static str,
) -> Result<Vec<T>, D::Error> {
    let max = CAPS.with(|c| c.get()[which]);
    d.deserialize_seq(Capped { max, what, key, _t: std::marker::PhantomData })
}

pub(super) fn argv<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    capped(d, 0, "arguments", "argv-max-count")
}

pub(super) fn files<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<FileBody>, D::Error> {
    capped(d, 1, "files", "files-max-count")
}

pub(super) fn patterns<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    capped(d, 2, "patterns", "return-patterns-max")
}

pub(super) fn batch_runs<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    capped(d, 3, "runs", "batch-max-runs")
}

/// At most [`super::TOOLS_MAX`] tools (a fixed bound, not a server's key).
pub(super) fn tools<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<super::ToolBody>, D::Error> {
    let (max, what) = (super::TOOLS_MAX, "tools");
    d.deserialize_seq(Capped { max, what, key: "", _t: std::marker::PhantomData })
}

/// At most [`crate::policy::egress::MAX_EGRESS_RULES`] hosts (a fixed bound, as a policy's).
pub(super) fn egress<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    let (max, what) = (crate::policy::egress::MAX_EGRESS_RULES, "hosts");
    d.deserialize_seq(Capped { max, what, key: "", _t: std::marker::PhantomData }).map(Some)
}
