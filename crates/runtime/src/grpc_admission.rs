//! What a gRPC server lets in (docs/security.md#total-bounds): at most so
//! many connections, and request messages paid for from the process's body
//! budget ([`crate::body_budget`]) before they are read. tonic's decoder
//! reserves a message's declared length as soon as it sees the 5-byte
//! prefix, before the message arrives; without a charge up front, 64
//! half-sent 4 MiB messages on one connection would hold 256 MiB.

use std::{
    pin::Pin,
    sync::Arc,
    task::{ready, Context, Poll},
};

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    sync::{OwnedSemaphorePermit, Semaphore},
};
use tokio_stream::{Stream, StreamExt};

use crate::body_budget::{self, BodyReservation};

/// The length-prefixed message framing of gRPC: a compressed flag, then
/// the message length as 4 big-endian bytes.
const PREFIX_BYTES: usize = 5;

/// A request whose messages are charged to the body budget as their
/// prefixes arrive, before tonic's decoder sees (and reserves for) them.
pub(crate) fn charged(request: http::Request<tonic::body::Body>) -> http::Request<tonic::body::Body> {
    request.map(|body| tonic::body::Body::new(ChargedMessages::new(body)))
}

/// A gRPC request body that holds, for the message now arriving, as many
/// bytes of the body budget as its prefix declares. One message at a time:
/// a message's bytes are all through before the next prefix, and tonic
/// decodes a message as soon as its last byte is in.
struct ChargedMessages<B> {
    inner: B,
    prefix: [u8; PREFIX_BYTES],
    prefix_read: usize,
    message_left: usize,
    charge: Option<BodyReservation>,
}

impl<B> ChargedMessages<B> {
    fn new(inner: B) -> Self {
        Self { inner, prefix: [0; PREFIX_BYTES], prefix_read: 0, message_left: 0, charge: None }
    }

    /// Follows the framing through `data`, charging each message whose
    /// prefix completes in it; a refusal ends the call before tonic reads on.
    fn follow(&mut self, mut data: &[u8]) -> Result<(), tonic::Status> {
        while !data.is_empty() {
            if self.message_left > 0 {
                let passed = self.message_left.min(data.len());
                self.message_left -= passed;
                data = &data[passed..];
                continue;
            }
            let taken = (PREFIX_BYTES - self.prefix_read).min(data.len());
            self.prefix[self.prefix_read..self.prefix_read + taken].copy_from_slice(&data[..taken]);
            self.prefix_read += taken;
            data = &data[taken..];
            if self.prefix_read == PREFIX_BYTES {
                self.prefix_read = 0;
                let [_, length @ ..] = self.prefix;
                self.message_left = u32::from_be_bytes(length) as usize;
                // The last message is decoded: its charge is spent.
                self.charge = None;
                self.charge = Some(charge(self.message_left)?);
            }
        }
        Ok(())
    }
}

/// `bytes` of the body budget for one message, or the refusal: a message
/// larger than the whole budget is too large (RESOURCE_EXHAUSTED, as for a
/// message over the decoding limit); one that does not fit now is
/// UNAVAILABLE, to be retried.
fn charge(bytes: usize) -> Result<BodyReservation, tonic::Status> {
    if bytes > body_budget::budget_bytes() {
        return Err(tonic::Status::resource_exhausted(format!(
            "a message of {bytes} bytes is larger than this server's body budget (--body-budget-bytes)"
        )));
    }
    body_budget::reserve(bytes).ok_or_else(|| {
        metrics::counter!(crate::metrics::EDGE_REFUSALS, "reason" => "body_budget").increment(1);
        tonic::Status::unavailable("the server holds as many request bytes as it may; retry shortly")
    })
}

impl<B> HttpBody for ChargedMessages<B>
where
    B: HttpBody<Data = Bytes, Error = tonic::Status> + Unpin,
{
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let frame = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if let Some(data) = frame.as_ref().and_then(|frame| frame.as_ref().ok()).and_then(Frame::data_ref) {
            if let Err(refusal) = self.follow(data) {
                return Poll::Ready(Some(Err(refusal)));
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// `incoming` with at most `cap` connections open at once: one more is
/// closed as soon as it is accepted (a cap has no tower layer: layers only
/// see requests), and counted.
pub(crate) fn capped<IO, E>(
    incoming: impl Stream<Item = Result<IO, E>>,
    cap: usize,
) -> impl Stream<Item = Result<CappedConnection<IO>, E>> {
    let open = Arc::new(Semaphore::new(cap.max(1)));
    incoming.filter_map(move |accepted| match accepted {
        Err(error) => Some(Err(error)),
        Ok(io) => match open.clone().try_acquire_owned() {
            Ok(permit) => Some(Ok(CappedConnection { io, _permit: permit })),
            Err(_) => {
                metrics::counter!(crate::metrics::EDGE_REFUSALS, "reason" => "grpc_connection_cap").increment(1);
                tracing::debug!("gRPC connection cap reached; closing the new connection");
                None
            }
        },
    })
}

/// A connection holding its place under the cap until it closes.
pub(crate) struct CappedConnection<IO> {
    io: IO,
    _permit: OwnedSemaphorePermit,
}

impl<IO: tonic::transport::server::Connected> tonic::transport::server::Connected for CappedConnection<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for CappedConnection<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for CappedConnection<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefixed(length: u32) -> Vec<u8> {
        let mut prefix = vec![0];
        prefix.extend_from_slice(&length.to_be_bytes());
        prefix
    }

    #[test]
    fn each_message_is_charged_its_declared_length_as_its_prefix_arrives() {
        let mut body = ChargedMessages::new(());
        let first = prefixed(3);
        body.follow(&first[..2]).unwrap();
        assert!(body.charge.is_none(), "half a prefix charges nothing yet");
        body.follow(&first[2..]).unwrap();
        assert_eq!(body.message_left, 3);
        let mut rest = b"abc".to_vec();
        rest.extend(prefixed(7));
        rest.extend(b"1234");
        body.follow(&rest).unwrap();
        assert_eq!(body.message_left, 3, "the second message's prefix was found inside the same frame");
    }

    #[test]
    fn a_message_larger_than_the_whole_budget_is_too_large() {
        let mut body = ChargedMessages::new(());
        let refusal = body.follow(&prefixed(u32::MAX)).unwrap_err();
        assert_eq!(refusal.code(), tonic::Code::ResourceExhausted);
    }
}
