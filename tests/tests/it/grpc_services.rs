//! The key and paste services over real gRPC on port 0: typed clients, raw generated
//! clients sending what the typed ones never would, health and reflection.

use std::{sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use futures::StreamExt;
use pastebin_core::SlotRange;
use pastebin_core::{to_millis, Clock, DeleteToken, KeyState, ManualClock, PasteId};
use pastebin_keys::{Begun, KeyStore};
use pastebin_pastes::{DeleteOutcome, IdFate, InsertOutcome, PasteStore};
use pastebin_proto::{
    keys::v1::{self as kpb, key_service_client::KeyServiceClient},
    pastes::v1::{self as ppb, paste_service_client::PasteServiceClient},
};
use pastebin_runtime::grpc::{ServerOptions, ShardChannel};
use pastebin_tests::shards::{
    key_store, new_key, new_paste, paste_store, spawn_key_service_over, spawn_paste_service_over, Backend, Transport,
};
use tonic::{transport::Channel, Code};
use tonic_health::pb::{health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest};
use tonic_reflection::pb::v1::{
    server_reflection_client::ServerReflectionClient, server_reflection_request::MessageRequest,
    server_reflection_response::MessageResponse, ServerReflectionRequest,
};

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp_millis(1_900_000_000_000).unwrap()
}

fn clock() -> Arc<dyn Clock> {
    Arc::new(ManualClock::starting_at(t0()))
}

/// As `--reflection`: the reflection test below looks inside these servers.
fn with_reflection() -> ServerOptions {
    ServerOptions { reflection: true, ..ServerOptions::default() }
}

/// A key service on `backend` with the store (for checking what was written), its
/// address, a raw client and a typed one, both over `transport`.
async fn key_service(
    backend: Backend,
    transport: Transport,
) -> (KeyStore, String, KeyServiceClient<ShardChannel>, pastebin_keys::KeyClient) {
    key_service_on(backend, clock(), transport).await
}

/// [`key_service`] on a clock the test keeps, to age its keys.
async fn key_service_on(
    backend: Backend,
    clock: Arc<dyn pastebin_core::Clock>,
    transport: Transport,
) -> (KeyStore, String, KeyServiceClient<ShardChannel>, pastebin_keys::KeyClient) {
    let store = key_store(backend, clock).await;
    let (address, channel) = spawn_key_service_over(store.clone(), SlotRange::ALL, with_reflection(), transport).await;
    (store, address, KeyServiceClient::new(channel.clone()), pastebin_keys::KeyClient::new(channel))
}

async fn paste_service(
    backend: Backend,
    transport: Transport,
) -> (PasteStore, String, PasteServiceClient<ShardChannel>, pastebin_pastes::PasteClient) {
    let store = paste_store(backend, clock()).await;
    let (address, channel) =
        spawn_paste_service_over(store.clone(), SlotRange::ALL, with_reflection(), transport).await;
    (store, address, PasteServiceClient::new(channel.clone()), pastebin_pastes::PasteClient::new(channel))
}

fn expect_code<T: std::fmt::Debug>(what: &str, result: Result<tonic::Response<T>, tonic::Status>, code: Code) {
    match result {
        Ok(reply) => panic!("{what}: expected {code:?}, got {reply:?}"),
        Err(status) => assert_eq!(status.code(), code, "{what}: {}", status.message()),
    }
}

/// Nothing pending, nothing listed: what a key shard looks like after only bad calls.
async fn assert_no_keys(store: &KeyStore, what: &str) {
    let stats = store.pending_stats().await.unwrap();
    assert_eq!(stats.pending, 0, "{what} wrote a pending key");
    let far_future = t0() + chrono::Duration::days(10_000);
    assert!(store.list_pending(far_future, None, 100).await.unwrap().is_empty(), "{what} wrote a key");
    assert_eq!(store.purge_retired(100).await.unwrap(), 0);
}

fn begin_request(new: &pastebin_keys::NewKey) -> kpb::BeginRequest {
    kpb::BeginRequest {
        key: new.key.canonical(),
        request_hash: new.request_hash.0.to_vec(),
        paste_id: new.paste_id.to_string(),
        response_body: new.response_body.expose().as_bytes().to_vec(),
    }
}

