//! The real gRPC stack (tonic, hyper, h2) over turmoil's simulated TCP: a
//! connector for the clients' channels and an incoming stream for servers.

use std::{
    io,
    pin::Pin,
    task::{Context, Poll},
};

use futures::Stream;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::{server::Connected, Channel, Endpoint};

/// Every simulated server listens on this port of its host.
pub const PORT: u16 = 9000;

/// A lazily connecting channel to `host` through the simulated network,
/// configured exactly as a real client's (`pastebin_shards::endpoint`).
pub fn channel(host: &str) -> anyhow::Result<Channel> {
    Ok(channel_to(pastebin_shards::endpoint(&format!("{host}:{PORT}"), None)?))
}

/// A lazily connecting plain channel to `host` (the public API's clients).
pub fn public_channel(host: &str) -> anyhow::Result<Channel> {
    Ok(channel_to(Endpoint::from_shared(format!("http://{host}:{PORT}"))?))
}

fn channel_to(endpoint: Endpoint) -> Channel {
    endpoint.connect_with_connector_lazy(tower::service_fn(|uri: http::Uri| async move {
        let host = uri.host().unwrap_or_default().to_owned();
        let stream = turmoil::net::TcpStream::connect((host, uri.port_u16().unwrap_or(PORT))).await?;
        Ok::<_, io::Error>(TokioIo::new(stream))
    }))
}

/// The connections a simulated server accepts, as tonic takes them.
pub fn incoming(listener: turmoil::net::TcpListener) -> impl Stream<Item = io::Result<Connection>> {
    futures::stream::unfold(listener, |listener| async move {
        let accepted = listener.accept().await.map(|(stream, _)| Connection(stream));
        Some((accepted, listener))
    })
}

pub async fn listen() -> io::Result<turmoil::net::TcpListener> {
    turmoil::net::TcpListener::bind(("0.0.0.0", PORT)).await
}

/// A simulated TCP connection; it has no peer address worth telling tonic.
pub struct Connection(turmoil::net::TcpStream);

impl Connected for Connection {
    type ConnectInfo = ();

    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl AsyncRead for Connection {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
