//! The guest's stdin in the runner: the runner's fd 0, read on the guest's own thread, and the
//! time of its first read (where the clock of a guest waiting for its code starts); and the
//! runner's fd 0 as a file of its own ([`stdin_file`]).
//!
//! Imports: no file of `crates/stockade/src/wasm/`.

use std::time::Instant;

/// When the guest's first read of its stdin returned (see [`GuestStdin`]).
pub(super) static STDIN_STARTED: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// The guest's stdin (the runner's fd 0, read on the guest's own thread, blocking): its first
/// read that returns, with bytes or at the end, starts the clock of a guest that waits for its
/// code. Counted from the read itself, not from a readiness seen beside it: a guest that takes
/// the bytes first would leave a watcher nothing to see, and its clock would not start.
#[derive(Clone)]
pub(super) struct GuestStdin(pub(super) wasmtime_wasi::cli::InputFile);

impl GuestStdin {
    fn read_returned() {
        if STDIN_STARTED.get().is_none() {
            let _ = STDIN_STARTED.set(Instant::now());
        }
    }
}

impl wasmtime_wasi::p2::InputStream for GuestStdin {
    fn read(&mut self, size: usize) -> wasmtime_wasi::p2::StreamResult<bytes::Bytes> {
        let read = self.0.read(size);
        Self::read_returned();
        read
    }
}

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi::p2::Pollable for GuestStdin {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncRead for GuestStdin {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let read = std::pin::Pin::new(&mut self.0).poll_read(cx, buf);
        if read.is_ready() {
            Self::read_returned();
        }
        read
    }
}

impl wasmtime_wasi::cli::IsTerminal for GuestStdin {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl wasmtime_wasi::cli::StdinStream for GuestStdin {
    fn p2_stream(&self) -> Box<dyn wasmtime_wasi::p2::InputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncRead + Send + Sync> {
        Box::new(self.clone())
    }
}

/// This process's stdin as a file of its own (unbuffered, unlike `std::io::stdin`).
pub(super) fn stdin_file() -> std::io::Result<std::fs::File> {
    use std::os::fd::AsFd;
    Ok(std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned()?))
}
