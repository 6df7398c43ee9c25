//! A small HTTP client for the gateway's API, shared by the end-to-end tests.

use std::time::Duration;

use reqwest::{header::HeaderMap, Client, StatusCode};
use serde_json::Value;

pub fn new_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// One HTTP answer, read whole.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("not JSON: {}", self.body))
    }

    async fn read(response: reqwest::Response) -> reqwest::Result<Answer> {
        Ok(Answer { status: response.status(), headers: response.headers().clone(), body: response.text().await? })
    }
}

/// `POST /api/v1/pastes` with a JSON body and, if given, an idempotency key.
/// The environment of a gateway (or `up`) under contention on one key,
/// not load shedding nor one address's fair share: every attempt is
/// admitted, and may take `budget`, the test's own patience, not the 2 s a
/// deployment answers within.
pub fn contention_env(budget: Duration) -> Vec<(String, String)> {
    vec![
        ("PASTEBIN_CREATES_IN_FLIGHT_PER_SHARD".to_owned(), "64".to_owned()),
        ("PASTEBIN_MAX_REQUESTS_IN_FLIGHT_PER_CLIENT".to_owned(), "64".to_owned()),
        ("PASTEBIN_MAX_CONNECTIONS_PER_CLIENT".to_owned(), "128".to_owned()),
        ("PASTEBIN_REQUEST_BUDGET_MS".to_owned(), budget.as_millis().to_string()),
    ]
}

pub async fn create(http: &str, key: Option<&str>, content: &str) -> reqwest::Result<Answer> {
    create_within(http, key, content, Duration::from_secs(10)).await
}

/// [`create`], given up after `timeout`: a test whose gateway has a longer
/// request budget waits as long (its own deadline, not the machine's speed).
pub async fn create_within(http: &str, key: Option<&str>, content: &str, timeout: Duration) -> reqwest::Result<Answer> {
    let mut request = Client::new()
        .post(format!("{http}/api/v1/pastes"))
        .json(&serde_json::json!({ "content": content }))
        .timeout(timeout);
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    Answer::read(request.send().await?).await
}

/// `GET /api/v1/pastes/{id}`.
pub async fn get(http: &str, id: &str) -> Answer {
    Answer::read(Client::new().get(format!("{http}/api/v1/pastes/{id}")).send().await.unwrap()).await.unwrap()
}
