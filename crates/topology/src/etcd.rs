//! The authority on etcd (v3 API, gRPC): one key per kind holds its whole
//! topology as JSON, so every change, a cut-over included, is one
//! transaction that compares the key's revision with the one read. Reads
//! are linearizable (served through the leader's quorum), so a shard never
//! starts on a grant that a completed cut-over already replaced.

use std::time::Duration;

use futures::{stream::BoxStream, StreamExt};
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use crate::{
    authority::{Authority, AuthorityError, Read, Revision, Swap},
    grants::{Kind, Topology},
    pb::{
        etcdserverpb::{
            self as pb, compare, kv_client::KvClient, request_op, response_op, watch_client::WatchClient,
            watch_request, Compare, RangeRequest, RequestOp, TxnRequest, WatchCreateRequest, WatchRequest,
        },
        mvccpb::KeyValue,
    },
    url::TopologyUrl,
};

/// How long one call may take: etcd answers in milliseconds or, without
/// a quorum, not at all; a caller waiting longer learns nothing more.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Clone)]
pub struct EtcdAuthority {
    url: TopologyUrl,
    channel: Channel,
}

impl EtcdAuthority {
    /// A client of the members `url` names, over TLS with `tls` (the
    /// process's own identity and CA) when given. Connects lazily: a
    /// member that is down is tried again at the next call.
    pub fn new(url: TopologyUrl, tls: Option<ClientTlsConfig>) -> Result<Self, AuthorityError> {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let mut endpoints = Vec::new();
        for member in url.members() {
            let endpoint = Endpoint::from_shared(format!("{scheme}://{member}"))
                .map_err(|error| unavailable(&url, error))?
                .connect_timeout(CONNECT_TIMEOUT)
                .timeout(CALL_TIMEOUT)
                .http2_keep_alive_interval(Duration::from_secs(10))
                .keep_alive_timeout(Duration::from_secs(5))
                .keep_alive_while_idle(true);
            endpoints.push(match &tls {
                Some(tls) => endpoint.tls_config(tls.clone()).map_err(|error| unavailable(&url, error))?,
                None => endpoint,
            });
        }
        let channel = Channel::balance_list(endpoints.into_iter());
        Ok(Self { url, channel })
    }

    fn key(&self, kind: Kind) -> String {
        format!("/{}/topology/{}", self.url.prefix(), kind.as_str())
    }

    fn parse(&self, kind: Kind, value: &[u8]) -> Result<Topology, AuthorityError> {
        serde_json::from_slice(value).map_err(|error| AuthorityError::Corrupt {
            kind,
            key: self.key(kind),
            reason: error.to_string(),
        })
    }

    /// The topology and the revisions: of its key, and of the whole store.
    async fn read_at(&self, kind: Kind) -> Result<(Read, i64), AuthorityError> {
        let request = RangeRequest { key: self.key(kind).into_bytes(), ..Default::default() };
        let answer = KvClient::new(self.channel.clone())
            .range(request)
            .await
            .map_err(|status| unavailable(&self.url, status.message()))?
            .into_inner();
        let store_revision = answer.header.as_ref().map_or(0, |header| header.revision);
        Ok((self.read_of(kind, answer.kvs.first())?, store_revision))
    }

    fn read_of(&self, kind: Kind, found: Option<&KeyValue>) -> Result<Read, AuthorityError> {
        match found {
            Some(kv) => Ok(Read { topology: Some(self.parse(kind, &kv.value)?), revision: Some(kv.mod_revision) }),
            None => Ok(Read { topology: None, revision: None }),
        }
    }
}

fn unavailable(url: &TopologyUrl, reason: impl std::fmt::Display) -> AuthorityError {
    AuthorityError::Unavailable { endpoints: url.to_string(), reason: reason.to_string() }
}

#[async_trait::async_trait]
impl Authority for EtcdAuthority {
    async fn read(&self, kind: Kind) -> Result<Read, AuthorityError> {
        Ok(self.read_at(kind).await?.0)
    }

