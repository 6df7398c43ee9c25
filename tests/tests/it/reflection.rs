//! Internal services stay internal, on real processes: K and P answer no
//! reflection unless started with `--reflection`, and the gateway's public
//! reflection describes only the public API, health and reflection itself,
//! over both `grpc.reflection.v1` and `v1alpha` (grpcio's Python client,
//! grpc_cli and several GUI clients speak only v1alpha).

use std::path::Path;

use futures::StreamExt;
use pastebin_shards::channel;
use pastebin_tests::cluster::{gateway_args, Process};
use tonic::{transport::Channel, Code, Status};
use tonic_health::pb::{health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest};
use tonic_reflection::pb::{v1, v1alpha};

/// Service names a server lists over `grpc.reflection.v1`, sorted.
async fn list_v1(channel: Channel) -> Result<Vec<String>, Status> {
    use v1::{server_reflection_request::MessageRequest, server_reflection_response::MessageResponse};
    let request = v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices("".into())),
    };
    let mut replies = v1::server_reflection_client::ServerReflectionClient::new(channel)
        .server_reflection_info(futures::stream::iter([request]))
        .await?
        .into_inner();
    match replies.next().await.expect("one reply")?.message_response {
        Some(MessageResponse::ListServicesResponse(list)) => Ok(sorted(list.service.into_iter().map(|s| s.name))),
        other => panic!("expected a service list, got {other:?}"),
    }
}

/// Service names a server lists over `grpc.reflection.v1alpha`, sorted.
async fn list_v1alpha(channel: Channel) -> Result<Vec<String>, Status> {
    use v1alpha::{server_reflection_request::MessageRequest, server_reflection_response::MessageResponse};
    let request = v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices("".into())),
    };
    let mut replies = v1alpha::server_reflection_client::ServerReflectionClient::new(channel)
        .server_reflection_info(futures::stream::iter([request]))
        .await?
        .into_inner();
    match replies.next().await.expect("one reply")?.message_response {
        Some(MessageResponse::ListServicesResponse(list)) => Ok(sorted(list.service.into_iter().map(|s| s.name))),
        other => panic!("expected a service list, got {other:?}"),
    }
}

/// Whether the server describes `symbol` over v1: true, or false for NOT_FOUND.
async fn describes(channel: Channel, symbol: &str) -> bool {
    use v1::{server_reflection_request::MessageRequest, server_reflection_response::MessageResponse};
    let request = v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::FileContainingSymbol(symbol.into())),
    };
    let mut replies = v1::server_reflection_client::ServerReflectionClient::new(channel)
        .server_reflection_info(futures::stream::iter([request]))
        .await
        .expect("the reflection stream opens")
        .into_inner();
    match replies.next().await.expect("one reply") {
        Ok(reply) => match reply.message_response {
            Some(MessageResponse::FileDescriptorResponse(files)) => !files.file_descriptor_proto.is_empty(),
            Some(MessageResponse::ErrorResponse(error)) if error.error_code == Code::NotFound as i32 => false,
            other => panic!("unexpected reply for {symbol}: {other:?}"),
        },
        // tonic-reflection ends the stream with NOT_FOUND rather than an ErrorResponse.
        Err(status) if status.code() == Code::NotFound => false,
        Err(status) => panic!("unexpected error for {symbol}: {status:?}"),
    }
}

fn sorted(names: impl Iterator<Item = String>) -> Vec<String> {
    let mut names: Vec<String> = names.collect();
    names.sort();
    names
}

async fn serving(channel: Channel) -> bool {
    let reply = HealthClient::new(channel).check(HealthCheckRequest { service: String::new() }).await;
    reply.map(|r| r.into_inner().status == ServingStatus::Serving as i32).unwrap_or(false)
}

/// A K or P process on SQLite in `dir`, plaintext, with `extra` flags; its address.
async fn shard(kind: &str, dir: &Path, extra: &[&str]) -> (Process, Channel, String) {
    let database = format!("sqlite://{}", dir.join(format!("{kind}.db")).display());
    let mut args: Vec<String> =
        [kind, "--database-url", &database, "--listen", "127.0.0.1:0"].map(String::from).to_vec();
    args.extend(extra.iter().map(|a| a.to_string()));
    let process = Process::start(args, vec![], &[kind]).await;
    let address = process.address(kind).to_owned();
    (process, channel(&address, None).unwrap(), address)
}

#[tokio::test]
async fn key_and_paste_services_answer_no_reflection_unless_asked() {
    let temp = tempfile::tempdir().unwrap();
    for kind in ["key-service", "paste-service"] {
        let (_process, channel, _) = shard(kind, temp.path(), &[]).await;
        assert!(serving(channel.clone()).await, "{kind} still answers health");
        for listed in [list_v1(channel.clone()).await, list_v1alpha(channel).await] {
            let refused = listed.expect_err("reflection is off");
            assert_eq!(refused.code(), Code::Unimplemented, "{kind}: {refused:?}");
        }
    }

    std::fs::create_dir(temp.path().join("asked")).unwrap();
    let (_process, channel, _) = shard("key-service", &temp.path().join("asked"), &["--reflection"]).await;
    // Its own API and the slot moves every shard serves (docs/design.md#moving-slots).
    let expected = [
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "pastebin.keys.v1.KeyService",
        "pastebin.shard.v1.SlotMoves",
    ];
    assert_eq!(list_v1(channel.clone()).await.unwrap(), expected);
    let expected = [
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
        "pastebin.keys.v1.KeyService",
        "pastebin.shard.v1.SlotMoves",
    ];
    assert_eq!(list_v1alpha(channel.clone()).await.unwrap(), expected);
    assert!(!describes(channel, "pastebin.pastes.v1.PasteService").await, "K describes only its own API");
}

#[tokio::test]
async fn the_gateway_reflects_only_the_public_api_over_v1_and_v1alpha() {
    let temp = tempfile::tempdir().unwrap();
    let (_keys, _, key_address) = shard("key-service", temp.path(), &[]).await;
    let (_pastes, _, paste_address) = shard("paste-service", temp.path(), &[]).await;
    let objects = temp.path().join("objects");
    let args = gateway_args(&[key_address], &[paste_address], &objects);
    let gateway = Process::start(args, vec![], &["gateway-grpc"]).await;
    let channel = channel(gateway.address("gateway-grpc"), None).unwrap();

    let expected = ["grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "pastebin.v1.PasteApi"];
    assert_eq!(list_v1(channel.clone()).await.unwrap(), expected);
    let expected = ["grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection", "pastebin.v1.PasteApi"];
    assert_eq!(list_v1alpha(channel.clone()).await.unwrap(), expected);
    assert!(describes(channel.clone(), "pastebin.v1.PasteApi").await);
    for internal in ["pastebin.keys.v1.KeyService", "pastebin.pastes.v1.PasteService", "pastebin.keys.v1.BeginRequest"]
    {
        assert!(!describes(channel.clone(), internal).await, "the public reflection describes {internal}");
    }
}
