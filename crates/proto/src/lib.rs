//! Generated code for the three gRPC APIs under `proto/`: the key service
//! (shard K), the paste service (shard P) and the public paste API, the
//! shard description both shard services answer with, plus the
//! encoded file descriptor set every server registers for reflection.

/// What K and P say about themselves (`Describe`).
pub mod shard {
    pub mod v1 {
        tonic::include_proto!("pastebin.shard.v1");
    }
}

pub mod keys {
    pub mod v1 {
        tonic::include_proto!("pastebin.keys.v1");
    }
}

pub mod pastes {
    pub mod v1 {
        tonic::include_proto!("pastebin.pastes.v1");
    }
}

pub mod api {
    pub mod v1 {
        tonic::include_proto!("pastebin.v1");
    }
}

/// For `tonic_reflection`: describes every service above.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("pastebin_descriptor");
