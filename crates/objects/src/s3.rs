//! Any S3-compatible service as the object store, through aws-sdk-s3.
//!
//! Create-only is `If-None-Match: *` on PutObject: the service answers 412 when the key
//! exists. The SDK's own retries are off: a retried PUT inside one saga step would blur
//! "did not happen" into "maybe", and the saga already has one retry policy (the client's).

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{BucketLocationConstraint, CreateBucketConfiguration};
use aws_sdk_s3::Client;
use bytes::Bytes;

use crate::{object_key, ObjectError, ObjectInfo, ObjectStore, PutOutcome, PREFIX};

/// Long enough for a TCP handshake to a healthy server, short enough that a dead endpoint
/// fails well inside the saga's 2 s budget instead of eating all of it.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// ListObjectsV2 never returns more than this per page.
const MAX_LIST_PAGE: usize = 1000;

/// The region in which CreateBucket must not name a location constraint.
const DEFAULT_REGION: &str = "us-east-1";

/// Where the objects live and how to reach the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Settings {
    pub bucket: String,
    /// An S3-compatible server (`http://127.0.0.1:9000`); `None` for AWS itself.
    pub endpoint: Option<String>,
    pub region: String,
    /// `http://host/bucket/key` instead of `http://bucket.host/key`; most self-hosted
    /// servers need it.
    pub force_path_style: bool,
}

#[derive(Debug, Clone)]
pub struct S3Store {
    client: Client,
    bucket: String,
    /// Kept for CreateBucket's location constraint.
    region: String,
}

impl S3Store {
    /// Credentials from the standard AWS chain (env vars AWS_ACCESS_KEY_ID etc., profile) via aws-config; endpoint override for S3-compatible servers.
    ///
    /// Makes no request: the gateway may start while the store is down, and every call
    /// reports unreachability as [`ObjectError::Uncertain`] on its own.
    pub async fn connect(settings: S3Settings) -> Result<Self, ObjectError> {
        if settings.bucket.is_empty() {
            return Err(ObjectError::Refused("S3 bucket name is empty".into()));
        }
        let shared = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(settings.region.clone()))
            .retry_config(RetryConfig::disabled())
            .timeout_config(TimeoutConfig::builder().connect_timeout(CONNECT_TIMEOUT).build())
            .load()
            .await;
        let mut config = aws_sdk_s3::config::Builder::from(&shared).force_path_style(settings.force_path_style);
        if let Some(endpoint) = settings.endpoint {
            config = config.endpoint_url(endpoint);
        }
        Ok(Self { client: Client::from_conf(config.build()), bucket: settings.bucket, region: settings.region })
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// For dev/tests and the operator: create the bucket if absent.
    pub async fn ensure_bucket(&self) -> Result<(), ObjectError> {
        let mut request = self.client.create_bucket().bucket(&self.bucket);
        if self.region != DEFAULT_REGION {
            let location = BucketLocationConstraint::from(self.region.as_str());
            request = request.create_bucket_configuration(
                CreateBucketConfiguration::builder().location_constraint(location).build(),
            );
        }
        match request.send().await {
            Ok(_) => Ok(()),
            Err(e) => match S3Failure::classify("create bucket", &self.bucket, e) {
                failure if failure.meaning == Meaning::BucketAlreadyOwned => Ok(()),
                failure => Err(failure.into()),
            },
        }
    }
}

/// The S3 calls behind [`ObjectStore`], by whole object key: the create-only probe
/// (`probe.rs`) writes outside `pastes/`, where the reaper never looks.
impl S3Store {
    pub(crate) async fn put_key(&self, key: &str, content: Bytes) -> Result<PutOutcome, ObjectError> {
        let sent = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .if_none_match("*")
            .body(ByteStream::from(content))
            .send()
            .await;
        match sent {
            Ok(_) => Ok(PutOutcome::Created),
            Err(e) => match S3Failure::classify("put", key, e) {
                failure if failure.meaning == Meaning::PreconditionFailed => Ok(PutOutcome::AlreadyExists),
                failure => Err(failure.into()),
            },
        }
    }

    pub(crate) async fn get_key(&self, key: &str) -> Result<Option<Bytes>, ObjectError> {
        let response = match self.client.get_object().bucket(&self.bucket).key(key).send().await {
            Ok(response) => response,
            Err(e) => match S3Failure::classify("get", key, e) {
                failure if failure.meaning == Meaning::NoSuchKey => return Ok(None),
                failure => return Err(failure.into()),
            },
        };
        // The headers arrived but the body can still be cut off mid-stream.
        let body =
            response.body.collect().await.map_err(|e| {
                ObjectError::Uncertain(format!("get {key}: reading the body: {}", DisplayErrorContext(&e)))
            })?;
        Ok(Some(body.into_bytes()))
    }

