//! Remote sources for bloscfs: objects in S3-compatible storage, files on
//! plain HTTP(S) servers and datasets on Caterva2 servers, read by byte
//! range as the library's [`Source`](blosc_decode::io::Source). Nothing
//! here knows about FUSE.
//!
//! # Locations
//! - `s3://bucket/prefix`: credentials from the usual AWS environment and
//!   instance chain; [`Options::region`], [`Options::endpoint`] (MinIO, Ceph,
//!   moto: path-style requests) and [`Options::anonymous`] (public buckets,
//!   unsigned requests). Listing: `ListObjectsV2` with delimiter `/` and
//!   `encoding-type=url`. Requests are built here and signed with SigV4
//!   (object_store's `AwsAuthorizer` and credential chain).
//! - `http://host/dir/` or `https://...`: any server that honours `Range`.
//!   A URL ending in `/` is a directory, listed from the manifest
//!   ([`Options::manifest`]) if one is named, else from an S3-style XML
//!   listing (`?list-type=2&prefix=..&delimiter=/`) if the server gives one
//!   (tried at the URL, then at its host's first path component, then at
//!   its root). A URL not ending in `/` is one object, unless a manifest is
//!   named.
//! - `caterva2://host:port/ROOT[/path]` (`caterva2s://` for HTTPS): a root
//!   of a Caterva2 server; datasets (`.b2frame`, `.b2nd`, `.b2z`) are read
//!   through `/api/fetch/ROOT/path`, which serves the stored file's byte
//!   ranges with an ETag; directories come from `/api/list`. With
//!   [`Options::user`] and [`Options::password_file`] the crate logs in
//!   (`/auth/jwt/login`) and sends the session cookie.
//!
//! # Names
//! A key is the exact text the store gives (`%` is a literal character);
//! every request names it through one encoding, every byte but `A-Z a-z
//! 0-9 - . _ ~` as `%XX` (a location typed as an HTTP URL is sent as
//! typed, the keys under it encoded). An S3 listing answered with
//! `<EncodingType>url` is decoded exactly as S3 encodes (`%XX`, `+` for a
//! space); one that is not is taken raw. A name that cannot be a file name
//! is left out of its listing with one log line per listing (how many, one
//! example), never failing the directory: an empty, `.` or `..` component
//! (`a//b`, `a/./b`, a leading `/`), NUL, a component over 255 bytes, an
//! entry outside the prefix listed. An object `k` beside a prefix `k/`:
//! the directory is shown, the object left out (logged the same way).
//! Besides the entry bound, a listing keeps at most 256 MiB of
//! names.
//!
//! HTTPS servers are checked against the system's certificate authorities
//! (or `SSL_CERT_FILE` / `SSL_CERT_DIR`) and those of [`Options::ca_file`].
//!
//! # Redirects
//! A redirect is followed only to the origin (scheme, host and port) of
//! the request it answers, at most 10 in a row: always for plain HTTP
//! sources, for S3 and Caterva2 only with [`Options::follow_redirects`].
//! Any other is an error naming its target (`EIO` for that read or
//! listing, not retried), so no signature, session token, cookie or
//! password goes to another host, and no other host's bytes are used.
//!
//! # Manifest format
//! A text file under the base URL (`-o manifest=NAME`), UTF-8, at most 64
//! MiB, one object a line: `SIZE PATH` (SIZE in bytes, decimal, then one space) or just `PATH`
//! (its size is then learnt with one ranged GET of its tail when listed).
//! PATH is relative to the base URL, `/`-separated, taken verbatim to the
//! end of the line (spaces included). A PATH that cannot be a file's path
//! (see Names) is left out. Blank lines and lines starting with `#` are
//! ignored. Directories are implied by the paths.
//!
//! # Cost model (counted in requests)
//! - Opening a container ([`RemoteObject::prefetch_open`]): at most 2 GETs,
//!   the head (128 KiB) and the tail (256 KiB) concurrently; 1 for objects
//!   up to 384 KiB. Never a HEAD request. [`Remote::prefetch_open_all`]
//!   does it for many objects, 16 at a time.
//! - A small read (a chunk header) is rounded out to its 64 KiB-aligned
//!   window, so the header and the block starts after it cost one GET; a
//!   block read fetches its bytes. Fetched bytes stay in the page cache, 4
//!   KiB pages keyed by (object, version, offset), least recently used out,
//!   at most [`Options::page_cache`] bytes, shared by all objects.
//! - [`Source::will_need`](blosc_decode::io::Source::will_need) (the
//!   container calls it for every chunk head on its first random read):
//!   those ranges are fetched in the background, 16 GETs in flight per
//!   remote, at most half the page cache per object; after that a cold
//!   random read costs one GET (its block).
//! - A sequential scan starts a read-ahead window (parts of 1.125 MiB
//!   doubling to 8 MiB, at most half the page cache ahead of the reader):
//!   a scan of N bytes costs about N / 8 MiB GETs. A jump aborts it.
//! - [`Remote::list_start`]: one request for the names of a directory
//!   starting with a text (S3, when a page holds them), so that a lookup
//!   in a prefix of a million keys is not a thousand requests.
//! - [`Remote::stat`] of an object: one GET of its last 256 KiB (its size,
//!   ETag and mtime come with it), kept in the page cache for the open
//!   after it; the open then costs one more GET (the head); on S3, one
//!   listing of one page besides (a prefix `key/` with entries under it
//!   makes `key` a directory, as the listings show it). A directory
//!   costs that GET (a 404) and one listing. Objects from a listing need no
//!   stat. Listings: one request per 1,000 S3 keys; the sizes a Caterva2
//!   listing or a size-less manifest line lacks are probed 16 at a time.
//!
//! # Versions
//! An object is read as the version its [`Object`] describes: every ranged
//! GET sends `If-Match` with the ETag when it is a strong one, and its
//! answer is checked (ETag, `Content-Range` total, body length); a mismatch
//! or a 412 is [`blosc_decode::error::ErrorKind::Changed`], never bytes of
//! two versions. A `200` to a ranged request is refused. A weak ETag
//! (`W/"..."`) is never sent as `If-Match` (servers compare it strongly and
//! answer 412): every answer's ETag, `Last-Modified` and total length are
//! compared with the first answer's instead. An object listed without an
//! ETag (a manifest line) is pinned to the ETag of the first answer, and to
//! its length; if the server sends no ETag at all, to its length only. An
//! object without a strong ETag shares no cached bytes with other opens (a
//! weak ETag does not promise identical bytes).
//!
//! # Failures
//! Every request has [`Options::timeout`]; failed requests (no answer, a
//! 5xx or 429, a body that broke off) are retried ([`Options::retries`],
//! jittered backoff) and a read gives up after
//! twice the timeout and a second, with `EIO` or
//! `ETIMEDOUT` and a message naming the URL and the byte range. A body is
//! read no further than its range (a manifest, listing page or Caterva2
//! list no further than 64 MiB): a longer answer fails at once, costing no
//! more memory than was asked for. A listing fails at a continuation token
//! given before or past 4,194,304 entries. An error answer's message
//! carries an S3 error document's `Code` and `Message`, never the raw
//! body. Messages never contain credentials.

