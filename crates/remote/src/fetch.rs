//! One ranged GET of a pinned object version, built here, checked and
//! retried.
//!
//! Every GET (objects, listings, manifests) goes through [`Fetcher`]: its
//! URL made by [`crate::url`], signed for S3, sent through the counting
//! connector (which reads no further than the range asked). One retry
//! layer: 5xx and 429 answers, broken connections and bodies that break
//! off are asked again with jittered backoff, every attempt under one
//! deadline, so a read fails in bounded time. [`Fetcher::range`] checks
//! what an answer says against the pinned version (see [`Pin`]).

use crate::answer::{self, Want};
use crate::error::FetchError;
use crate::net::{chain, is_final, is_timeout, Counters, Counting};
use crate::s3::Bucket;
use crate::Object;
use bytes::Bytes;
use std::future::Future;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// An object version being read: the [`Object`] it was opened as, and
/// what the first answer said of it. A strong ETag goes with every request
/// as `If-Match`; a weak one (or none) cannot, so every answer's ETag,
/// `Last-Modified` and total length are compared with the first's.
pub struct Pin {
    pub obj: Object,
    pub learned: std::sync::OnceLock<(Option<String>, Option<SystemTime>)>,
}

impl std::ops::Deref for Pin {
    type Target = Object;
    fn deref(&self) -> &Object {
        &self.obj
    }
}

/// What a fetch needs: the client, how to name objects, the limits.
pub struct Fetcher {
    pub client: Counting,
    /// The URL of a key relative to the location.
    pub url_of: Box<dyn Fn(&str) -> String + Send + Sync>,
    /// S3: how requests are signed.
    pub bucket: Option<Arc<Bucket>>,
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
    pub mtime: Option<SystemTime>,
}

/// An error of one attempt, and whether another may be made.
pub type Attempt<T> = Result<T, (FetchError, bool)>;

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
    /// error.
    pub async fn range(&self, pin: &Pin, range: Range<u64>) -> Result<Bytes, FetchError> {
        let obj = &pin.obj;
        let what = format!(
            "GET {} bytes {}-{}",
            self.url(&obj.key),
            range.start,
            range.end.saturating_sub(1)
        );
        let want = range.end - range.start;
        let first = pin.learned.get();
        let etag = obj.etag.clone().or_else(|| first.and_then(|f| f.0.clone()));
        let strong = etag.clone().filter(|e| crate::parse::strong_etag(e));
        let ans = self
            .get(&obj.key, Want::Range(range), strong.as_deref())
            .await
            .map_err(|e| e.named(&what))?;
        if ans.len != obj.len {
            return Err(FetchError::Changed(format!(
                "{what}: the object is now {} bytes, not {}",
                ans.len, obj.len
            )));
        }
        let first = pin
            .learned
            .get_or_init(|| (ans.etag.clone(), ans.mtime))
            .clone();
        let etag = etag.or(first.0);
        if let (Some(a), Some(b)) = (&etag, &ans.etag) {
            if a != b {
                return Err(FetchError::Changed(format!(
                    "{what}: the object changed (ETag {b}, opened as {a})"
                )));
            }
        }
        if strong.is_none() && first.1.is_some() && ans.mtime != first.1 {
            return Err(FetchError::Changed(format!(
                "{what}: the object changed (Last-Modified {:?}, opened at {:?})",
                ans.mtime, first.1
            )));
        }
        if ans.data.len() as u64 != want {
            let m = format!("{what}: {} bytes in the answer", ans.data.len());
            return Err(FetchError::failed(m));
        }
        Ok(ans.data)
    }

    /// A GET of `want` of `key` (any version unless `if_match`), with its
    /// metadata: retried under one deadline.
    pub async fn get(
        &self,
        key: &str,
        want: Want,
        if_match: Option<&str>,
    ) -> Result<Answer, FetchError> {
        let url = (self.url_of)(key);
        let mut headers = Vec::new();
        if let Some(r) = want.header() {
            headers.push((http::header::RANGE, r));
        }
        log::debug!("GET {key} {}", want.header().unwrap_or_default());
        if let Some(t) = if_match {
            headers.push((http::header::IF_MATCH, t.to_string()));
        }
        let a = self
            .retried(&self.url(key), || async {
                let res = self.send(&url, &headers).await?;
                answer::object(res, &want).await
            })
            .await?;
        Counters::add(&self.counters.bytes, a.data.len() as u64);
        Ok(a)
    }

    /// One GET of `url` with `headers`, signed for S3: the answer, its
    /// body unread (the connector bounds it). A failure to connect may be
    /// retried.
    pub async fn send(
        &self,
        url: &str,
        headers: &[(http::HeaderName, String)],
    ) -> Attempt<object_store::client::HttpResponse> {
        let mut req = http::Request::get(url);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let mut req = req
            .body(object_store::client::HttpRequestBody::empty())
            .map_err(|e| (FetchError::invalid(e.to_string()), false))?;
        if let Some(b) = &self.bucket {
            b.sign(&mut req).await.map_err(|e| (e, false))?;
        }
        self.client.execute(req).await.map_err(|e| {
            let again = !is_final(&e);
            (classify(&e), again)
        })
    }

    /// `attempt` until it succeeds or fails for good, at most
    /// [`Fetcher::retries`] times more, all within [`Fetcher::budget`].
    /// (`what` names it in the debug log.)
    pub async fn retried<T, F, Fut>(&self, what: &str, attempt: F) -> Result<T, FetchError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Attempt<T>>,
    {
        let deadline = Instant::now() + self.budget();
        let mut n = 0;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let err = match tokio::time::timeout(left, attempt()).await {
                Err(_) => {
                    let m = format!("no complete answer in {:?}", self.budget());
                    return Err(FetchError::timed_out(m));
                }
                Ok(Ok(a)) => return Ok(a),
                Ok(Err((e, false))) => return Err(e),
                Ok(Err((e, true))) => e,
            };
            if n >= self.retries || Instant::now() >= deadline {
                return Err(err);
            }
            n += 1;
            Counters::add(&self.counters.retries, 1);
            log::debug!("{what}: {err:?}; retrying");
            tokio::time::sleep(backoff(n)).await;
        }
    }
}

