//! Generated code for the gRPC APIs under `proto/`: the key service
//! (shard K), the paste service (shard P), the colocated create of a shard
//! serving both, and the public paste API, each
//! with the encoded file descriptor set its server hands to reflection, and
//! the shard description both shard services answer `Describe` with.

/// What K and P say about themselves (`Describe`).
pub mod shard {
    pub mod v1 {
        tonic::include_proto!("pastebin.shard.v1");
    }
}

pub mod keys {
    pub mod v1 {
        tonic::include_proto!("pastebin.keys.v1");

        /// For `tonic_reflection`: describes the key service alone.
        pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("keys_descriptor");
    }
}

pub mod pastes {
    pub mod v1 {
        tonic::include_proto!("pastebin.pastes.v1");

        /// For `tonic_reflection`: describes the paste service alone.
        pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("pastes_descriptor");
    }
}

/// The one-commit create of a shard serving both kinds (docs/design.md#the-colocated-create).
pub mod colocated {
    pub mod v1 {
        tonic::include_proto!("pastebin.colocated.v1");

        /// For `tonic_reflection`: describes the colocated create alone.
        pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("colocated_descriptor");
    }
}

pub mod api {
    pub mod v1 {
        tonic::include_proto!("pastebin.v1");

        /// For `tonic_reflection`: describes the public paste API alone.
        pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("api_descriptor");
    }
}

mod redacted;
