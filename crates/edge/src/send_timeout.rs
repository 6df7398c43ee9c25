//! A connection whose reader stops reading its answer, or reads it slower
//! than a minimum rate, is closed (docs/security.md#total-bounds). Answers
//! are streamed in chunks as the client reads them, so a reader that never
//! reads holds one chunk, not a whole answer — and without this it would
//! hold that chunk, its connection and its client's share for as long as it
//! liked, since the request timeout ends when the handler returns, not when
//! the body is sent.
//!
//! The rule is a bucket of patience, in seconds, that starts full at the
//! send timeout: time a write waits for the reader drains it, each byte the
//! reader takes refills it by `1 / min_rate` seconds (never past full), and
//! a write that would drain it empty fails. A reader that stalls is cut off
//! after the send timeout, as a per-write timeout would; a reader that
//! trickles a few hundred bytes every few seconds — never stalling for long
//! — drains it too, a little each time, and is cut off as well.

use std::{
    future::Future,
    io,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    time::Instant,
};

use crate::refusals::{refused, Protocol};

/// How long a reader may keep a write waiting, and how fast it must read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendLimits {
    /// The longest one write may wait; also the most patience a fast
    /// reader can bank.
    pub timeout: Duration,
    /// Bytes per second a reader must take while the server waits to send;
    /// 0 is no minimum.
    pub min_bytes_per_second: u64,
}

/// The reader's patience left: the time the next write may wait.
#[derive(Debug, Clone, Copy)]
struct Patience {
    limits: SendLimits,
    left: Duration,
}

impl Patience {
    fn full(limits: SendLimits) -> Self {
        Self { limits, left: limits.timeout }
    }

    /// A write that waited `waited` for the reader and then took `bytes`.
    fn progressed(&mut self, waited: Duration, bytes: usize) {
        let earned = match self.limits.min_bytes_per_second {
            0 => self.limits.timeout,
            rate => Duration::from_secs_f64(bytes as f64 / rate as f64),
        };
        self.left = (self.left.saturating_sub(waited) + earned).min(self.limits.timeout);
    }

    /// Whether the reader has read too slowly, rather than stopped.
    fn drained_by_slowness(&self) -> bool {
        self.left < self.limits.timeout
    }
}

/// `io` whose writes fail with `TimedOut` once the reader has used up the
/// server's patience; the server then drops the connection.
pub(crate) struct SendTimeout<IO> {
    io: IO,
    patience: Patience,
    /// Set while a write waits for the reader: since when, and the moment
    /// the patience runs out.
    stall: Option<(Instant, Pin<Box<tokio::time::Sleep>>)>,
}

impl<IO> SendTimeout<IO> {
    pub(crate) fn new(io: IO, limits: SendLimits) -> Self {
        Self { io, patience: Patience::full(limits), stall: None }
    }

