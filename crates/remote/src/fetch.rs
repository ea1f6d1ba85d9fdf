//! One ranged GET of a pinned object version, checked and retried.
//!
//! object_store refuses a `200` answer to a ranged request and a
//! `Content-Range` other than the one asked for, and retries connection
//! failures and 5xx answers itself (bounded by `RetryConfig`). On top of
//! that, this checks what it does not: the object's ETag and total length
//! (`Content-Range`) against the pinned ones, and the body's length (the
//! client reads it no further than the range: a body that goes on is
//! refused); and retries a body that breaks off mid-way. Every attempt
//! runs under one deadline, so a read fails in bounded time.

use crate::net::{chain, is_timeout, is_too_long, Counters};
use crate::Object;
use bytes::Bytes;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore};
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why a fetch failed.
#[derive(Clone, Debug)]
pub enum FetchError {
    /// The object is not the version that was opened (or is gone).
    Changed(String),
    /// The object is not there (404): `ENOENT` for a stat, a changed
    /// object for a read of an opened one.
    Gone(String),
    /// Anything else, with the errno to report.
    Io(i32, String),
    /// A read-ahead was called off before it finished (internal).
    Cancelled,
}

impl FetchError {
    /// Into the library's error.
    pub fn into_decode(self) -> blosc_decode::Error {
        match self {
            FetchError::Changed(m) | FetchError::Gone(m) => blosc_decode::Error::changed(m),
            FetchError::Io(n, m) => blosc_decode::Error::io(n, m),
            FetchError::Cancelled => blosc_decode::Error::io(libc::EIO, "read-ahead cancelled"),
        }
    }
    /// Into an `std::io::Error` (a changed object is `ESTALE`).
    pub fn into_io(self) -> std::io::Error {
        match self {
            FetchError::Changed(m) => crate::net::io_err(libc::ESTALE, m),
            FetchError::Gone(m) => crate::net::io_err(libc::ENOENT, m),
            FetchError::Io(n, m) => crate::net::io_err(n, m),
            FetchError::Cancelled => crate::net::io_err(libc::EIO, "read-ahead cancelled"),
        }
    }
}

/// An object version being read: the [`Object`] it was opened as, and the
/// ETag learnt from the first answer if it was opened without one.
pub struct Pin {
    pub obj: Object,
    pub learned: std::sync::OnceLock<String>,
}

impl std::ops::Deref for Pin {
    type Target = Object;
    fn deref(&self) -> &Object {
        &self.obj
    }
}

/// What a fetch needs: the store, how to name objects, the limits.
pub struct Fetcher {
    pub store: Arc<dyn ObjectStore>,
    /// The store path of a key relative to the location.
    pub path_of: Box<dyn Fn(&str) -> Path + Send + Sync>,
    /// The location as typed, for messages (`s3://b/prefix`).
    pub shown: String,
    pub counters: Arc<Counters>,
    pub timeout: Duration,
    pub retries: u32,
}

/// The metadata an answer carried.
pub struct Answer {
    pub data: Bytes,
    /// The object's total length (from `Content-Range`).
    pub len: u64,
    pub etag: Option<String>,
    pub mtime: Option<std::time::SystemTime>,
}

impl Fetcher {
    /// How a key is named in messages.
    pub fn url(&self, key: &str) -> String {
        if key.is_empty() {
            self.shown.clone()
        } else {
            format!("{}/{key}", self.shown.trim_end_matches('/'))
        }
    }

    /// The longest a read may take, retries included: twice the request
    /// timeout and a second (quick failures are retried within it; a
    /// stalled server uses it up in two attempts).
    pub fn budget(&self) -> Duration {
        budget(self.timeout)
    }

    /// `range` of the pinned version `pin`: exactly those bytes, or an
    /// error. An object opened without an ETag is pinned to the first one
    /// an answer carries.
    pub async fn range(&self, pin: &Pin, range: Range<u64>) -> Result<Bytes, FetchError> {
        let obj = &pin.obj;
        let what = format!(
            "GET {} bytes {}-{}",
            self.url(&obj.key),
            range.start,
            range.end.saturating_sub(1)
        );
        let want = range.end - range.start;
        let etag = obj.etag.clone().or_else(|| pin.learned.get().cloned());
        let ans = self
            .get(obj, GetRange::Bounded(range), etag.clone())
            .await
            .map_err(|e| prefix(e, &what))?;
        if ans.len != obj.len {
            return Err(FetchError::Changed(format!(
                "{what}: the object is now {} bytes, not {}",
                ans.len, obj.len
            )));
        }
        let etag = match (etag, &ans.etag) {
            (None, Some(b)) => Some(pin.learned.get_or_init(|| b.clone()).clone()),
            (a, _) => a,
        };
        if let (Some(a), Some(b)) = (&etag, &ans.etag) {
            if a != b {
                return Err(FetchError::Changed(format!(
                    "{what}: the object changed (ETag {b}, opened as {a})"
                )));
            }
        }
        if ans.data.len() as u64 != want {
            return Err(FetchError::Io(
                libc::EIO,
                format!("{what}: {} bytes in the answer", ans.data.len()),
            ));
        }
        Ok(ans.data)
    }

