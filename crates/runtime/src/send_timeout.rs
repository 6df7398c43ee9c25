//! A connection that stops reading its answer is closed
//! (docs/security.md#total-bounds): every write to the socket must make
//! progress within the send timeout. Answers are streamed in chunks as the
//! client reads them, so a reader that never reads holds one chunk, not a
//! whole answer — and without this it would hold that chunk, its
//! connection and its client's share for as long as it liked, since the
//! request timeout ends when the handler returns, not when the body is sent.

use std::{
    future::Future,
    io,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `io` whose writes fail with `TimedOut` once one has waited for the peer
/// longer than `timeout`; the server then drops the connection.
pub(crate) struct SendTimeout<IO> {
    io: IO,
    timeout: Duration,
    /// Armed when a write first has to wait; disarmed by any progress.
    stalled_since: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<IO> SendTimeout<IO> {
    pub(crate) fn new(io: IO, timeout: Duration) -> Self {
        Self { io, timeout, stalled_since: None }
    }

    /// A write's outcome, or the time-out of a write that has waited too long.
    fn bounded<T>(&mut self, cx: &mut Context<'_>, polled: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.stalled_since = None;
            return polled;
        }
        let timeout = self.timeout;
        let stall = self.stalled_since.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match stall.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => {
                metrics::counter!(crate::metrics::EDGE_REFUSALS, "reason" => "send_timeout").increment(1);
                tracing::debug!(?timeout, "the client stopped reading its answer; closing the connection");
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "the client stopped reading its answer")))
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
        let polled = Pin::new(&mut self.io).poll_flush(cx);
        self.bounded(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;

    #[tokio::test]
    async fn a_write_the_peer_never_reads_fails_after_the_timeout_and_progress_resets_it() {
        let (near, mut far) = tokio::io::duplex(8);
        let mut sender = SendTimeout::new(near, Duration::from_secs(2));
        sender.write_all(b"12345678").await.unwrap();
        // The pipe is full; the peer reads well within the timeout, so the write goes on.
        let reader = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut buffer = [0; 8];
            tokio::io::AsyncReadExt::read_exact(&mut far, &mut buffer).await.unwrap();
            far
        });
        sender.write_all(b"abcdefgh").await.expect("progress within the timeout");
        let _far = reader.await.unwrap();
        let stalled = sender.write_all(b"more").await.unwrap_err();
        assert_eq!(stalled.kind(), io::ErrorKind::TimedOut);
    }
}
