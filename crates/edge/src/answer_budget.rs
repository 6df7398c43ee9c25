//! One budget for what answers hold until they are sent, HTTP and gRPC
//! together (docs/security.md#total-bounds), with each client address's
//! share of it: a read is charged its content's size before the content is
//! fetched, and past the client's share or the budget it is refused at
//! once (503 + `Retry-After` over HTTP; over gRPC RESOURCE_EXHAUSTED for a
//! client past its share, UNAVAILABLE for a full budget, both with a
//! `retry-after` hint) rather than held. The charge rides the answer (in
//! its response's extensions, [`HeldAnswer`]) and the listener moves it into
//! the answer's body ([`held_until_sent`] over HTTP, the gRPC admission
//! over gRPC), so it is given back when the body is dropped: sent whole,
//! or its connection closed. Without it a client that grants its streams
//! no HTTP/2 window holds every answer it asks for, whole.

use std::{
    net::IpAddr,
    pin::Pin,
    sync::{Arc, OnceLock},
    task::{Context, Poll},
};

use hyper::body::{Body as HttpBody, Frame, SizeHint};

pub use crate::budget::Short;
use crate::{
    budget::{Budget, Charge},
    client_shares::{Shares, SIZED_FOR_ADDRESSES},
};

/// `--answer-budget-bytes` when not given: 160 MiB.
pub const DEFAULT_ANSWER_BUDGET_BYTES: usize = 160 * 1024 * 1024;

/// `--max-answer-bytes-per-client` when not given: 8 MiB, eight answers of
/// the largest paste at the default `--max-content-bytes`.
pub const DEFAULT_ANSWER_BYTES_PER_CLIENT: usize = 8 * 1024 * 1024;

const _: () = assert!(SIZED_FOR_ADDRESSES * DEFAULT_ANSWER_BYTES_PER_CLIENT < DEFAULT_ANSWER_BUDGET_BYTES);

/// The process's answer budget and every client's share of it: one table
/// for both protocols, so a client holds no more by reading over both.
#[derive(Debug)]
struct Answers {
    budget: Budget,
    per_client: Arc<Shares>,
}

static ANSWERS: OnceLock<Answers> = OnceLock::new();

/// Sets the process's answer budget and each client's share of it; the
/// first call wins (`up` sets it once for every part it runs).
pub fn set_answer_budget(bytes: usize, per_client: usize) {
    let _ = ANSWERS.set(Answers { budget: Budget::of(bytes), per_client: Shares::new(per_client) });
}

fn answers() -> &'static Answers {
    ANSWERS.get_or_init(|| Answers {
        budget: Budget::of(DEFAULT_ANSWER_BUDGET_BYTES),
        per_client: Shares::new(DEFAULT_ANSWER_BYTES_PER_CLIENT),
    })
}

/// `bytes` for one answer, from `client`'s share (when the answer has a
/// client address) and then from the budget, or what ran short.
pub fn charge(client: Option<IpAddr>, bytes: usize) -> Result<HeldAnswer, Short> {
    let answers = answers();
    let charge = answers.budget.charge(client.map(|address| (&answers.per_client, address)), bytes)?;
    Ok(HeldAnswer { _charge: Arc::new(charge) })
}

/// What one answer holds of its client's share and of the budget, given
/// back when the last clone is dropped. `Clone` only so that it can ride in
/// a response's extensions to the listener, which moves it into the body.
#[derive(Debug, Clone)]
pub struct HeldAnswer {
    _charge: Arc<Charge>,
}

/// The HTTP listener's last step for every answer: a charge riding in the
/// response's extensions moves into its body, to be given back when the
/// body is dropped.
pub async fn held_until_sent(mut response: axum::response::Response) -> axum::response::Response {
    match response.extensions_mut().remove::<HeldAnswer>() {
        Some(held) => response.map(|body| axum::body::Body::new(Holding { body, _held: held })),
        None => response,
    }
}

/// An answer's body and what it holds.
struct Holding<B> {
    body: B,
    _held: HeldAnswer,
}

impl<B: HttpBody + Unpin> HttpBody for Holding<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