fn insert_request(paste: &pastebin_pastes::NewPaste) -> ppb::InsertRequest {
    ppb::InsertRequest {
        id: paste.id.to_string(),
        delete_token_sha256: paste.delete_token_hash.0.to_vec(),
        created_at_ms: to_millis(paste.created_at),
        expires_at_ms: to_millis(paste.expires_at),
        size: paste.size,
        content_sha256: paste.content_sha256.to_vec(),
        // As a caller from before the reader attributes sends it: a plain text paste.
        attributes: None,
        // And from before the origin: a paste no search after a K loss finds.
        ..Default::default()
    }
}

pastebin_tests::both_backends! {
    async fn key_service_round_trip(backend: Backend) {
        // In process is how `pastebin up` calls its shards: the same answers.
        for transport in Transport::BOTH {
            eprintln!("over {transport:?}");
            let time = ManualClock::starting_at(t0());
            let (store, _address, mut raw, client) = key_service_on(backend, Arc::new(time.clone()), transport).await;
            let new = new_key("{\"id\":\"round-trip\"}");

            let inserted = match client.begin(&new).await.unwrap() {
                Begun::Inserted(record) => record,
                other => panic!("expected Inserted, got {other:?}"),
            };
            assert_eq!(inserted.state, KeyState::Pending);
            assert_eq!(inserted.created_at, t0());
            assert_eq!(inserted.retain_until, t0() + chrono::Duration::hours(25));
            assert_eq!(store.get(&new.key).await.unwrap().as_ref(), Some(&inserted), "what the server stored");
            assert_eq!(client.get(&new.key).await.unwrap().as_ref(), Some(&inserted));
            assert!(matches!(client.begin(&new).await.unwrap(), Begun::Existing(found) if found == inserted));

            // The raw reply carries exactly the stored fields.
            let reply = raw.begin(begin_request(&new)).await.unwrap().into_inner();
            assert!(!reply.inserted);
            let record = reply.record.unwrap();
            assert_eq!(record.key, new.key.canonical());
            assert_eq!(record.paste_id, new.paste_id.to_string());
            assert_eq!(record.state, kpb::KeyState::Pending as i32);
            assert_eq!(record.response_body, new.response_body.expose().as_bytes());
            assert_eq!(record.created_at_ms, to_millis(t0()));

            let wrong = PasteId::mint(new.key.slot());
            assert!(!client.mark_done(&new.key, &wrong).await.unwrap());
            assert!(client.mark_done(&new.key, &new.paste_id).await.unwrap());
            assert!(!client.mark_done(&new.key, &new.paste_id).await.unwrap());
            assert!(!client.abort(&new.key, &new.paste_id).await.unwrap());
            assert!(!client.restart(&new.key, &new.paste_id, &wrong, &new.response_body).await.unwrap());
            assert_eq!(client.get(&new.key).await.unwrap().unwrap().state, KeyState::Done);
            assert_eq!(store.get(&new.key).await.unwrap().unwrap().state, KeyState::Done);

            let aborted = new_key("{\"id\":\"aborted\"}");
            client.begin(&aborted).await.unwrap();
            assert!(client.abort(&aborted.key, &aborted.paste_id).await.unwrap());
            assert!(client.restart(&aborted.key, &aborted.paste_id, &wrong, &aborted.response_body).await.unwrap());
            assert_eq!(store.get(&aborted.key).await.unwrap().unwrap().paste_id, wrong);

            assert_eq!(client.get(&pastebin_core::IdempotencyKey::new_random()).await.unwrap(), None);
            let stats = client.pending_stats().await.unwrap();
            assert_eq!((stats.pending, stats.now), (1, t0()));
            // Age is judged on K's clock: the restarted key is 0 s old until K's clock moves.
            assert!(client.list_pending(Duration::ZERO, None, 10).await.unwrap().is_empty());
            time.advance(Duration::from_secs(1));
            assert_eq!(client.list_pending(Duration::ZERO, None, 10).await.unwrap().len(), 1);
            assert!(client.list_pending(Duration::from_secs(2), None, 10).await.unwrap().is_empty());
            assert_eq!(client.purge_retired(10).await.unwrap(), 0);
        }
    }

    async fn key_service_refuses_bad_input_as_invalid_argument_and_writes_nothing(backend: Backend) {
        // In process is how `pastebin up` calls its shards: the same answers.
        for transport in Transport::BOTH {
            eprintln!("over {transport:?}");
            let time = ManualClock::starting_at(t0());
            let (store, _address, mut raw, _client) = key_service_on(backend, Arc::new(time.clone()), transport).await;
            let good = new_key("{\"id\":\"good\"}");
            let body_17k = vec![b'a'; 17 * 1024];

            let mut cases: Vec<(&str, kpb::BeginRequest)> = Vec::new();
            for (what, key) in [
                ("empty key", ""),
                ("malformed key", "6f9619ff-8b86-d011-b42d-00c04fc964f"),
                ("non-UUID key", "not-a-uuid-at-all"),
                ("key with a stray character", "6f9619ff-8b86-d011-b42d-00c04fc964fg"),
            ] {
                cases.push((what, kpb::BeginRequest { key: key.into(), ..begin_request(&good) }));
            }
            for (what, id) in [
                ("short paste id", "abc"),
                ("non-base62 paste id", "00-00000000000"),
                ("paste id prefix above 255", "zz000000000000"),
                ("empty paste id", ""),
            ] {
                cases.push((what, kpb::BeginRequest { paste_id: id.into(), ..begin_request(&good) }));
            }
            cases.push(("31-byte request_hash", kpb::BeginRequest { request_hash: vec![7; 31], ..begin_request(&good) }));
            cases.push(("33-byte request_hash", kpb::BeginRequest { request_hash: vec![7; 33], ..begin_request(&good) }));
            cases.push(("empty request_hash", kpb::BeginRequest { request_hash: vec![], ..begin_request(&good) }));
            cases.push(("empty response_body", kpb::BeginRequest { response_body: vec![], ..begin_request(&good) }));
            cases.push(("17 KiB response_body", kpb::BeginRequest { response_body: body_17k.clone(), ..begin_request(&good) }));
            cases.push((
                "non-UTF-8 response_body",
                kpb::BeginRequest { response_body: vec![0xff, 0xfe, 0x00], ..begin_request(&good) },
            ));
            for (what, request) in cases {
                expect_code(what, raw.begin(request).await, Code::InvalidArgument);
                assert_no_keys(&store, what).await;
                assert_eq!(store.get(&good.key).await.unwrap(), None, "{what} wrote the key");
            }

            // 16 KiB exactly is the largest body accepted.
            let edge = kpb::BeginRequest { response_body: vec![b'a'; 16 * 1024], ..begin_request(&good) };
            assert!(raw.begin(edge).await.unwrap().into_inner().inserted);
            let stored = store.get(&good.key).await.unwrap().unwrap();
            assert_eq!(stored.state, KeyState::Pending);

            // Guarded updates with bad fields refuse and leave the pending key alone.
            let bad_updates = [
                ("mark_done, malformed key", kpb::GuardedUpdate { key: "nope".into(), paste_id: good.paste_id.to_string() }),
                ("mark_done, malformed paste id", kpb::GuardedUpdate { key: good.key.canonical(), paste_id: "abc".into() }),
            ];
            for (what, update) in bad_updates.clone() {
                expect_code(what, raw.mark_done(update).await, Code::InvalidArgument);
            }
            for (what, update) in bad_updates {
                expect_code(&what.replace("mark_done", "abort"), raw.abort(update).await, Code::InvalidArgument);
            }
            expect_code("get, malformed key", raw.get(kpb::GetKeyRequest { key: "nope".into() }).await, Code::InvalidArgument);
            expect_code(
                "get, absent key",
                raw.get(kpb::GetKeyRequest { key: pastebin_core::IdempotencyKey::new_random().canonical() }).await,
                Code::NotFound,
            );
            let restart = |key: &str, old: &str, new: &str, body: Vec<u8>| kpb::RestartRequest {
                key: key.into(),
                aborted_paste_id: old.into(),
                paste_id: new.into(),
                response_body: body,
            };
            let (k, old, fresh) = (good.key.canonical(), good.paste_id.to_string(), PasteId::mint(good.key.slot()).to_string());
            for (what, request) in [
                ("restart, malformed key", restart("x", &old, &fresh, b"{}".to_vec())),
                ("restart, malformed old paste id", restart(&k, "x", &fresh, b"{}".to_vec())),
                ("restart, malformed new paste id", restart(&k, &old, "zz000000000000", b"{}".to_vec())),
                ("restart, empty body", restart(&k, &old, &fresh, vec![])),
                ("restart, 17 KiB body", restart(&k, &old, &fresh, body_17k.clone())),
            ] {
                expect_code(what, raw.restart(request).await, Code::InvalidArgument);
            }
            let list = |limit: u32, after_key: &str| kpb::ListPendingRequest {
                older_than_ms: 0,
                after_created_at_ms: 0,
                after_key: after_key.into(),
                limit,
                ..Default::default()
            };
            #[allow(deprecated)] // The old field is sent on purpose: K must refuse it.
            let callers_clock = kpb::ListPendingRequest { created_before_ms: to_millis(t0()) + 1_000, ..list(10, "") };
            expect_code("list_pending, a cutoff on the caller's clock", raw.list_pending(callers_clock).await, Code::FailedPrecondition);
            expect_code("list_pending, limit 0", raw.list_pending(list(0, "")).await, Code::InvalidArgument);
            expect_code("list_pending, limit 10001", raw.list_pending(list(10_001, "")).await, Code::InvalidArgument);
            expect_code("list_pending, malformed cursor", raw.list_pending(list(10, "nope")).await, Code::InvalidArgument);
            expect_code(
                "purge_retired, limit 0",
                raw.purge_retired(kpb::PurgeRetiredRequest { limit: 0 }).await,
                Code::InvalidArgument,
            );
            assert_eq!(store.get(&good.key).await.unwrap().unwrap(), stored, "bad calls changed the key");
            assert_eq!(store.pending_stats().await.unwrap().pending, 1);
            time.advance(Duration::from_secs(1));
            assert_eq!(raw.list_pending(list(10, "")).await.unwrap().into_inner().keys.len(), 1);
        }
    }

    async fn paste_service_round_trip(backend: Backend) {
        // In process is how `pastebin up` calls its shards: the same answers.
        for transport in Transport::BOTH {
            eprintln!("over {transport:?}");
            let (store, _address, _raw, client) = paste_service(backend, transport).await;
            let (paste, token) = new_paste(t0(), chrono::Duration::hours(1));

            assert_eq!(client.insert(&paste).await.unwrap(), InsertOutcome::Inserted);
            assert_eq!(client.insert(&paste).await.unwrap(), InsertOutcome::AlreadyExists);
            let row = client.get(&paste.id).await.unwrap().expect("readable");
            assert_eq!(Some(row.clone()), store.get_live(&paste.id).await.unwrap());
            assert_eq!((row.created_at, row.expires_at, row.size), (paste.created_at, paste.expires_at, paste.size));
            assert_eq!(client.tombstone_unless_live(&paste.id).await.unwrap(), IdFate::Live);

            let (unknown, _) = new_paste(t0(), chrono::Duration::hours(1));
            let resolved = client.resolve_batch(&[paste.id.clone(), unknown.id.clone()]).await.unwrap();
            assert_eq!(resolved.fates, vec![(paste.id.clone(), IdFate::Live), (unknown.id.clone(), IdFate::Tombstoned)]);
            assert_eq!(resolved.waiting, Vec::<PasteId>::new(), "no slot is frozen");
            assert_eq!(client.insert(&unknown).await.unwrap(), InsertOutcome::Tombstoned);
            assert_eq!(client.get(&unknown.id).await.unwrap(), None);

            assert_eq!(client.delete(&paste.id, &DeleteToken::generate()).await.unwrap(), DeleteOutcome::WrongToken);
            assert!(client.get(&paste.id).await.unwrap().is_some());
            assert_eq!(client.delete(&paste.id, &token).await.unwrap(), DeleteOutcome::Deleted);
            assert_eq!(client.delete(&paste.id, &token).await.unwrap(), DeleteOutcome::NotFound);
            assert_eq!(client.get(&paste.id).await.unwrap(), None);
            assert!(client.purge_expired(10).await.unwrap().is_empty());
        }
    }

    async fn paste_service_refuses_bad_input_and_answers_malformed_ids_as_not_found(backend: Backend) {
        // In process is how `pastebin up` calls its shards: the same answers.
        for transport in Transport::BOTH {
            eprintln!("over {transport:?}");
            let (store, _address, mut raw, _client) = paste_service(backend, transport).await;
            let (good, token) = new_paste(t0(), chrono::Duration::hours(1));

            for bad_id in ["", "abc", "00-00000000000", "zz000000000000", "48000000000000", "0000000000000é"] {
                expect_code(&format!("get {bad_id:?}"), raw.get(ppb::GetRequest { id: bad_id.into() }).await, Code::NotFound);
                expect_code(
                    &format!("delete {bad_id:?}"),
                    raw.delete(ppb::DeleteRequest { id: bad_id.into(), delete_token: token.expose().into() }).await,
                    Code::NotFound,
                );
                expect_code(
                    &format!("tombstone {bad_id:?}"),
                    raw.tombstone_unless_live(ppb::TombstoneRequest { id: bad_id.into() }).await,
                    Code::InvalidArgument,
                );
                expect_code(
                    &format!("insert {bad_id:?}"),
                    raw.insert(ppb::InsertRequest { id: bad_id.into(), ..insert_request(&good) }).await,
                    Code::InvalidArgument,
                );
            }
            let created = to_millis(good.created_at);
            for (what, request) in [
                ("31-byte delete_token_sha256", ppb::InsertRequest { delete_token_sha256: vec![1; 31], ..insert_request(&good) }),
                ("31-byte content_sha256", ppb::InsertRequest { content_sha256: vec![1; 31], ..insert_request(&good) }),
                ("33-byte content_sha256", ppb::InsertRequest { content_sha256: vec![1; 33], ..insert_request(&good) }),
                ("expires before created", ppb::InsertRequest { expires_at_ms: created - 1, ..insert_request(&good) }),
                ("expires at created", ppb::InsertRequest { expires_at_ms: created, ..insert_request(&good) }),
            ] {
                expect_code(what, raw.insert(request).await, Code::InvalidArgument);
                assert_eq!(store.get_live(&good.id).await.unwrap(), None, "{what} wrote a row");
            }
            // A batch with one bad id is refused whole: the good ids in it are not fenced.
            let (batch_good, _) = new_paste(t0(), chrono::Duration::hours(1));
            expect_code(
                "resolve_batch with a bad id",
                raw.resolve_batch(ppb::ResolveBatchRequest { ids: vec![batch_good.id.to_string(), "abc".into()] }).await,
                Code::InvalidArgument,
            );
            expect_code(
                "resolve_batch of 1001 ids",
                raw.resolve_batch(ppb::ResolveBatchRequest { ids: vec![batch_good.id.to_string(); 1001] }).await,
                Code::InvalidArgument,
            );
            expect_code(
                "purge_expired, limit 0",
                raw.purge_expired(ppb::PurgeExpiredRequest { limit: 0 }).await,
                Code::InvalidArgument,
            );

            // Nothing was written: both ids can still become pastes.
            assert_eq!(store.insert(&batch_good).await.unwrap(), InsertOutcome::Inserted);
            let reply = raw.insert(insert_request(&good)).await.unwrap().into_inner();
            assert_eq!(reply.outcome, ppb::InsertOutcome::Inserted as i32);
            assert_eq!(raw.get(ppb::GetRequest { id: good.id.to_string() }).await.unwrap().into_inner().id, good.id.to_string());
            expect_code(
                "delete with a wrong token",
                raw.delete(ppb::DeleteRequest { id: good.id.to_string(), delete_token: "wrong".into() }).await,
                Code::PermissionDenied,
            );
            raw.delete(ppb::DeleteRequest { id: good.id.to_string(), delete_token: token.expose().into() }).await.unwrap();
            expect_code("get after delete", raw.get(ppb::GetRequest { id: good.id.to_string() }).await, Code::NotFound);
        }
    }
}

