pub mod postgres;
pub mod s3;
