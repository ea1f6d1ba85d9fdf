//! The network runtime, request counting and error mapping.

use crate::redirect::{Guarded, Redirects};
use crate::session::Session;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpRequestBody,
    HttpResponse, HttpResponseBody, HttpService,
};
use object_store::ClientOptions;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The one small runtime every remote shares: 2 worker threads named
/// `bloscfs-net`.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("bloscfs-net")
            .enable_all()
            .build()
            .expect("cannot start the network runtime")
    })
}

/// Run `fut` to completion from a synchronous caller (a FUSE thread). From
/// inside a runtime (where blocking would stall it), on a helper thread.
pub fn block_on<F>(fut: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    if tokio::runtime::Handle::try_current().is_err() {
        return runtime().block_on(fut);
    }
    std::thread::scope(|s| {
        s.spawn(|| runtime().block_on(fut))
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// Requests made so far by one [`crate::Remote`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// GET requests for object bytes (ranged or whole).
    pub gets: u64,
    /// Listing requests (S3 `ListObjectsV2`, the S3-style XML listing,
    /// Caterva2 `/api/list`) and Caterva2 logins. (A manifest is a GET.)
    pub lists: u64,
    /// Body bytes received by reads.
    pub bytes: u64,
    /// Requests repeated after a failure.
    pub retries: u64,
    /// Reads, listings and stats that failed in the end.
    pub errors: u64,
}

/// The live counters behind [`Stats`].
#[derive(Debug, Default)]
pub struct Counters {
    pub gets: AtomicU64,
    pub lists: AtomicU64,
    pub bytes: AtomicU64,
    pub retries: AtomicU64,
    pub errors: AtomicU64,
}

impl Counters {
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
    pub fn snapshot(&self) -> Stats {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Stats {
            gets: g(&self.gets),
            lists: g(&self.lists),
            bytes: g(&self.bytes),
            retries: g(&self.retries),
            errors: g(&self.errors),
        }
    }
}

/// An HTTP client that counts every request it sends (a listing is a GET
/// whose query or path asks for one, or a POST; everything else a GET).
#[derive(Debug, Clone)]
pub struct Counting {
    inner: HttpClient,
    counters: Arc<Counters>,
    /// A Caterva2 login: its cookie goes with every request, and a 401
    /// answer to a GET logs in again and repeats the GET once.
    session: Option<Arc<Session>>,
    /// The client of object_store's credential requests: plain HTTP
    /// allowed (the instance metadata service and container credentials
    /// are `http://` addresses on the local link), no redirect followed.
    credentials: HttpClient,
}

/// How the one HTTP client of a remote is set up.
#[derive(Clone)]
pub struct Setup {
    /// Per request (the connection: half of it, at most 5 s).
    pub timeout: Duration,
    /// Plain `http://` allowed (the location or endpoint is one).
    pub allow_http: bool,
    /// Certificate authorities trusted besides the system's (`-o ca_file=`).
    pub roots: Vec<rustls::pki_types::CertificateDer<'static>>,
    /// Which redirects are followed.
    pub redirects: Redirects,
}

impl Setup {
    /// The most a connection (TCP and TLS handshake) may take: half the
    /// request's time (so that its own bound, not the request's, ends a
    /// connect that stalls), at most 5 s.
    fn connect_bound(&self) -> Duration {
        (self.timeout / 2).min(Duration::from_secs(5))
    }

    /// The reqwest client: HTTP/1.1, no compression (a ranged body is the
    /// stored bytes), a host's addresses shuffled, redirects as
    /// [`Setup::redirects`] says, TLS and the connect bound as
    /// [`crate::handshake`] sets them up.
    fn client(&self) -> Result<reqwest::Client, String> {
        let tls = crate::handshake::config(&self.roots).map_err(|e| chain(&e))?;
        reqwest::Client::builder()
            .user_agent(concat!("bloscfs/", env!("CARGO_PKG_VERSION")))
            .timeout(self.timeout)
            .connector_layer(crate::handshake::Bounded(self.connect_bound()))
            .use_preconfigured_tls(tls)
            .http1_only()
            .no_gzip()
            .no_brotli()
            .no_zstd()
            .no_deflate()
            .https_only(!self.allow_http)
            .dns_resolver(Arc::new(crate::resolve::Shuffled))
            .redirect(self.redirects.policy())
            .build()
            .map_err(|e| chain(&e))
    }
}

impl Counting {
    /// A client set up as `setup` says, counting into `counters`.
    pub fn new(
        setup: &Setup,
        counters: Arc<Counters>,
        session: Option<Arc<Session>>,
    ) -> std::io::Result<Self> {
        let plain = Setup {
            allow_http: true,
            redirects: Redirects::None,
            ..setup.clone()
        };
        Ok(Counting {
            inner: guarded(setup)?,
            counters,
            session,
            credentials: guarded(&plain)?,
        })
    }
    /// Send a request (counted). The body of its answer is read no
    /// further than what was asked: the range's length, or
    /// [`MAX_DOCUMENT`] for a request that is not for a range. A server
    /// that sends more, or an endless body, costs what was asked.
    pub async fn execute(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let bound = asked(&req);
        let at = req.uri().authority().map(|a| a.to_string());
        let res = self
            .send(req)
            .await
            .map_err(|e| crate::handshake::naming(e, at))?;
        Ok(match bound {
            Some(max) => at_most(res, max),
            None => res,
        })
    }

    async fn send(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let c = &self.counters;
        let q = req.uri().query().unwrap_or("");
        let path = req.uri().path();
        if q.contains("list-type=") || path.contains("/api/list/") || req.method() != "GET" {
            Counters::add(&c.lists, 1);
        } else {
            Counters::add(&c.gets, 1);
        }
        let Some(s) = &self.session else {
            return self.inner.execute(req).await;
        };
        let again = (req.method() == "GET").then(|| {
            let mut r = http::Request::get(req.uri().clone())
                .body(HttpRequestBody::empty())
                .expect("a copy of a valid request");
            *r.headers_mut() = req.headers().clone();
            r
        });
        let (res, seen) = s.send(&self.inner, req).await?;
        match again {
            Some(r) if res.status() == 401 => {
                if let Err(e) = s.relogin(&self.inner, seen).await {
                    log::warn!("{e}");
                    return Ok(res);
                }
                Counters::add(&c.retries, 1);
                Ok(s.send(&self.inner, r).await?.0)
            }
            _ => Ok(res),
        }
    }
}

#[async_trait::async_trait]
impl HttpService for Counting {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        self.execute(req).await
    }
}

/// The client `setup` describes, its redirects refused as it says.
fn guarded(setup: &Setup) -> std::io::Result<HttpClient> {
    let client = setup
        .client()
        .map_err(|e| crate::error::invalid(format!("cannot set up the HTTP client: {e}")))?;
    Ok(HttpClient::new(Guarded::new(client, setup.redirects)))
}

impl HttpConnector for Counting {
    /// object_store asks for a client allowing plain HTTP only for its
    /// credential requests (instance metadata, container credentials):
    /// those go through [`Counting::credentials`], the store's through this
    /// client (an `https://` store's client refuses `http://` URLs).
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        use object_store::ClientConfigKey::AllowHttp;
        if options.get_config_value(&AllowHttp).as_deref() == Some("true") {
            return Ok(HttpClient::new(Counting {
                inner: self.credentials.clone(),
                session: None,
                ..self.clone()
            }));
        }
        Ok(HttpClient::new(self.clone()))
    }
}