async fn health_status(channel: ShardChannel, service: &str) -> Result<ServingStatus, tonic::Status> {
    let reply = HealthClient::new(channel).check(HealthCheckRequest { service: service.into() }).await?;
    Ok(ServingStatus::try_from(reply.into_inner().status).expect("a known status"))
}

#[tokio::test]
async fn both_services_report_serving_on_grpc_health() {
    // In process too: `pastebin up`'s readiness asks its shards that way.
    for transport in Transport::BOTH {
        let keys = key_store(Backend::Sqlite, clock()).await;
        let (_, key_channel) = spawn_key_service_over(keys, SlotRange::ALL, ServerOptions::default(), transport).await;
        let pastes = paste_store(Backend::Sqlite, clock()).await;
        let (_, paste_channel) =
            spawn_paste_service_over(pastes, SlotRange::ALL, ServerOptions::default(), transport).await;
        let status = |channel: &ShardChannel, service: &'static str| health_status(channel.clone(), service);

        assert_eq!(status(&key_channel, "").await.unwrap(), ServingStatus::Serving, "{transport:?}");
        assert_eq!(status(&key_channel, pastebin_keys::SERVICE_NAME).await.unwrap(), ServingStatus::Serving);
        assert_eq!(pastebin_keys::SERVICE_NAME, "pastebin.keys.v1.KeyService");
        assert_eq!(status(&paste_channel, "").await.unwrap(), ServingStatus::Serving, "{transport:?}");
        assert_eq!(status(&paste_channel, "pastebin.pastes.v1.PasteService").await.unwrap(), ServingStatus::Serving);
        // Each server reports only its own service.
        let unknown = status(&key_channel, "pastebin.pastes.v1.PasteService").await.unwrap_err();
        assert_eq!(unknown.code(), Code::NotFound, "{transport:?}");
        let unknown = status(&paste_channel, "no.such.Service").await.unwrap_err();
        assert_eq!(unknown.code(), Code::NotFound, "{transport:?}");
    }
}

