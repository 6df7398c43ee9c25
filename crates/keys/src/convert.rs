//! Protobuf ↔ domain for shard K, both directions in one place: the service
//! reads requests and writes replies with it, the client the other way round.
//! A field that does not convert is [`Malformed`]: the caller's bad input on
//! the service side, an untrustworthy reply on the client side.

use pastebin_core::{from_millis, to_millis, IdempotencyKey, KeyState, PasteId, RequestHash, ResponseBody};
use pastebin_proto::keys::v1 as pb;
use pastebin_runtime::grpc::Malformed;

use crate::{Adopted, KeyRecord, NewKey, PendingKey, PendingStats, SlotKey};

/// The largest stored 201 body accepted; real ones are a few hundred bytes.
const MAX_RESPONSE_BODY: usize = 16 * 1024;

pub(crate) fn key(raw: &str) -> Result<IdempotencyKey, Malformed> {
    IdempotencyKey::parse(raw).map_err(|e| Malformed(e.to_string()))
}

pub(crate) fn paste_id(raw: &str) -> Result<PasteId, Malformed> {
    PasteId::parse(raw).map_err(|e| Malformed(format!("paste_id: {e}")))
}

fn request_hash(raw: Vec<u8>) -> Result<RequestHash, Malformed> {
    raw.try_into().map(RequestHash).map_err(|_| Malformed("request_hash must be 32 bytes".into()))
}

/// A stored 201 body is never empty and stays small.
pub(crate) fn check_body_size(raw: &[u8]) -> Result<(), Malformed> {
    if raw.is_empty() || raw.len() > MAX_RESPONSE_BODY {
        return Err(Malformed("response_body must be 1 to 16384 bytes".into()));
    }
    Ok(())
}

pub(crate) fn response_body(raw: Vec<u8>) -> Result<ResponseBody, Malformed> {
    String::from_utf8(raw).map(ResponseBody::new).map_err(|_| Malformed("response_body must be UTF-8".into()))
}

pub(crate) fn state_to_pb(state: KeyState) -> pb::KeyState {
    match state {
        KeyState::Pending => pb::KeyState::Pending,
        KeyState::Done => pb::KeyState::Done,
        KeyState::Aborted => pb::KeyState::Aborted,
    }
}

fn state_from_pb(raw: i32) -> Result<KeyState, Malformed> {
    match pb::KeyState::try_from(raw) {
        Ok(pb::KeyState::Pending) => Ok(KeyState::Pending),
        Ok(pb::KeyState::Done) => Ok(KeyState::Done),
        Ok(pb::KeyState::Aborted) => Ok(KeyState::Aborted),
        _ => Err(Malformed("state".into())),
    }
}

pub fn begin_request(new: &NewKey) -> pb::BeginRequest {
    pb::BeginRequest {
        key: new.key.canonical(),
        request_hash: new.request_hash.0.to_vec(),
        paste_id: new.paste_id.to_string(),
        response_body: new.response_body.expose().as_bytes().to_vec(),
    }
}

pub(crate) fn new_key(request: pb::BeginRequest) -> Result<NewKey, Malformed> {
    Ok(NewKey {
        key: key(&request.key)?,
        request_hash: request_hash(request.request_hash)?,
        paste_id: paste_id(&request.paste_id)?,
        response_body: response_body(request.response_body)?,
    })
}

pub(crate) fn slot_key_to_pb(key: SlotKey) -> pb::SlotKey {
    pb::SlotKey {
        key: key.key.canonical(),
        paste_id: key.paste_id.to_string(),
        state: state_to_pb(key.state).into(),
        created_at_ms: to_millis(key.created_at),
    }
}

pub(crate) fn slot_key_from_pb(raw: pb::SlotKey) -> Result<SlotKey, Malformed> {
    Ok(SlotKey {
        key: key(&raw.key)?,
        paste_id: paste_id(&raw.paste_id)?,
        state: state_from_pb(raw.state)?,
        created_at: from_millis(raw.created_at_ms),
    })
}

pub fn record_to_pb(record: KeyRecord) -> pb::KeyRecord {
    pb::KeyRecord {
        key: record.key.canonical(),
        request_hash: record.request_hash.0.to_vec(),
        paste_id: record.paste_id.to_string(),
        state: state_to_pb(record.state).into(),
        response_body: record.response_body.into_inner().into_bytes(),
        created_at_ms: to_millis(record.created_at),
        retain_until_ms: to_millis(record.retain_until),
        search_first: record.search_first,
    }
}