mod answer;
mod connect;
mod error;
mod fetch;
mod handshake;
mod hints;
mod list;
mod location;
mod names;
mod net;
mod object;
mod optfile;
mod page_cache;
#[doc(hidden)]
pub mod parse; // public for the fuzz target only
mod readahead;
mod redirect;
mod requests;
mod resolve;
mod s3;
mod session;
#[cfg(test)]
mod tests;
mod url;

pub use location::{check_endpoint, check_region, Location};
pub use net::Stats;
pub use object::RemoteObject;

use blosc_decode::io::First;
use fetch::Fetcher;
use net::Counters;
use object::Pending;
use page_cache::{PageCache, Version};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How to reach a remote location (the daemon's `-o` options).
#[derive(Clone, Debug)]
pub struct Options {
    /// S3 region (default: the environment's, else `us-east-1`).
    pub region: Option<String>,
    /// S3 endpoint URL (MinIO, Ceph, moto); path-style requests.
    pub endpoint: Option<String>,
    /// Unsigned S3 requests (public buckets).
    pub anonymous: bool,
    /// HTTP: the manifest's name under the base URL (see the crate docs).
    pub manifest: Option<String>,
    /// Caterva2: the user to log in as.
    pub user: Option<String>,
    /// Caterva2: a file holding the password (its first line): a regular
    /// file of at most 64 KiB that neither its group nor others may read.
    pub password_file: Option<PathBuf>,
    /// HTTPS: a PEM file of certificate authorities trusted besides the
    /// system's (a private CA of an on-premises store): a regular file of
    /// at most 4 MiB.
    pub ca_file: Option<PathBuf>,
    /// S3 and Caterva2: follow redirects to the same scheme, host and port
    /// (never to another; none without this). Plain HTTP sources always
    /// follow those.
    pub follow_redirects: bool,
    /// Per request (default 10 s).
    pub timeout: Duration,
    /// Retries of a failed request (default 3), jittered backoff, bounded
    /// total per read.
    pub retries: u32,
    /// Bytes of fetched pages, read-ahead in flight included (default
    /// 64 MiB).
    pub page_cache: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            region: None,
            endpoint: None,
            anonymous: false,
            manifest: None,
            user: None,
            password_file: None,
            ca_file: None,
            follow_redirects: false,
            timeout: Duration::from_secs(10),
            retries: 3,
            page_cache: 64 << 20,
        }
    }
}

