//! Building the clients for a location (and the Caterva2 login).

use crate::fetch::Fetcher;
use crate::net::{block_on, chain, io_err, Counters, Counting};
use crate::spans::SpanCache;
use crate::{Core, Location, Options};
use object_store::aws::AmazonS3Builder;
use object_store::http::HttpBuilder;
use object_store::path::Path;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

/// What differs between the kinds of location.
pub enum Backend {
    /// Keys are `prefix/key` in the bucket.
    S3 { prefix: String },
    /// Keys are `leaf/key` under `base` (no slash at its end); `leaf` is
    /// the object a URL not ending in `/` names ("" for a directory).
    Http {
        base: String,
        leaf: String,
        manifest: Mutex<Option<Arc<crate::parse::Tree>>>,
    },
    /// Datasets are fetched at `url/api/fetch/root/key`.
    Caterva2 { url: String, root: String },
}

/// `a` and `b` joined by `/`, either may be empty.
pub fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => format!("{a}/{b}"),
    }
}

pub fn connect(loc: Location, opts: Options) -> std::io::Result<Core> {
    let counters = Arc::new(Counters::default());
    let web = match &loc {
        Location::S3 { .. } => opts.endpoint.clone().unwrap_or_default(),
        Location::Http { url } | Location::Caterva2 { url, .. } => url.clone(),
    };
    let mut copts = ClientOptions::new()
        .with_timeout(opts.timeout)
        .with_connect_timeout(opts.timeout.min(Duration::from_secs(5)))
        .with_allow_http(web.starts_with("http://"));
    if let Location::Caterva2 { url, .. } = &loc {
        if let Some(user) = &opts.user {
            let login = Counting::new(&copts, counters.clone()).map_err(|e| os_err(&loc, e))?;
            let cookie = block_on(login_cookie(&login, url, user, &opts))?;
            let mut headers = object_store::HeaderMap::new();
            let mut v = object_store::HeaderValue::from_str(&cookie)
                .map_err(|_| io_err(libc::EIO, format!("{loc}: login gave an unusable cookie")))?;
            v.set_sensitive(true);
            headers.insert("cookie", v);
            copts = copts.with_default_headers(headers);
        }
    }
    let client = Counting::new(&copts, counters.clone()).map_err(|e| os_err(&loc, e))?;
    let retry = RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            base: 2.0,
        },
        max_retries: opts.retries as usize,
        retry_timeout: crate::fetch::budget(opts.timeout),
    };
    let (store, backend): (Arc<dyn ObjectStore>, Backend) = match &loc {
        Location::S3 { bucket, prefix } => {
            let mut b = AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .with_client_options(copts)
                .with_retry(retry)
                .with_http_connector(client.clone())
                .with_skip_signature(opts.anonymous);
            if let Some(r) = &opts.region {
                b = b.with_region(r);
            }
            if let Some(e) = &opts.endpoint {
                b = b
                    .with_endpoint(e)
                    .with_allow_http(e.starts_with("http://"))
                    .with_virtual_hosted_style_request(false);
            }
            let s3 = b.build().map_err(|e| os_err(&loc, e))?;
            let prefix = prefix.clone();
            (Arc::new(s3), Backend::S3 { prefix })
        }
        Location::Http { url } => {
            let (base, leaf) = url.rsplit_once('/').expect("a URL has a '/'");
            let (base, leaf) = if base.ends_with('/') {
                (url.trim_end_matches('/'), "") // http://host
            } else {
                (base, leaf)
            };
            let store = http_store(base, copts, retry, &client).map_err(|e| os_err(&loc, e))?;
            let backend = Backend::Http {
                base: base.to_string(),
                leaf: leaf.to_string(),
                manifest: Mutex::new(None),
            };
            (store, backend)
        }
        Location::Caterva2 { url, root } => {
            let fetch = format!("{url}/api/fetch");
            let store = http_store(&fetch, copts, retry, &client).map_err(|e| os_err(&loc, e))?;
            let backend = Backend::Caterva2 {
                url: url.clone(),
                root: root.clone(),
            };
            (store, backend)
        }
    };
    let base = match &backend {
        Backend::S3 { prefix } => prefix.clone(),
        Backend::Http { leaf, .. } => leaf.clone(),
        Backend::Caterva2 { root, .. } => root.clone(),
    };
    let fetcher = Fetcher {
        store,
        path_of: Box::new(move |key| Path::from(join(&base, key))),
        shown: loc.to_string(),
        counters: counters.clone(),
        timeout: opts.timeout,
        retries: opts.retries,
    };
    Ok(Core {
        spans: Mutex::new(SpanCache::new(opts.span_cache)),
        loc,
        opts,
        fetcher,
        client,
        counters,
        backend,
        inflight: Mutex::new(Default::default()),
        next_run: Default::default(),
        hints: tokio::sync::Semaphore::new(16),
    })
}

fn http_store(
    url: &str,
    copts: ClientOptions,
    retry: RetryConfig,
    client: &Counting,
) -> object_store::Result<Arc<dyn ObjectStore>> {
    let s = HttpBuilder::new()
        .with_url(url)
        .with_client_options(copts)
        .with_retry(retry)
        .with_http_connector(client.clone())
        .build()?;
    Ok(Arc::new(s))
}

fn os_err(loc: &Location, e: object_store::Error) -> std::io::Error {
    io_err(libc::EINVAL, format!("{loc}: {}", chain(&e)))
}

/// Log in to a Caterva2 server: the session cookie (`name=value`).
async fn login_cookie(
    client: &Counting,
    url: &str,
    user: &str,
    opts: &Options,
) -> std::io::Result<String> {
    let what = format!("{url}/auth/jwt/login as {user}");
    let Some(file) = &opts.password_file else {
        return Err(io_err(
            libc::EINVAL,
            format!("{what}: -o user= needs -o password_file="),
        ));
    };
    let password = std::fs::read_to_string(file).map_err(|e| {
        io_err(
            libc::EINVAL,
            format!("{what}: password_file {}: {e}", file.display()),
        )
    })?;
    let password = password.lines().next().unwrap_or("");
    let body = format!("username={}&password={}", form(user), form(password));
    let req = http::Request::post(format!("{url}/auth/jwt/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body.into())
        .map_err(|e| io_err(libc::EINVAL, format!("{what}: {e}")))?;
    let res = client
        .execute(req)
        .await
        .map_err(|e| io_err(libc::EIO, format!("{what}: {}", chain(&e))))?;
    let status = res.status();
    if !status.is_success() {
        return Err(io_err(libc::EACCES, format!("{what}: refused ({status})")));
    }
    res.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_string())
        .find(|c| c.contains('='))
        .ok_or_else(|| {
            io_err(
                libc::EACCES,
                format!("{what}: no session cookie in the answer"),
            )
        })
}

/// `application/x-www-form-urlencoded` of one value.
fn form(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_encoding() {
        assert_eq!(form("a b&c=d%é"), "a+b%26c%3Dd%25%C3%A9");
    }

    #[test]
    fn join_paths() {
        assert_eq!(join("", "x"), "x");
        assert_eq!(join("p", ""), "p");
        assert_eq!(join("p/q", "x/y"), "p/q/x/y");
    }
}