    pub(crate) async fn delete_key(&self, key: &str) -> Result<(), ObjectError> {
        // S3 answers 204 for an absent key already; some compatible servers answer 404.
        match self.client.delete_object().bucket(&self.bucket).key(key).send().await {
            Ok(_) => Ok(()),
            Err(e) => match S3Failure::classify("delete", key, e) {
                failure if failure.meaning == Meaning::NoSuchKey => Ok(()),
                failure => Err(failure.into()),
            },
        }
    }
}

#[async_trait::async_trait]
impl ObjectStore for S3Store {
    #[tracing::instrument(skip_all, fields(%paste_id), err)]
    async fn put(&self, paste_id: &str, content: Bytes) -> Result<PutOutcome, ObjectError> {
        self.put_key(&object_key(paste_id), content).await
    }

    async fn get(&self, paste_id: &str) -> Result<Option<Bytes>, ObjectError> {
        self.get_key(&object_key(paste_id)).await
    }

    #[tracing::instrument(skip_all, fields(%paste_id), err)]
    async fn delete(&self, paste_id: &str) -> Result<(), ObjectError> {
        self.delete_key(&object_key(paste_id)).await
    }

    async fn list(&self, after: Option<&str>, limit: usize) -> Result<Vec<ObjectInfo>, ObjectError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let max_keys = limit.min(MAX_LIST_PAGE) as i32; // ≤ 1000, cannot truncate
        let mut request = self.client.list_objects_v2().bucket(&self.bucket).prefix(PREFIX).max_keys(max_keys);
        if let Some(after) = after {
            request = request.start_after(object_key(after));
        }
        let page = request.send().await.map_err(|e| ObjectError::from(S3Failure::classify("list", PREFIX, e)))?;
        Ok(page
            .contents()
            .iter()
            .filter_map(|object| {
                let paste_id = object.key()?.strip_prefix(PREFIX)?.to_owned();
                // A listing without LastModified is a broken server; counting the object
                // as brand new keeps the reaper away from it, the safe direction.
                let created_at = object.last_modified().and_then(to_chrono).unwrap_or_else(chrono::Utc::now);
                let size = object.size().and_then(|s| u64::try_from(s).ok()).unwrap_or(0);
                Some(ObjectInfo { paste_id, created_at, size })
            })
            .collect())
    }
}

fn to_chrono(t: &aws_sdk_s3::primitives::DateTime) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp(t.secs(), t.subsec_nanos())
}

/// The answers a caller may treat as something other than an error.
#[derive(Debug, PartialEq, Eq)]
enum Meaning {
    /// 404 NoSuchKey: the object is absent (get → None, delete → Ok).
    NoSuchKey,
    /// 412: a create-only PUT found the object already there.
    PreconditionFailed,
    /// CreateBucket on a bucket we already own.
    BucketAlreadyOwned,
    Refused,
    Uncertain,
}

/// One S3 failure, classified once for every operation (see [`S3Failure::classify`]).
struct S3Failure {
    meaning: Meaning,
    message: String,
}

impl S3Failure {
    /// The one place that decides what an S3 failure means for the saga.
    ///
    /// - The service answered 4xx: it refused, nothing happened. Except 412 (the object
    ///   exists), 404 NoSuchKey (absent), and 409 ConditionalRequestConflict: a concurrent
    ///   conditional write to the same key was in flight, which may have been ours.
    /// - The service answered 5xx: S3 may have applied the write before failing.
    /// - No answer (connect refused, timeout, reset) or an unreadable one: maybe.
    /// - The request could not even be built: it never left the process.
    ///
    /// 404 with any other code (NoSuchBucket) is Refused, never "absent": a missing bucket
    /// must not make every paste look deleted.
    fn classify<E>(op: &str, target: &str, err: SdkError<E>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let code = err.code().map(str::to_owned);
        let message = format!("{op} {target}: {}", DisplayErrorContext(&err));
        let meaning = match &err {
            SdkError::ServiceError(service) => match (service.raw().status().as_u16(), code.as_deref()) {
                (404, Some("NoSuchKey")) => Meaning::NoSuchKey,
                (412, _) => Meaning::PreconditionFailed,
                (409, Some("BucketAlreadyOwnedByYou")) => Meaning::BucketAlreadyOwned,
                (409, Some("ConditionalRequestConflict")) => Meaning::Uncertain,
                (400..=499, _) => Meaning::Refused,
                _ => Meaning::Uncertain,
            },
            SdkError::ConstructionFailure(_) => Meaning::Refused,
            // TimeoutError, DispatchFailure, ResponseError, and any kind added later.
            _ => Meaning::Uncertain,
        };
        Self { meaning, message }
    }
}

impl From<S3Failure> for ObjectError {
    /// For a caller that did not expect the special meanings, they are plain refusals:
    /// each is a 4xx answer after which nothing changed.
    fn from(failure: S3Failure) -> Self {
        match failure.meaning {
            Meaning::Uncertain => ObjectError::Uncertain(failure.message),
            _ => ObjectError::Refused(failure.message),
        }
    }
}