pub fn record_from_pb(raw: pb::KeyRecord) -> Result<KeyRecord, Malformed> {
    Ok(KeyRecord {
        key: key(&raw.key)?,
        request_hash: request_hash(raw.request_hash)?,
        paste_id: paste_id(&raw.paste_id)?,
        state: state_from_pb(raw.state)?,
        response_body: response_body(raw.response_body)?,
        created_at: from_millis(raw.created_at_ms),
        retain_until: from_millis(raw.retain_until_ms),
        search_first: raw.search_first,
    })
}

pub(crate) fn adopt_request(adopted: &Adopted) -> pb::AdoptRequest {
    pb::AdoptRequest {
        key: adopted.key.canonical(),
        pending_paste_id: adopted.pending_paste_id.to_string(),
        paste_id: adopted.paste_id.to_string(),
        request_hash: adopted.request_hash.0.to_vec(),
        response_body: adopted.response_body.expose().as_bytes().to_vec(),
    }
}

pub(crate) fn adopted(request: pb::AdoptRequest) -> Result<Adopted, Malformed> {
    Ok(Adopted {
        key: key(&request.key)?,
        pending_paste_id: paste_id(&request.pending_paste_id)?,
        paste_id: paste_id(&request.paste_id)?,
        request_hash: request_hash(request.request_hash)?,
        response_body: response_body(request.response_body)?,
    })
}

pub(crate) fn guarded_update(key: &IdempotencyKey, paste_id: &PasteId) -> pb::GuardedUpdate {
    pb::GuardedUpdate { key: key.canonical(), paste_id: paste_id.to_string() }
}

pub(crate) fn pending_to_pb(pending: PendingKey) -> pb::PendingKey {
    pb::PendingKey {
        key: pending.key.canonical(),
        paste_id: pending.paste_id.to_string(),
        created_at_ms: to_millis(pending.created_at),
    }
}

pub(crate) fn pending_from_pb(raw: pb::PendingKey) -> Result<PendingKey, Malformed> {
    Ok(PendingKey {
        key: key(&raw.key)?,
        paste_id: paste_id(&raw.paste_id)?,
        created_at: from_millis(raw.created_at_ms),
    })
}

pub(crate) fn stats_to_pb(stats: PendingStats) -> pb::PendingStatsResponse {
    pb::PendingStatsResponse {
        pending: stats.pending,
        oldest_created_at_ms: stats.oldest_created_at.map(to_millis).unwrap_or(0),
        older_than_2s: stats.older_than_2s,
        older_than_60s: stats.older_than_60s,
        now_ms: to_millis(stats.now),
    }
}

pub(crate) fn stats_from_pb(raw: pb::PendingStatsResponse) -> PendingStats {
    PendingStats {
        pending: raw.pending,
        // Zero is protobuf's "unset": no pending key, so no oldest one.
        oldest_created_at: (raw.oldest_created_at_ms != 0).then(|| from_millis(raw.oldest_created_at_ms)),
        older_than_2s: raw.older_than_2s,
        older_than_60s: raw.older_than_60s,
        now: from_millis(raw.now_ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(state: KeyState) -> KeyRecord {
        let key = IdempotencyKey::new_random();
        KeyRecord {
            key,
            request_hash: RequestHash([7; 32]),
            paste_id: PasteId::mint(key.slot()),
            state,
            response_body: ResponseBody::new("{\"id\":\"x\"}".into()),
            created_at: from_millis(1_700_000_000_123),
            retain_until: from_millis(1_700_090_000_123),
            search_first: state != KeyState::Done,
        }
    }

    #[test]
    fn a_record_survives_the_wire_in_every_state() {
        for state in [KeyState::Pending, KeyState::Done, KeyState::Aborted] {
            let sent = record(state);
            assert_eq!(record_from_pb(record_to_pb(sent.clone())).unwrap(), sent);
        }
    }

    #[test]
    fn an_unknown_state_is_malformed() {
        let mut raw = record_to_pb(record(KeyState::Done));
        raw.state = 0;
        assert!(record_from_pb(raw).is_err());
    }
}
