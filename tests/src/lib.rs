pub mod api;
pub mod browser;
pub mod cluster;
pub mod freezer;
pub mod postgres;
pub mod s3;
pub mod shards;
pub mod tls;