/// Is `e` (or anything under it) a timeout?
pub fn is_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(e) = cur {
        if let Some(h) = e.downcast_ref::<HttpError>() {
            if h.kind() == HttpErrorKind::Timeout {
                return true;
            }
        }
        if e.to_string().contains("timed out") {
            return true;
        }
        cur = e.source();
    }
    false
}

/// The whole chain of an error's messages, `a: b: c`, for a log line or a
/// reply (object_store puts the useful part, such as the HTTP status, deep).
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(inner) = cur {
        let m = inner.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = inner.source();
    }
    if s.contains("invalid peer certificate") {
        s.push_str(" (-o ca_file=PATH trusts a private certificate authority)");
    }
    s
}

/// The most read of an answer that is not a byte range: a manifest (a line
/// is about 100 bytes: some 600,000 objects), a listing page, a Caterva2
/// list.
pub const MAX_DOCUMENT: u64 = 64 << 20;

/// The error of a body that went on past its bound.
#[derive(Debug)]
pub struct TooLong(pub u64);

impl std::fmt::Display for TooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "an answer of more than the {} bytes asked for", self.0)
    }
}

impl std::error::Error for TooLong {}

/// `res` with its body failing ([`TooLong`]) past `max` bytes.
fn at_most(res: HttpResponse, max: u64) -> HttpResponse {
    use http_body_util::BodyExt;
    let (parts, body) = res.into_parts();
    let body = http_body_util::Limited::new(body, max as usize).map_err(move |e| {
        if e.is::<http_body_util::LengthLimitError>() {
            return HttpError::new(HttpErrorKind::Decode, TooLong(max));
        }
        match e.downcast::<HttpError>() {
            Ok(h) => *h,
            Err(e) => HttpError::new(HttpErrorKind::Unknown, std::io::Error::other(e)),
        }
    });
    HttpResponse::from_parts(parts, HttpResponseBody::new(body))
}

