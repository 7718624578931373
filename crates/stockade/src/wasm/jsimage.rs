//! A live JavaScript guest's image, in the runner. QuickJS serves its turns from a loop of its
//! own (`handover::JS_LIVE`): between two turns it waits in the runner's `fd_read` of its stdin,
//! always at the same place of that loop (its `getline`), its call stack the same each time. So
//! its interpreter between turns is its linear memory: hibernating writes the pages of it that
//! are this process's own (`image.rs`, as for Python), from inside that read; resuming starts a
//! fresh instance of the same module, and at its first read (the same place, the same stack,
//! every value that differs being in its memory: the loop's own state, its heap, its stdio
//! buffers) gives its memory the image's pages, grown to the image's size first. The guest's
//! monotonic clock goes on from the image's. A file the guest holds open cannot cross (its
//! descriptor is the runner's): an image is refused while one is (`path_open` and `fd_close`
//! are watched for it, see `p1calls.rs`). A fork's interpreter draws `Math.random` as its
//! parent's would (QuickJS has no way to seed it again): the engine forks only a JavaScript
//! session's workspace.
//!
//! Imports: image.rs, pages.rs, shared.rs, turns.rs; never store.rs, p1calls.rs or any file
//! above them.

use super::image::{self, Resumed, Trailer};
use super::pages::Memory;
use super::turns::{Account, ResumedFrom};
use std::collections::BTreeSet;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Instant;

/// A WebAssembly page.
const WASM_PAGE: usize = 64 << 10;

/// A live JavaScript guest's images: the pipe it hibernates into, the image it resumes from
/// (until it has), its clock, the files it holds open.
#[derive(Debug)]
pub(super) struct JsImages {
    hibernate: OwnedFd,
    resume: Option<(OwnedFd, Trailer)>,
    pub(super) clock: Resumed,
    /// The runs of its memory mapped from the image it resumed from (the next image holds them).
    mapped: Vec<(usize, usize)>,
    /// The descriptors it opened and has not closed.
    pub(super) opened: BTreeSet<u32>,
}

impl JsImages {
    /// The images of the fds the supervisor passed: the one to resume from read (its trailer
    /// checked) before the guest is made, so that its clock goes on from the image's.
    pub(super) fn take(fds: &super::shared::ImageFds) -> Result<JsImages, String> {
        let take = |fd: i32| crate::sys::take_inherited_fd(fd).ok_or(format!("the image's fd {fd} is not open"));
        let hibernate = take(fds.hibernate)?;
        let resume = match fds.resume {
            Some(fd) => {
                let fd = take(fd)?;
                let t = image::trailer(fd.as_fd())?;
                Some((fd, t))
            }
            None => None,
        };
        let from_ns = resume.as_ref().map_or(0, |(_, t)| t.clock_ns);
        Ok(JsImages {
            hibernate,
            resume,
            clock: Resumed { from_ns, since: Instant::now() },
            mapped: Vec::new(),
            opened: BTreeSet::new(),
        })
    }

    /// At the guest's first read: gives `memory` (of `store`) the image's interpreter, when it
    /// resumes from one. `Err` in words: the guest cannot go on.
    pub(super) fn resume(
        &mut self,
        memory: &wasmtime::Memory,
        mut store: impl wasmtime::AsContextMut,
    ) -> Result<Option<ResumedFrom>, String> {
        let Some((fd, t)) = self.resume.take() else { return Ok(None) };
        let t0 = Instant::now();
        let size = memory.data_size(&store);
        if let Some(short) = t.memory_bytes.checked_sub(size).filter(|n| *n > 0) {
            memory
                .grow(&mut store, short.div_ceil(WASM_PAGE) as u64)
                .map_err(|e| format!("cannot grow the resumed interpreter's memory to its image's: {e}"))?;
        }
        let base = memory.data_ptr(&store) as usize;
        let size = memory.data_size(&store);
        self.mapped = image::restore(&Memory::at(base), size, fd.as_fd(), &t)?;
        Ok(Some(ResumedFrom {
            image_pages: t.pages(),
            memory_bytes: t.memory_bytes,
            restore_ms: t0.elapsed().as_secs_f64() * 1000.0,
        }))
    }

    /// Writes the image of the guest's memory (`base`, `size` bytes now) to its pipe, unless it
    /// holds a file open; what it says on the summary channel. `Err` when the image failed once
    /// begun (the pipe holds part of one): the guest ends.
    pub(super) fn hibernate(&self, base: usize, size: usize) -> Result<Account, String> {
        let t0 = Instant::now();
        let out = self.hibernate.as_fd();
        if !self.opened.is_empty() {
            image::none(out);
            return Ok(Account::NotHibernated {
                why: format!(
                    "it holds {} file(s) open (std.open, os.open or a directory it reads), which cannot cross a hibernation: close them",
                    self.opened.len()
                ),
            });
        }
        let clock_ns =
            self.clock.from_ns.saturating_add(u64::try_from(self.clock.since.elapsed().as_nanos()).unwrap_or(0));
        let (t, bytes) = image::dump(&Memory::at(base), size, out, clock_ns, 0, &self.mapped)?;
        Ok(Account::Hibernated {
            image_bytes: bytes,
            image_pages: t.pages(),
            memory_bytes: t.memory_bytes,
            write_ms: t0.elapsed().as_secs_f64() * 1000.0,
        })
    }
}