    async fn swap(&self, kind: Kind, expected: Revision, next: &Topology) -> Result<Swap, AuthorityError> {
        let key = self.key(kind).into_bytes();
        let value = serde_json::to_vec(next).expect("a topology always serializes");
        let compare = match expected {
            // No topology yet: the key must not exist (its version is 0).
            None => Compare {
                result: compare::CompareResult::Equal as i32,
                target: compare::CompareTarget::Version as i32,
                key: key.clone(),
                target_union: Some(compare::TargetUnion::Version(0)),
                ..Default::default()
            },
            Some(revision) => Compare {
                result: compare::CompareResult::Equal as i32,
                target: compare::CompareTarget::Mod as i32,
                key: key.clone(),
                target_union: Some(compare::TargetUnion::ModRevision(revision)),
                ..Default::default()
            },
        };
        let put = RequestOp {
            request: Some(request_op::Request::RequestPut(pb::PutRequest {
                key: key.clone(),
                value,
                ..Default::default()
            })),
        };
        let reread =
            RequestOp { request: Some(request_op::Request::RequestRange(RangeRequest { key, ..Default::default() })) };
        let answer = KvClient::new(self.channel.clone())
            .txn(TxnRequest { compare: vec![compare], success: vec![put], failure: vec![reread] })
            .await
            .map_err(|status| unavailable(&self.url, status.message()))?
            .into_inner();
        if answer.succeeded {
            return Ok(Swap::Written(answer.header.map_or(0, |header| header.revision)));
        }
        let found = answer.responses.into_iter().find_map(|op| match op.response {
            Some(response_op::Response::ResponseRange(range)) => Some(range),
            _ => None,
        });
        let now = found.as_ref().and_then(|range| range.kvs.first());
        Ok(Swap::Changed(Box::new(self.read_of(kind, now)?)))
    }

    async fn watch(&self, kind: Kind) -> Result<BoxStream<'static, Result<Topology, AuthorityError>>, AuthorityError> {
        let (read, store_revision) = self.read_at(kind).await?;
        let (requests, receiver) = tokio::sync::mpsc::channel(1);
        let create = WatchCreateRequest {
            key: self.key(kind).into_bytes(),
            start_revision: store_revision + 1,
            ..Default::default()
        };
        requests
            .send(WatchRequest { request_union: Some(watch_request::RequestUnion::CreateRequest(create)) })
            .await
            .expect("the receiver is still here");
        // The watch uses its channel without the per-call deadline: it lasts.
        // `hasleader`: a member that loses its leader (a quorum loss) ends the
        // watch instead of keeping it open with no events; the caller then
        // watches again and, once a quorum answers, reads what it missed. A
        // watch left open there brought none of the changes made after the
        // quorum came back.
        let mut watch = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(receiver));
        watch.metadata_mut().insert("hasleader", tonic::metadata::MetadataValue::from_static("true"));
        let answers = WatchClient::new(self.channel.clone())
            .watch(watch)
            .await
            .map_err(|status| unavailable(&self.url, status.message()))?
            .into_inner();
        let this = self.clone();
        let changes = answers.flat_map(move |answer| {
            // Keeps the request side open for as long as the watch is read.
            let _open = &requests;
            let topologies: Vec<Result<Topology, AuthorityError>> = match answer {
                Ok(answer) if answer.canceled => vec![Err(unavailable(&this.url, answer.cancel_reason))],
                Ok(answer) => answer
                    .events
                    .iter()
                    .filter_map(|event| event.kv.as_ref())
                    .filter(|kv| !kv.value.is_empty())
                    .map(|kv| this.parse(kind, &kv.value))
                    .collect(),
                Err(status) => vec![Err(unavailable(&this.url, status.message()))],
            };
            futures::stream::iter(topologies)
        });
        Ok(futures::stream::iter(read.topology.map(Ok)).chain(changes).boxed())
    }

    fn describe(&self) -> String {
        self.url.to_string()
    }
}
