//! The clients: each creates its keys through the public gRPC API, retrying
//! with the same key on any uncertain answer (alternating gateways, with a
//! timeout of its own that may be shorter than the gateway's budget, so
//! attempts of one key overlap), then reads each created id once, and
//! deletes some with their delete token (the tombstones a P move carries).

use std::{sync::Arc, time::Duration};

use pastebin_proto::api::v1::{self as pb, paste_api_client::PasteApiClient};
use rand::{rngs::StdRng, Rng, SeedableRng};
use tonic::{transport::Channel, Code};

use crate::{
    clock::SimTime,
    history::{Answer201, DeleteOutcome, Event, History, KeySpec, ReadOutcome},
    topology::GATEWAYS,
};

/// Attempts per key before a client gives up (the sweeper then finishes
/// or aborts whatever it left pending).
const MAX_ATTEMPTS: usize = 6;
/// A client deletes about one in this many of the pastes it created.
const DELETES_ONE_IN: u32 = 3;

/// What one client does: which keys (by index into the workload), in order.
#[derive(Debug, Clone)]
pub struct ClientPlan {
    pub client: usize,
    pub keys: Vec<usize>,
}

/// Reads a key's state on K at this instant (`None`: no record).
pub type KeyStateOracle = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// One client's run, as a turmoil client host.
pub async fn run_client(
    plan: ClientPlan,
    keys: Vec<KeySpec>,
    seed: u64,
    time: SimTime,
    history: History,
    key_state: KeyStateOracle,
) -> anyhow::Result<()> {
    let gateways: Vec<PasteApiClient<Channel>> = (0..GATEWAYS)
        .map(|gateway| Ok(PasteApiClient::new(crate::net::public_channel(&crate::topology::gateway(gateway))?)))
        .collect::<anyhow::Result<_>>()?;
    let mut rng = StdRng::seed_from_u64(seed);
    let client = Client { me: plan.client, gateways, time, history, key_state };
    for key in plan.keys {
        client.create(key, &keys[key], &mut rng).await;
        // Think time, so that the run spans many faults.
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..1_500))).await;
    }
    Ok(())
}

struct Client {
    me: usize,
    gateways: Vec<PasteApiClient<Channel>>,
    time: SimTime,
    history: History,
    key_state: KeyStateOracle,
}

impl Client {
    fn record(&self, event: Event) {
        self.history.record(self.time.elapsed_ms(), event);
    }

    async fn create(&self, key: usize, spec: &KeySpec, rng: &mut StdRng) {
        let me = self.me;
        for attempt in 0..MAX_ATTEMPTS {
            let gateway = (me + attempt) % GATEWAYS;
            let patience = Duration::from_millis(rng.random_range(300..4_000));
            self.record(Event::Invoke { client: me, key, gateway });
            let request = pb::CreatePasteRequest {
                request_id: spec.key.clone(),
                content: spec.content.clone(),
                ..Default::default()
            };
            let mut api = self.gateways[gateway].clone();
            match tokio::time::timeout(patience, api.create_paste(request)).await {
                Ok(Ok(response)) => {
                    let response = response.into_inner();
                    let answer = Answer201 {
                        id: response.id.clone(),
                        url: response.url,
                        raw_url: response.raw_url,
                        expires_at: response.expires_at,
                        delete_token: response.delete_token,
                    };
                    let key_state = (self.key_state)(&spec.key);
                    let token = answer.delete_token.clone();
                    self.record(Event::Created { client: me, key, answer, replayed: response.replayed, key_state });
                    self.read(key, response.id.clone(), (gateway + 1) % GATEWAYS).await;
                    if rng.random_ratio(1, DELETES_ONE_IN) {
                        self.delete(key, response.id, token, rng).await;
                    }
                    return;
                }
                Ok(Err(status)) => {
                    self.record(Event::Failed { client: me, key, code: status.code() });
                    if !worth_retrying(status.code()) {
                        return;
                    }
                }
                Err(_) => self.record(Event::TimedOut { client: me, key }),
            }
            tokio::time::sleep(Duration::from_millis(rng.random_range(50..1_500))).await;
        }
    }

    async fn read(&self, key: usize, id: String, gateway: usize) {
        let mut api = self.gateways[gateway].clone();
        let request = pb::GetPasteRequest { id: id.clone() };
        let outcome = match tokio::time::timeout(Duration::from_secs(3), api.get_paste(request)).await {
            Ok(Ok(paste)) => ReadOutcome::Content(paste.into_inner().content.into_bytes().into()),
            Ok(Err(status)) if status.code() == Code::NotFound => ReadOutcome::NotFound,
            _ => ReadOutcome::Unknown,
        };
        self.record(Event::Read { client: self.me, key, id, outcome });
    }

    /// Deletes `id` with its token, retrying on any uncertain answer, so a
    /// 404 after an uncertain attempt says an earlier one deleted it.
    async fn delete(&self, key: usize, id: String, delete_token: String, rng: &mut StdRng) {
        for attempt in 0..MAX_ATTEMPTS {
            let mut api = self.gateways[(self.me + attempt) % GATEWAYS].clone();
            let request = pb::DeletePasteRequest { id: id.clone(), delete_token: delete_token.clone() };
            let sent_ms = self.time.elapsed_ms();
            let outcome = match tokio::time::timeout(Duration::from_secs(3), api.delete_paste(request)).await {
                Ok(Ok(_)) => DeleteOutcome::Deleted,
                Ok(Err(status)) if status.code() == Code::NotFound => DeleteOutcome::NotFound,
                Ok(Err(status)) if status.code() == Code::PermissionDenied => DeleteOutcome::Refused,
                _ => DeleteOutcome::Unknown,
            };
            self.record(Event::Deleted { client: self.me, key, id: id.clone(), outcome, sent_ms });
            if outcome != DeleteOutcome::Unknown {
                return;
            }
            tokio::time::sleep(Duration::from_millis(rng.random_range(50..1_500))).await;
        }
    }
}

/// What a client retries with the same key: anything that does not say the
/// request itself was wrong.
fn worth_retrying(code: Code) -> bool {
    !matches!(code, Code::InvalidArgument | Code::AlreadyExists | Code::FailedPrecondition | Code::PermissionDenied)
}
