//! A TCP endpoint that flips from one server to another, like a managed
//! database's endpoint or a Kubernetes service on failover: clients keep
//! dialing one address, and the endpoint decides where it leads. It counts
//! the connections it accepts, so a test can see how hard clients hammer a
//! server that is gone.

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc, Mutex,
};

use tokio::net::{TcpListener, TcpStream};

pub struct FlippingEndpoint {
    /// `host:port` for clients to dial.
    pub address: String,
    state: Arc<State>,
}

struct State {
    target: Mutex<String>,
    accepted: AtomicU64,
}

impl FlippingEndpoint {
    /// Forwards every new connection to `target` (`host:port`); one whose
    /// target does not answer is closed at once, as a dead server's would be.
    pub async fn start(target: &str) -> FlippingEndpoint {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the endpoint");
        let address = listener.local_addr().expect("endpoint address").to_string();
        let state = Arc::new(State { target: Mutex::new(target.to_owned()), accepted: AtomicU64::new(0) });
        let accepting = state.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                accepting.accepted.fetch_add(1, Ordering::SeqCst);
                let target = accepting.target.lock().unwrap().clone();
                tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        FlippingEndpoint { address, state }
    }

    /// New connections lead to `target` from now on; open ones stay where they lead.
    pub fn flip_to(&self, target: &str) {
        *self.state.target.lock().unwrap() = target.to_owned();
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.state.accepted.load(Ordering::SeqCst)
    }
}