    /// A GET of `range` of `key` (any version unless `if_match`), with its
    /// metadata: retried when the body breaks off, under one deadline.
    pub async fn get(
        &self,
        obj: &Object,
        range: GetRange,
        if_match: Option<String>,
    ) -> Result<Answer, FetchError> {
        let path = (self.path_of)(&obj.key);
        let opts = GetOptions {
            range: Some(range),
            if_match,
            ..Default::default()
        };
        let deadline = Instant::now() + self.budget();
        let mut attempt = 0;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let once = tokio::time::timeout(left, self.once(&path, opts.clone())).await;
            let err = match once {
                Err(_) => {
                    return Err(FetchError::Io(
                        libc::ETIMEDOUT,
                        format!("no complete answer in {:?}", self.budget()),
                    ))
                }
                Ok(Ok(a)) => {
                    Counters::add(&self.counters.bytes, a.data.len() as u64);
                    return Ok(a);
                }
                Ok(Err((e, false))) => return Err(e),
                Ok(Err((e, true))) => e,
            };
            if attempt >= self.retries || Instant::now() >= deadline {
                return Err(err);
            }
            attempt += 1;
            Counters::add(&self.counters.retries, 1);
            log::debug!("{}: {err:?}; retrying", self.url(&obj.key));
            tokio::time::sleep(backoff(attempt)).await;
        }
    }

    /// One request; the error says whether it may be retried.
    async fn once(&self, path: &Path, opts: GetOptions) -> Result<Answer, (FetchError, bool)> {
        let res = self.store.get_opts(path, opts).await.map_err(|e| {
            let e = classify(e);
            (e, false)
        })?;
        let meta = res.meta.clone();
        let want = res.range.end - res.range.start;
        // A body longer than its range is cut off by the client (never
        // read further, not asked for again).
        let data = res.bytes().await.map_err(|e| {
            let again = !is_too_long(&e);
            (classify(e), again)
        })?;
        if data.len() as u64 != want {
            let m = format!("the answer broke off after {} of {want} bytes", data.len());
            return Err((FetchError::Io(libc::EIO, m), true));
        }
        Ok(Answer {
            data,
            len: meta.size,
            etag: meta.e_tag,
            mtime: Some(meta.last_modified.into()),
        })
    }
}

/// See [`Fetcher::budget`].
pub fn budget(timeout: Duration) -> Duration {
    timeout * 2 + Duration::from_secs(1)
}

fn prefix(e: FetchError, what: &str) -> FetchError {
    match e {
        FetchError::Changed(m) => FetchError::Changed(format!("{what}: {m}")),
        FetchError::Gone(m) => FetchError::Gone(format!("{what}: {m}")),
        FetchError::Io(n, m) => FetchError::Io(n, format!("{what}: {m}")),
        FetchError::Cancelled => FetchError::Cancelled,
    }
}

/// Jittered exponential backoff: ~100 ms, 200 ms, 400 ms ... (at most 2 s).
fn backoff(attempt: u32) -> Duration {
    let base = 100u64 << attempt.min(4).saturating_sub(1);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    Duration::from_millis((base / 2 + nanos % base.max(1)).min(2000))
}

/// An object_store error as a [`FetchError`], without the store's noise.
pub fn classify(e: object_store::Error) -> FetchError {
    use object_store::Error as E;
    match &e {
        E::Precondition { .. } => {
            FetchError::Changed("the object changed (412 Precondition Failed)".into())
        }
        E::NotFound { .. } => FetchError::Gone("no such object (404)".into()),
        _ if is_timeout(&e) => FetchError::Io(libc::ETIMEDOUT, chain(&e)),
        _ => FetchError::Io(libc::EIO, chain(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_errnos() {
        let gen = |m: &str| object_store::Error::Generic {
            store: "S3",
            source: Box::new(std::io::Error::other(m.to_string())),
        };
        let timed_out = classify(gen("error sending request: operation timed out"));
        assert!(matches!(timed_out, FetchError::Io(libc::ETIMEDOUT, _)));
        assert!(matches!(
            classify(gen("503 Slow Down")),
            FetchError::Io(libc::EIO, _)
        ));
        let pre = object_store::Error::Precondition {
            path: "k".into(),
            source: "412".into(),
        };
        assert!(matches!(classify(pre), FetchError::Changed(_)));
        let gone = object_store::Error::NotFound {
            path: "k".into(),
            source: "404".into(),
        };
        let e = classify(gone);
        assert!(matches!(e, FetchError::Gone(_)));
        assert_eq!(e.clone().into_io().kind(), std::io::ErrorKind::NotFound);
        assert_eq!(crate::net::errno_of(&e.into_io()), libc::ENOENT);
        let d = FetchError::Changed("x".into()).into_decode();
        assert_eq!(d.kind, blosc_decode::error::ErrorKind::Changed);
    }

    #[test]
    fn backoff_is_bounded_and_grows() {
        for a in 1..10 {
            let b = backoff(a);
            assert!(b <= Duration::from_secs(2), "{a}: {b:?}");
            assert!(b >= Duration::from_millis(50 << a.min(4).saturating_sub(1)));
        }
    }
}
