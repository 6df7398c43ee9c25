//! Protobuf ↔ domain for shard P, both directions in one place: the service
//! reads requests and writes replies with it, the client the other way round.
//! A field that does not convert is [`Malformed`]: the caller's bad input on
//! the service side, an untrustworthy reply on the client side.

use pastebin_core::{
    from_millis, to_millis, DeleteTokenHash, FileName, KeyHash, Language, MediaType, PasteAttributes, PasteId,
    PasteOrigin, RequestHash,
};
use pastebin_proto::pastes::v1 as pb;
use pastebin_runtime::grpc::Malformed;

use crate::{
    DismissOutcome, Dismissal, IdFate, InsertOutcome, KeyedPaste, NewPaste, PasteRow, Report, ReportedPaste, SlotRow,
    TakedownOutcome,
};

pub(crate) fn id(raw: &str) -> Result<PasteId, Malformed> {
    PasteId::parse(raw).map_err(|e| Malformed(format!("id: {e}")))
}

fn sha256(raw: Vec<u8>, field: &str) -> Result<[u8; 32], Malformed> {
    raw.try_into().map_err(|_| Malformed(format!("{field} must be 32 bytes")))
}

pub(crate) fn fate_to_pb(fate: IdFate) -> i32 {
    match fate {
        IdFate::Live => pb::IdFate::Live,
        IdFate::Tombstoned => pb::IdFate::Tombstoned,
    }
    .into()
}

/// `None` for `IdFate::Unspecified`: the fence would meet an id P never saw.
pub(crate) fn slot_row_to_pb(row: SlotRow) -> pb::SlotRow {
    pb::SlotRow {
        id: row.id.to_string(),
        fate: fate_to_pb(row.fate),
        created_at_ms: to_millis(row.created_at),
        content_sha256: row.content_sha256.map(|hash| hash.to_vec()).unwrap_or_default(),
    }
}

pub(crate) fn slot_row_from_pb(raw: pb::SlotRow) -> Result<SlotRow, Malformed> {
    Ok(SlotRow {
        id: id(&raw.id)?,
        fate: fate_from_pb(raw.fate)?.ok_or_else(|| Malformed("fate".into()))?,
        created_at: from_millis(raw.created_at_ms),
        content_sha256: if raw.content_sha256.is_empty() {
            None
        } else {
            Some(sha256(raw.content_sha256, "content_sha256")?)
        },
    })
}

pub(crate) fn fate_from_pb(raw: i32) -> Result<Option<IdFate>, Malformed> {
    match pb::IdFate::try_from(raw) {
        Ok(pb::IdFate::Unspecified) => Ok(None),
        Ok(pb::IdFate::Live) => Ok(Some(IdFate::Live)),
        Ok(pb::IdFate::Tombstoned) => Ok(Some(IdFate::Tombstoned)),
        Err(_) => Err(Malformed("fate".into())),
    }
}

pub fn insert_request(paste: &NewPaste) -> pb::InsertRequest {
    pb::InsertRequest {
        id: paste.id.to_string(),
        delete_token_sha256: paste.delete_token_hash.0.to_vec(),
        created_at_ms: to_millis(paste.created_at),
        expires_at_ms: to_millis(paste.expires_at),
        size: paste.size,
        content_sha256: paste.content_sha256.to_vec(),
        attributes: Some(attributes_to_pb(&paste.attributes)),
        key_sha256: paste.origin.map(|origin| origin.key_hash.0.to_vec()).unwrap_or_default(),
        request_sha256: paste.origin.map(|origin| origin.request_hash.0.to_vec()).unwrap_or_default(),
    }
}

/// The metadata key that carries a takedown's reason on Get's NOT_FOUND.
const REMOVED: &str = "pastebin-removed-bin";

/// Get's answer for an id the operator took down: NOT_FOUND, with the reason.
pub(crate) fn removed_status(reason: &str) -> tonic::Status {
    let mut status = tonic::Status::not_found("removed by the operator");
    status.metadata_mut().insert_bin(REMOVED, tonic::metadata::MetadataValue::from_bytes(reason.as_bytes()));
    status
}