/// See [`Fetcher::budget`].
pub fn budget(timeout: Duration) -> Duration {
    timeout * 2 + Duration::from_secs(1)
}

/// Jittered exponential backoff: ~100 ms, 200 ms, 400 ms ... (at most 2 s).
fn backoff(attempt: u32) -> Duration {
    let base = 100u64 << attempt.min(4).saturating_sub(1);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    Duration::from_millis((base / 2 + nanos % base.max(1)).min(2000))
}

/// A failed request (or body) as a [`FetchError`].
pub fn classify(e: &object_store::client::HttpError) -> FetchError {
    if is_timeout(e) {
        FetchError::timed_out(chain(e))
    } else {
        FetchError::failed(plain_hint(chain(e)))
    }
}

/// A TLS handshake answered with something that is not TLS (rustls:
/// `InvalidContentType`, a corrupt message): most likely `https://`
/// spoken to a plain-HTTP server; say so.
fn plain_hint(m: String) -> String {
    if m.contains("InvalidContentType") || m.contains("corrupt message") {
        format!("{m}: the server answered without TLS: is it an http:// server?")
    } else {
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_request_is_a_timeout_or_a_failure() {
        use crate::error::{errno_of, failed};
        use object_store::client::{HttpError, HttpErrorKind};
        // Answered as the store failing (the errno of `failed`).
        let failure = |f: &FetchError| errno_of(&f.clone().into_io()) == errno_of(&failed(""));
        let e = HttpError::new(HttpErrorKind::Timeout, std::io::Error::other("slow"));
        assert!(classify(&e).is_timeout());
        let e = HttpError::new(HttpErrorKind::Connect, std::io::Error::other("refused"));
        let f = classify(&e);
        assert!(failure(&f) && matches!(f, FetchError::Io(_, ref m) if !m.contains("http://")));
        let tls = std::io::Error::other("received corrupt message of type InvalidContentType");
        let f = classify(&HttpError::new(HttpErrorKind::Connect, tls));
        assert!(failure(&f));
        assert!(matches!(f, FetchError::Io(_, ref m) if m.ends_with("is it an http:// server?")));
        let e = FetchError::Gone("404".into());
        assert_eq!(e.into_io().kind(), std::io::ErrorKind::NotFound);
        let d = FetchError::Changed("x".into()).into_decode();
        assert_eq!(d.kind, blosc_decode::error::ErrorKind::Changed);
        let n = FetchError::NoRange("416".into()).named("GET x");
        assert!(matches!(n, FetchError::NoRange(ref m) if m == "GET x: 416"));
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
