//! The integration tests, one module per concern, in one test binary.
//!
//! One binary instead of one per file: each test binary links the whole
//! workspace, and on a small machine linking dominated the test build. Shared
//! helpers (the cluster of real processes, throwaway PostgreSQL databases, the
//! SeaweedFS S3 server, shard fixtures) live in the `pastebin_tests` library.
//!
//! Run one module with `cargo test -p pastebin-tests --test it saga::`.

mod adopt;
mod answer_after_done;
mod backups;
mod batched_recovery;
mod browser;
mod browser_reader;
mod client;
mod client_cli;
mod client_tls;
mod colocated;
mod compose_topology;
mod concurrency;
mod create_only;
mod ctl_honesty;
mod delete_token;
mod divergence;
mod durability;
mod edge;
mod etcd_harness;
mod failover;
mod fence;
mod full_disk;
mod gateway_api;
mod group_commit;
mod grpc_services;
mod harness;
mod keeping;
mod key_store;
mod living_with_moves;
mod local_up;
mod locks;
mod moderation;
mod mtls;
mod objects;
mod openapi;
mod operators;
mod overlapping_attempts;
mod ownership;
mod page_costs;
mod paste_store;
mod read_cache;
mod reader;
mod reader_store;
mod readiness;
mod readme;
mod recovery_invariants;
mod reflection;
mod reshard;
mod reshard_mistakes;
mod reshard_preflight;
mod saga;
mod sealed;
mod shard_identity;
mod shedding;
mod silent_shard;
mod stopping;
mod store_faults;
mod sweeper;
mod telemetry;
mod upgrades;