/// The operator's reason, when a NOT_FOUND says the id was taken down.
pub(crate) fn removed_reason(status: &tonic::Status) -> Option<String> {
    let value = status.metadata().get_bin(REMOVED)?;
    let bytes = value.to_bytes().ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

pub(crate) fn takedown_to_pb(outcome: TakedownOutcome) -> i32 {
    match outcome {
        TakedownOutcome::TakenDown => pb::TakedownOutcome::TakenDown,
        TakedownOutcome::AlreadyTakenDown => pb::TakedownOutcome::AlreadyTakenDown,
        TakedownOutcome::NotFound => pb::TakedownOutcome::NotFound,
    }
    .into()
}

pub(crate) fn takedown_from_pb(raw: i32) -> Result<TakedownOutcome, Malformed> {
    match pb::TakedownOutcome::try_from(raw) {
        Ok(pb::TakedownOutcome::TakenDown) => Ok(TakedownOutcome::TakenDown),
        Ok(pb::TakedownOutcome::AlreadyTakenDown) => Ok(TakedownOutcome::AlreadyTakenDown),
        Ok(pb::TakedownOutcome::NotFound) => Ok(TakedownOutcome::NotFound),
        _ => Err(Malformed("takedown outcome".into())),
    }
}

pub(crate) fn reported_to_pb(paste: ReportedPaste) -> pb::ReportedPaste {
    pb::ReportedPaste {
        id: paste.id.to_string(),
        created_at_ms: to_millis(paste.created_at),
        size: paste.size,
        report_count: paste.report_count,
        open_reports: paste.open_reports,
        last_reported_at_ms: to_millis(paste.last_reported_at),
        sealed: paste.sealed,
        recent: paste
            .recent
            .into_iter()
            .map(|report| pb::StoredReport {
                reason: report.reason,
                note: report.note.unwrap_or_default(),
                at_ms: report.at,
                number: report.number,
            })
            .collect(),
    }
}

pub(crate) fn reported_from_pb(raw: pb::ReportedPaste) -> Result<ReportedPaste, Malformed> {
    Ok(ReportedPaste {
        id: id(&raw.id)?,
        created_at: from_millis(raw.created_at_ms),
        size: raw.size,
        report_count: raw.report_count,
        open_reports: raw.open_reports,
        last_reported_at: from_millis(raw.last_reported_at_ms),
        sealed: raw.sealed,
        recent: raw
            .recent
            .into_iter()
            .map(|report| Report {
                reason: report.reason,
                note: Some(report.note).filter(|note| !note.is_empty()),
                at: report.at_ms,
                number: report.number,
            })
            .collect(),
    })
}

pub(crate) fn dismissed_to_pb(outcome: DismissOutcome) -> pb::DismissReportResponse {
    let (outcome, open_reports) = match outcome {
        DismissOutcome::Dismissed { open_reports } => (pb::DismissOutcome::Dismissed, open_reports),
        DismissOutcome::NotFound => (pb::DismissOutcome::NotFound, 0),
    };
    pb::DismissReportResponse { outcome: outcome.into(), open_reports }
}

pub(crate) fn dismissed_from_pb(reply: pb::DismissReportResponse) -> Result<DismissOutcome, Malformed> {
    match pb::DismissOutcome::try_from(reply.outcome) {
        Ok(pb::DismissOutcome::Dismissed) => Ok(DismissOutcome::Dismissed { open_reports: reply.open_reports }),
        Ok(pb::DismissOutcome::NotFound) => Ok(DismissOutcome::NotFound),
        _ => Err(Malformed("dismiss outcome".into())),
    }
}

pub(crate) fn dismissal_from_pb(number: u64) -> Dismissal {
    match number {
        0 => Dismissal::All,
        number => Dismissal::One(number),
    }
}

pub(crate) fn dismissal_to_pb(which: Dismissal) -> u64 {
    match which {
        Dismissal::All => 0,
        Dismissal::One(number) => number,
    }
}

pub(crate) fn key_hash(raw: Vec<u8>) -> Result<KeyHash, Malformed> {
    sha256(raw, "key_sha256").map(KeyHash)
}

/// Both hashes or neither: a paste half-labelled could be adopted by the
/// wrong request.
fn origin(key_sha256: Vec<u8>, request_sha256: Vec<u8>) -> Result<Option<PasteOrigin>, Malformed> {
    if key_sha256.is_empty() && request_sha256.is_empty() {
        return Ok(None);
    }
    Ok(Some(PasteOrigin {
        key_hash: key_hash(key_sha256)?,
        request_hash: RequestHash(sha256(request_sha256, "request_sha256")?),
    }))
}

pub(crate) fn keyed_to_pb(paste: KeyedPaste) -> pb::KeyedPaste {
    pb::KeyedPaste {
        id: paste.id.to_string(),
        fate: fate_to_pb(paste.fate),
        request_sha256: paste.request_hash.0.to_vec(),
        created_at_ms: to_millis(paste.created_at),
        expires_at_ms: to_millis(paste.expires_at),
    }
}

pub(crate) fn keyed_from_pb(raw: pb::KeyedPaste) -> Result<KeyedPaste, Malformed> {
    Ok(KeyedPaste {
        id: id(&raw.id)?,
        fate: fate_from_pb(raw.fate)?.ok_or_else(|| Malformed("fate".into()))?,
        request_hash: RequestHash(sha256(raw.request_sha256, "request_sha256")?),
        created_at: from_millis(raw.created_at_ms),
        expires_at: from_millis(raw.expires_at_ms),
    })
}

pub fn new_paste(request: pb::InsertRequest) -> Result<NewPaste, Malformed> {
    if request.expires_at_ms <= request.created_at_ms {
        return Err(Malformed("expires_at must be after created_at".into()));
    }
    Ok(NewPaste {
        id: id(&request.id)?,
        delete_token_hash: DeleteTokenHash(sha256(request.delete_token_sha256, "delete_token_sha256")?),
        created_at: from_millis(request.created_at_ms),
        expires_at: from_millis(request.expires_at_ms),
        size: request.size,
        content_sha256: sha256(request.content_sha256, "content_sha256")?,
        attributes: attributes_from_pb(request.attributes)?,
        origin: origin(request.key_sha256, request.request_sha256)?,
    })
}

pub(crate) fn outcome_to_pb(outcome: InsertOutcome) -> pb::InsertResponse {
    let outcome = match outcome {
        InsertOutcome::Inserted => pb::InsertOutcome::Inserted,
        InsertOutcome::AlreadyExists => pb::InsertOutcome::AlreadyExists,
        InsertOutcome::Tombstoned => pb::InsertOutcome::Tombstoned,
    };
    pb::InsertResponse { outcome: outcome.into() }
}

pub(crate) fn outcome_from_pb(reply: pb::InsertResponse) -> Result<InsertOutcome, Malformed> {
    match pb::InsertOutcome::try_from(reply.outcome) {
        Ok(pb::InsertOutcome::Inserted) => Ok(InsertOutcome::Inserted),
        Ok(pb::InsertOutcome::AlreadyExists) => Ok(InsertOutcome::AlreadyExists),
        Ok(pb::InsertOutcome::Tombstoned) => Ok(InsertOutcome::Tombstoned),
        _ => Err(Malformed("insert outcome".into())),
    }
}

pub(crate) fn paste_to_pb(row: PasteRow) -> pb::Paste {
    pb::Paste {
        id: row.id.to_string(),
        created_at_ms: to_millis(row.created_at),
        expires_at_ms: to_millis(row.expires_at),
        size: row.size,
        content_sha256: row.content_sha256.to_vec(),
        attributes: Some(attributes_to_pb(&row.attributes)),
    }
}

pub(crate) fn paste_from_pb(raw: pb::Paste) -> Result<PasteRow, Malformed> {
    Ok(PasteRow {
        id: id(&raw.id)?,
        created_at: from_millis(raw.created_at_ms),
        expires_at: from_millis(raw.expires_at_ms),
        size: raw.size,
        content_sha256: sha256(raw.content_sha256, "content_sha256")?,
        attributes: attributes_from_pb(raw.attributes)?,
    })
}

fn attributes_to_pb(attributes: &PasteAttributes) -> pb::PasteAttributes {
    pb::PasteAttributes {
        media_type: attributes.media_type.as_ref().map(|t| t.as_str().to_owned()),
        file_name: attributes.file_name.as_ref().map(|n| n.as_str().to_owned()),
        language: attributes.language.as_ref().map(|l| l.as_str().to_owned()),
        burn_after_reading: attributes.burn_after_reading,
        sealed: attributes.sealed,
    }
}

/// An absent message is a plain text paste (what a caller that predates
/// the attributes sends).
fn attributes_from_pb(raw: Option<pb::PasteAttributes>) -> Result<PasteAttributes, Malformed> {
    let raw = raw.unwrap_or_default();
    let malformed = |e: pastebin_core::AttributeError| Malformed(format!("attributes: {e}"));
    Ok(PasteAttributes {
        media_type: raw.media_type.as_deref().map(MediaType::parse).transpose().map_err(malformed)?,
        file_name: raw.file_name.as_deref().map(FileName::parse).transpose().map_err(malformed)?,
        language: raw.language.as_deref().map(Language::parse).transpose().map_err(malformed)?,
        burn_after_reading: raw.burn_after_reading,
        sealed: raw.sealed,
    })
}

#[cfg(test)]
mod tests {
    use pastebin_core::Slot;

    use super::*;

    fn row(attributes: PasteAttributes) -> PasteRow {
        PasteRow {
            id: PasteId::mint(Slot(9)),
            created_at: from_millis(1_700_000_000_123),
            expires_at: from_millis(1_700_086_400_123),
            size: 42,
            content_sha256: [3; 32],
            attributes,
        }
    }

    #[test]
    fn a_paste_row_survives_the_wire() {
        let row = row(PasteAttributes {
            media_type: Some(MediaType::parse("image/png").unwrap()),
            file_name: Some(FileName::parse("cat.png").unwrap()),
            language: Some(Language::parse("rust").unwrap()),
            burn_after_reading: true,
            sealed: true,
        });
        assert_eq!(paste_from_pb(paste_to_pb(row.clone())).unwrap(), row);
    }

    #[test]
    fn a_row_from_a_caller_without_attributes_is_plain_text() {
        let raw = pb::Paste { attributes: None, ..paste_to_pb(row(PasteAttributes::default())) };
        assert_eq!(paste_from_pb(raw).unwrap().attributes, PasteAttributes::default());
    }

    #[test]
    fn a_bad_attribute_is_malformed() {
        let bad = pb::PasteAttributes { media_type: Some("not a type".into()), ..Default::default() };
        let raw = pb::Paste { attributes: Some(bad), ..paste_to_pb(row(PasteAttributes::default())) };
        assert!(paste_from_pb(raw).unwrap_err().0.starts_with("attributes: "));
    }

    #[test]
    fn an_insert_carries_its_origin_whole_or_not_at_all() {
        let origin = PasteOrigin { key_hash: KeyHash([1; 32]), request_hash: RequestHash([2; 32]) };
        let paste = NewPaste {
            id: PasteId::mint(Slot(9)),
            delete_token_hash: DeleteTokenHash([3; 32]),
            created_at: from_millis(1_700_000_000_000),
            expires_at: from_millis(1_700_000_060_000),
            size: 1,
            content_sha256: [4; 32],
            attributes: PasteAttributes::default(),
            origin: Some(origin),
        };
        assert_eq!(new_paste(insert_request(&paste)).unwrap(), paste);
        let unlabelled = NewPaste { origin: None, ..paste.clone() };
        assert_eq!(new_paste(insert_request(&unlabelled)).unwrap(), unlabelled);
        let half = pb::InsertRequest { request_sha256: Vec::new(), ..insert_request(&paste) };
        assert!(new_paste(half).unwrap_err().0.contains("request_sha256"));
    }

    #[test]
    fn every_fate_and_outcome_survives_the_wire() {
        for fate in [IdFate::Live, IdFate::Tombstoned] {
            assert_eq!(fate_from_pb(fate_to_pb(fate)).unwrap(), Some(fate));
        }
        for outcome in [InsertOutcome::Inserted, InsertOutcome::AlreadyExists, InsertOutcome::Tombstoned] {
            assert_eq!(outcome_from_pb(outcome_to_pb(outcome)).unwrap(), outcome);
        }
        assert_eq!(fate_from_pb(0).unwrap(), None);
        assert!(fate_from_pb(99).is_err());
    }
}