/// One object (one version of it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    /// Relative to the location, `/`-separated ("" for the location itself).
    pub key: String,
    /// Length in bytes.
    pub len: u64,
    /// The version's ETag, if the server gives one.
    pub etag: Option<String>,
    /// Last modification, if the server says.
    pub mtime: Option<SystemTime>,
}

impl Object {
    /// Does its ETag name one version of the bytes (a strong ETag)? A weak
    /// one, or none, may stay the same when the bytes change.
    pub fn pinned(&self) -> bool {
        self.etag.as_deref().is_some_and(parse::strong_etag)
    }
}

/// One level of a directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listing {
    /// Subdirectories: their last components.
    pub dirs: Vec<String>,
    /// Objects directly in it.
    pub objects: Vec<Object>,
}

/// What a key is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A directory (a prefix with entries under it).
    Dir,
    /// An object.
    Object(Object),
}

/// Shared state of a connected remote.
pub(crate) struct Core {
    pub loc: Location,
    pub opts: Options,
    pub fetcher: Fetcher,
    pub counters: Arc<Counters>,
    pub backend: connect::Backend,
    pub pages: Mutex<PageCache>,
    pub inflight: Mutex<HashMap<(Version, u64), (u64, Pending)>>,
    pub next_run: AtomicU64,
    /// `will_need` fetches in flight.
    pub hints: tokio::sync::Semaphore,
}

/// A connected remote location. Cheap to clone; every clone shares one
/// connection pool, page cache and set of counters.
#[derive(Clone)]
pub struct Remote(Arc<Core>);

impl Remote {
    /// Set up the client for `loc` (and log in, for a Caterva2 user). Sends
    /// no request otherwise.
    pub fn connect(loc: Location, opts: Options) -> std::io::Result<Remote> {
        connect::connect(loc, opts).map(|c| Remote(Arc::new(c)))
    }

    /// One level under `dir` ("" = the location's root; "a/b" relative, no
    /// slashes at the ends).
    pub fn list(&self, dir: &str) -> std::io::Result<Listing> {
        self.counted(list::list(&self.0, dir))
    }

    /// The entries of `dir` whose names start with `start`, from one
    /// listing request where the store can answer so (S3, when one page
    /// holds them); `None` where `dir` must be listed whole. A lookup of a
    /// name in a directory of a million objects costs one request.
    pub fn list_start(&self, dir: &str, start: &str) -> std::io::Result<Option<Listing>> {
        self.counted(list::list_start(&self.0, dir, start))
    }

    /// What `key` ("" = the location itself) is: a directory (a prefix with
    /// entries) or an object (size, etag, mtime). Never a HEAD request.
    /// `ENOENT` if neither.
    pub fn stat(&self, key: &str) -> std::io::Result<Entry> {
        self.counted(list::stat(&self.0, key))
    }

    /// The object at `key`, asked without a listing, opened, with what its
    /// reader reads `first` fetched in the same request and kept for it
    /// ([`list::open_object`]).
    pub fn open_object(
        &self,
        key: &str,
        first: First,
    ) -> std::io::Result<Option<Arc<RemoteObject>>> {
        self.counted(list::open_object(&self.0, key, first))
            .map(|o| o.map(Arc::new))
    }

    /// Positional reads of one version of an object (the one `obj`
    /// describes).
    pub fn open(&self, obj: &Object) -> Arc<RemoteObject> {
        Arc::new(RemoteObject::new(self.0.clone(), obj.clone()))
    }

    /// [`RemoteObject::prefetch_open`] of many objects, 16 at a time (an
    /// `ls -l` of a directory of containers): one result per object, in
    /// order.
    pub fn prefetch_open_all(&self, objs: &[Arc<RemoteObject>]) -> Vec<blosc_decode::Result<()>> {
        use futures::StreamExt;
        net::block_on(
            futures::stream::iter(objs)
                .map(|o| o.prefetch_open_async())
                .buffered(16)
                .collect(),
        )
    }

    /// Requests made so far (for tests and the benchmark).
    pub fn stats(&self) -> Stats {
        self.0.counters.snapshot()
    }

    /// The location this reads.
    pub fn location(&self) -> &Location {
        &self.0.loc
    }

    fn counted<T>(&self, r: std::io::Result<T>) -> std::io::Result<T> {
        if r.is_err() {
            Counters::add(&self.0.counters.errors, 1);
        }
        r
    }
}

/// The page cache's name for a version of an object: its key, ETag and
/// length (not its mtime: some servers send none).
pub(crate) fn version_of(obj: &Object) -> Version {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (&obj.key, &obj.etag, obj.len).hash(&mut h);
    h.finish()
}

/// The page cache's name for `obj`'s version when its pages may be shared
/// with other opens: only with a strong ETag (a weak one, `W/"..."`, does
/// not promise identical bytes; without any, two versions of one length
/// look alike).
pub(crate) fn shared_version(obj: &Object) -> Option<Version> {
    obj.pinned().then(|| version_of(obj))
}
