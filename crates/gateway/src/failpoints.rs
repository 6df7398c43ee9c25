//! The saga's crash points, in saga order; armed and hit through
//! [`pastebin_runtime::failpoints`] (compiled in only with
//! `--cfg pastebin_failpoints`).

pub use pastebin_runtime::failpoints::hit;

pub const AFTER_K_BEGIN: &str = "after_k_begin";
pub const AFTER_PUT: &str = "after_put";
pub const AFTER_P_INSERT: &str = "after_p_insert";
pub const BEFORE_DONE: &str = "before_done";
pub const AFTER_DONE: &str = "after_done";
/// Adopting after a K loss: the found paste has the pending record's token,
/// and K does not know the adoption yet.
pub const AFTER_TOKEN_ROTATED: &str = "after_token_rotated";
/// The colocated create: both rows committed, the answer not yet sent.
pub const AFTER_COMMIT: &str = "after_commit";
