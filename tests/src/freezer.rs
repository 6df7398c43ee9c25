//! A TCP proxy that can go silent the way a vanished host does: no reset,
//! no close, just no bytes. Connections open when it freezes never carry a
//! byte again (their peer's state is gone); once it thaws, new connections
//! pass. Found by the simulation (docs/testing.md#simulation).

use std::sync::{
    atomic::{AtomicBool, AtomicU64, Ordering},
    Arc,
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

pub struct FreezingProxy {
    /// `host:port` to dial instead of the target.
    pub address: String,
    state: Arc<State>,
}

#[derive(Default)]
struct State {
    frozen: AtomicBool,
    /// Bumped at each freeze: a connection of an older generation is dead.
    generation: AtomicU64,
}

impl State {
    fn alive(&self, generation: u64) -> bool {
        !self.frozen.load(Ordering::SeqCst) && self.generation.load(Ordering::SeqCst) == generation
    }
}

impl FreezingProxy {
    /// Forwards every connection to `target` (`host:port`) until frozen.
    pub async fn start(target: &str) -> FreezingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let address = listener.local_addr().expect("proxy address").to_string();
        let state = Arc::new(State::default());
        let (target, accepting) = (target.to_owned(), state.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let generation = accepting.generation.load(Ordering::SeqCst);
                let Ok(server) = TcpStream::connect(&target).await else { continue };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(forward(client_read, server_write, accepting.clone(), generation));
                tokio::spawn(forward(server_read, client_write, accepting.clone(), generation));
            }
        });
        FreezingProxy { address, state }
    }

    /// From now on no byte crosses any connection open now or made before [`Self::thaw`].
    pub fn freeze(&self) {
        self.state.frozen.store(true, Ordering::SeqCst);
        self.state.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// New connections pass again; the frozen ones stay silent.
    pub fn thaw(&self) {
        self.state.generation.fetch_add(1, Ordering::SeqCst);
        self.state.frozen.store(false, Ordering::SeqCst);
    }
}

/// Copies bytes one way while the connection is alive; once dead it keeps
/// both sockets open and silent for good.
async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    state: Arc<State>,
    generation: u64,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        if !state.alive(generation) {
            // Hold both halves: a vanished host sends no FIN and no RST.
            std::future::pending::<()>().await;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}
