//! Who owns which slots, kept where a shard's own database cannot make it
//! forget (docs/design.md#ownership-on-etcd). For each kind of shard one
//! [`Topology`] lists every shard's [`Grant`] (its slots and the marker of
//! its database) and the move in progress; a version that only grows orders
//! them. Every change is a pure function of the topology read
//! ([`grants`]) stored by compare-and-swap ([`authority::change`]), so two
//! writers never both succeed from the same read.
//!
//! - [`grants`]: the topology, what a shard may serve under it, and each
//!   step of a move, pure;
//! - [`authority`]: read, swap and watch, the one interface every part asks;
//! - [`etcd`]: that interface on etcd (a deployment);
//! - [`memory`]: on one process's memory (tests, the simulation);
//! - [`url`]: the `--topology etcd://…` flag.

pub mod authority;
pub mod etcd;
pub mod grants;
pub mod memory;
pub mod url;

mod pb {
    pub mod mvccpb {
        tonic::include_proto!("mvccpb");
    }
    pub mod etcdserverpb {
        tonic::include_proto!("etcdserverpb");
    }
}

pub use authority::{change, patiently, Authority, AuthorityError, ChangeError, Read, Swap};
pub use etcd::EtcdAuthority;
pub use grants::{Confirmation, Grant, Kind, Move, Phase, Refused, Serving, ShardStep, Topology};
pub use memory::MemoryAuthority;
pub use url::TopologyUrl;