/// One reflection request on a fresh stream: the reply message, or the stream's error.
async fn try_reflect(channel: Channel, request: MessageRequest) -> Result<MessageResponse, tonic::Status> {
    let request = ServerReflectionRequest { host: String::new(), message_request: Some(request) };
    let mut replies = ServerReflectionClient::new(channel)
        .server_reflection_info(futures::stream::iter(vec![request]))
        .await?
        .into_inner();
    let reply = replies.next().await.expect("one reply")?;
    Ok(reply.message_response.expect("a message"))
}

async fn reflect(channel: Channel, request: MessageRequest) -> MessageResponse {
    try_reflect(channel, request).await.expect("a reflection reply")
}

#[tokio::test]
async fn reflection_lists_and_describes_the_services() {
    let (_keys, key_address, _, _) = key_service(Backend::Sqlite, Transport::Network).await;
    let (_pastes, paste_address, _, _) = paste_service(Backend::Sqlite, Transport::Network).await;

    for (address, own) in
        [(key_address, "pastebin.keys.v1.KeyService"), (paste_address, "pastebin.pastes.v1.PasteService")]
    {
        let channel = pastebin_shards::channel(&address, None).unwrap();
        let services = match reflect(channel.clone(), MessageRequest::ListServices(String::new())).await {
            MessageResponse::ListServicesResponse(list) => list.service.into_iter().map(|s| s.name).collect::<Vec<_>>(),
            other => panic!("expected a service list, got {other:?}"),
        };
        for expected in [own, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"] {
            assert!(services.iter().any(|s| s == expected), "{expected} missing from {services:?} at {address}");
        }

        match reflect(channel.clone(), MessageRequest::FileContainingSymbol(own.into())).await {
            MessageResponse::FileDescriptorResponse(files) => {
                assert!(!files.file_descriptor_proto.is_empty(), "no descriptor for {own}");
            }
            other => panic!("expected descriptors for {own}, got {other:?}"),
        }
        // tonic-reflection ends the stream with NOT_FOUND rather than an ErrorResponse.
        match try_reflect(channel, MessageRequest::FileContainingSymbol("no.such.Symbol".into())).await {
            Err(status) => assert_eq!(status.code(), Code::NotFound),
            Ok(MessageResponse::ErrorResponse(error)) => assert_eq!(error.error_code, Code::NotFound as i32),
            Ok(other) => panic!("expected an error for an unknown symbol, got {other:?}"),
        }
    }
}