/// Did `e` (or anything under it) stop a body at its bound?
pub fn is_too_long(e: &(dyn std::error::Error + 'static)) -> bool {
    has::<TooLong>(e)
}

/// Is `e` a failure that asking again cannot mend: a body past its bound,
/// a redirect not followed ([`crate::redirect::NotFollowed`]), a server
/// that took the connection and began no TLS handshake
/// ([`crate::handshake::NoHandshake`])?
pub fn is_final(e: &(dyn std::error::Error + 'static)) -> bool {
    is_too_long(e)
        || has::<crate::redirect::NotFollowed>(e)
        || has::<crate::handshake::NoHandshake>(e)
}

/// Is an `E` in `e`'s chain?
pub fn has<E: std::error::Error + 'static>(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(e) = cur {
        if e.is::<E>() {
            return true;
        }
        cur = e.source();
    }
    false
}

/// The most bytes an answer to `req` may have: the length of the range it
/// asks for (`bytes=A-B` or `bytes=-N`), else [`MAX_DOCUMENT`] (a range
/// open at its end is not bounded).
fn asked(req: &HttpRequest) -> Option<u64> {
    let Some(range) = req.headers().get(http::header::RANGE) else {
        return Some(MAX_DOCUMENT);
    };
    let r = range.to_str().ok()?.strip_prefix("bytes=")?;
    let (a, b) = r.split_once('-')?;
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(a), Ok(b)) if a <= b => Some(b - a + 1),
        (Err(_), Ok(n)) if a.is_empty() => Some(n),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{asked, is_final, HttpError, HttpErrorKind, TooLong, MAX_DOCUMENT};

    fn err<E: std::error::Error + Send + Sync + 'static>(e: E) -> HttpError {
        HttpError::new(HttpErrorKind::Unknown, e)
    }

    #[test]
    fn a_body_past_its_bound_and_a_redirect_not_followed_are_final() {
        assert!(is_final(&err(TooLong(5))));
        assert!(is_final(&err(crate::redirect::NotFollowed::for_test())));
        assert!(!is_final(&err(std::io::Error::other("connection reset"))));
    }

    fn ranged(r: Option<&str>) -> Option<u64> {
        let mut req = http::Request::get("http://h/x");
        if let Some(r) = r {
            req = req.header("range", r);
        }
        asked(&req.body(super::HttpRequestBody::empty()).unwrap())
    }

    #[test]
    fn an_answer_is_bounded_by_what_was_asked() {
        assert_eq!(ranged(Some("bytes=100-199")), Some(100));
        assert_eq!(ranged(Some("bytes=-4096")), Some(4096));
        assert_eq!(ranged(None), Some(MAX_DOCUMENT));
        assert_eq!(ranged(Some("bytes=100-")), None);
        assert_eq!(ranged(Some("bytes=9-1")), None);
    }
}