    /// A write's outcome, or the time-out of a write that has used up the patience.
    fn bounded(&mut self, cx: &mut Context<'_>, polled: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        if let Poll::Ready(outcome) = &polled {
            let waited = self.stall.take().map_or(Duration::ZERO, |(since, _)| since.elapsed());
            self.patience.progressed(waited, *outcome.as_ref().unwrap_or(&0));
            return polled;
        }
        let left = self.patience.left;
        let (_, deadline) = self.stall.get_or_insert_with(|| (Instant::now(), Box::pin(tokio::time::sleep(left))));
        match deadline.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => {
                let (reason, what) = if self.patience.drained_by_slowness() {
                    ("send_rate", "the client reads its answer slower than the minimum rate")
                } else {
                    ("send_timeout", "the client stopped reading its answer")
                };
                refused(Protocol::Http, reason);
                tracing::debug!(timeout = ?self.patience.limits.timeout, "{what}; closing the connection");
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, what)))
            }
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for SendTimeout<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for SendTimeout<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        self.bounded(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.bounded(cx, polled)
    }

    /// Passed through, so that hyper queues an answer's chunks as they are
    /// (no copy into a flat buffer).
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.io).poll_flush(cx).map_ok(|()| 0);
        self.bounded(cx, polled).map_ok(|_| ())
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn limits(timeout_secs: u64, min_bytes_per_second: u64) -> SendLimits {
        SendLimits { timeout: Duration::from_secs(timeout_secs), min_bytes_per_second }
    }

    #[tokio::test]
    async fn a_write_the_peer_never_reads_fails_after_the_timeout_and_progress_resets_it() {
        let (near, mut far) = tokio::io::duplex(8);
        let mut sender = SendTimeout::new(near, limits(2, 0));
        sender.write_all(b"12345678").await.unwrap();
        // The pipe is full; the peer reads well within the timeout, so the write goes on.
        let reader = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut buffer = [0; 8];
            far.read_exact(&mut buffer).await.unwrap();
            far
        });
        sender.write_all(b"abcdefgh").await.expect("progress within the timeout");
        let _far = reader.await.unwrap();
        let stalled = sender.write_all(b"more").await.unwrap_err();
        assert_eq!(stalled.kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test]
    async fn a_reader_that_trickles_below_the_minimum_rate_is_cut_off() {
        // 2 s of patience, 1,000 bytes/s; the reader takes 100 bytes every
        // 200 ms (500 bytes/s): no write waits 2 s, yet it is cut off.
        let (near, mut far) = tokio::io::duplex(100);
        let mut sender = SendTimeout::new(near, limits(2, 1000));
        let reader = tokio::spawn(async move {
            let mut buffer = [0; 100];
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                if far.read_exact(&mut buffer).await.is_err() {
                    return;
                }
            }
        });
        let started = Instant::now();
        let cut = loop {
            if let Err(error) = sender.write_all(&[b'a'; 100]).await {
                break error;
            }
            assert!(started.elapsed() < Duration::from_secs(120), "the trickling reader was never cut off");
        };
        assert_eq!(cut.kind(), io::ErrorKind::TimedOut);
        assert!(sender.patience.drained_by_slowness(), "cut off as too slow, not as stalled");
        drop(sender);
        reader.await.unwrap();
    }

    #[test]
    fn a_reader_that_trickles_below_the_minimum_rate_drains_the_patience() {
        // 10 s of patience, 1,000 bytes/s: a reader taking 100 bytes every 2 s
        // (50 bytes/s) never keeps one write waiting 10 s...
        let mut patience = Patience::full(limits(10, 1000));
        let mut rounds = 0;
        while patience.left > Duration::from_secs(2) {
            patience.progressed(Duration::from_secs(2), 100);
            rounds += 1;
            assert!(rounds < 100, "never drained");
        }
        // ...yet after a few rounds its next wait is cut short, as too slow.
        assert!(rounds >= 3, "it was served for a while first ({rounds} rounds)");
        assert!(patience.drained_by_slowness());
    }

    #[test]
    fn a_reader_at_the_minimum_rate_keeps_its_patience_and_banks_no_more_than_the_timeout() {
        let mut patience = Patience::full(limits(10, 1000));
        for _ in 0..10_000 {
            // 100 bytes per 50 ms: 2,000 bytes/s, twice the minimum.
            patience.progressed(Duration::from_millis(50), 100);
        }
        assert_eq!(patience.left, Duration::from_secs(10));
        // A fast start banks nothing past the timeout: a stall after it is cut at 10 s.
        patience.progressed(Duration::ZERO, 1 << 30);
        assert_eq!(patience.left, Duration::from_secs(10));
        assert!(!patience.drained_by_slowness());
        // Without a minimum rate any progress fills it again.
        let mut unlimited = Patience::full(limits(10, 0));
        unlimited.progressed(Duration::from_secs(9), 1);
        assert_eq!(unlimited.left, Duration::from_secs(10));
    }
}
