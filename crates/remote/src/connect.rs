//! Building the clients for a location (and the Caterva2 login).

use crate::error::invalid;
use crate::fetch::Fetcher;
use crate::location::{check_endpoint, check_region};
use crate::net::{block_on, chain, Counters, Counting, Setup};
use crate::page_cache::PageCache;
use crate::redirect::Redirects;
use crate::s3::Bucket;
use crate::session::Session;
use crate::{url, Core, Location, Options};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::ClientOptions;
use parking_lot::Mutex;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::sync::Arc;

/// What differs between the kinds of location.
pub enum Backend {
    /// Keys are `prefix/key` in the bucket, listed page by page.
    S3 { prefix: String, bucket: Arc<Bucket> },
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
    let endpoint = match &loc {
        Location::S3 { .. } => s3_endpoint(&opts, |k| std::env::var(k).ok())
            .map_err(|e| invalid(format!("{loc}: {e}")))?,
        _ => None,
    };
    let web = match &loc {
        Location::S3 { .. } => endpoint.clone().unwrap_or_default(),
        Location::Http { url } | Location::Caterva2 { url, .. } => url.clone(),
    };
    let setup = Setup {
        timeout: opts.timeout,
        allow_http: web.starts_with("http://"),
        roots: match &opts.ca_file {
            Some(file) => authorities(file)?,
            None => Vec::new(),
        },
        redirects: match &loc {
            Location::Http { .. } => Redirects::SameOrigin,
            _ if opts.follow_redirects => Redirects::SameOrigin,
            _ => Redirects::None,
        },
    };
    // The S3 builder wants options; every request goes through `client`,
    // set up by `setup`.
    let copts = ClientOptions::new().with_allow_http(setup.allow_http);
    let mut session = None;
    if let Location::Caterva2 { url, .. } = &loc {
        if let Some(user) = &opts.user {
            let Some(file) = opts.password_file.clone() else {
                return Err(invalid(format!("{loc}: -o user= needs -o password_file=")));
            };
            let s = Session::new(url, user, file);
            let login = Counting::new(&setup, counters.clone(), None)?;
            block_on(s.login(&login))?;
            session = Some(Arc::new(s));
        }
    }
    let client = Counting::new(&setup, counters.clone(), session)?;
    let (backend, url_of) = backend(&loc, &opts, endpoint.as_deref(), copts, &client)?;
    let bucket = match &backend {
        Backend::S3 { bucket, .. } => Some(bucket.clone()),
        _ => None,
    };
    let fetcher = Fetcher {
        client,
        url_of,
        bucket,
        shown: loc.to_string(),
        counters: counters.clone(),
        timeout: opts.timeout,
        retries: opts.retries,
    };
    Ok(Core {
        pages: Mutex::new(PageCache::new(opts.page_cache)),
        loc,
        opts,
        fetcher,
        counters,
        backend,
        inflight: Mutex::new(Default::default()),
        next_run: Default::default(),
        hints: tokio::sync::Semaphore::new(16),
    })
}

/// The URL of a key relative to a location.
type UrlOf = Box<dyn Fn(&str) -> String + Send + Sync>;

/// What differs for `loc`, and how its keys are named in URLs: the part
/// of the location typed as a URL taken as typed, keys encoded by
/// [`url::path`].
fn backend(
    loc: &Location,
    opts: &Options,
    endpoint: Option<&str>,
    copts: ClientOptions,
    client: &Counting,
) -> std::io::Result<(Backend, UrlOf)> {
    Ok(match loc {
        Location::S3 { bucket, prefix } => {
            let mut b = AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .with_client_options(copts)
                .with_http_connector(client.clone())
                .with_skip_signature(opts.anonymous);
            if let Some(r) = &opts.region {
                b = b.with_region(r);
            }
            if let Some(r) = b.get_config_value(&AmazonS3ConfigKey::Region) {
                let what = match opts.region {
                    Some(_) => "region",
                    None => "region (AWS_REGION or AWS_DEFAULT_REGION)",
                };
                check_region(what, &r).map_err(|e| invalid(format!("{loc}: {e}")))?;
            }
            if let Some(e) = endpoint {
                b = b
                    .with_endpoint(e)
                    .with_allow_http(e.to_ascii_lowercase().starts_with("http://"))
                    .with_virtual_hosted_style_request(false);
            }
            let store = b
                .clone()
                .build()
                .map_err(|e| invalid(format!("{loc}: {}", chain(&e))))?;
            let bucket = Arc::new(Bucket::new(&b, store, bucket));
            let (base, p) = (bucket.url.clone(), prefix.clone());
            let url_of = Box::new(move |key: &str| url::under(&base, &join(&p, key)));
            let prefix = prefix.clone();
            (Backend::S3 { prefix, bucket }, url_of as UrlOf)
        }
        Location::Http { url } => {
            let (base, leaf) = url.rsplit_once('/').expect("a URL has a '/'");
            // http://host, or a directory named by a manifest.
            let (base, leaf) = if base.ends_with('/') || opts.manifest.is_some() {
                (url.trim_end_matches('/'), "")
            } else {
                (base, leaf)
            };
            let typed = match leaf {
                "" => base.to_string(),
                l => format!("{base}/{l}"),
            };
            let url_of = Box::new(move |key: &str| url::under(&typed, key));
            let backend = Backend::Http {
                base: base.to_string(),
                leaf: leaf.to_string(),
                manifest: Mutex::new(None),
            };
            (backend, url_of as UrlOf)
        }
        Location::Caterva2 { url, root } => {
            let fetch = format!("{url}/api/fetch");
            let r = root.clone();
            let url_of = Box::new(move |key: &str| url::under(&fetch, &join(&r, key)));
            let backend = Backend::Caterva2 {
                url: url.clone(),
                root: root.clone(),
            };
            (backend, url_of as UrlOf)
        }
    })
}

/// The S3 endpoint, checked: `-o endpoint=`, else what the AWS tools
/// read (`AWS_ENDPOINT_URL_S3` before `AWS_ENDPOINT_URL`), else
/// object_store's `AWS_ENDPOINT`; `None`: AWS itself. Path-style requests
/// to it; plain HTTP when it says `http://`.
fn s3_endpoint(
    opts: &Options,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, String> {
    let found = match &opts.endpoint {
        Some(e) => Some(("endpoint", e.clone())),
        None => ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"]
            .into_iter()
            .find_map(|k| env(k).filter(|v| !v.is_empty()).map(|v| (k, v))),
    };
    let Some((what, e)) = found else {
        return Ok(None);
    };
    check_endpoint(what, &e)?;
    Ok(Some(e))
}

/// The certificates of the PEM file `file` (`-o ca_file=`): at least one.
fn authorities(file: &std::path::Path) -> std::io::Result<Vec<CertificateDer<'static>>> {
    let bad = |why: String| invalid(format!("ca_file {}: {why}", file.display()));
    let rules = crate::optfile::Rules {
        option: "ca_file",
        max: crate::optfile::MAX_CA_FILE,
        secret: false,
    };
    let pem = crate::optfile::read(file, &rules)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad(
            "no PEM certificate (-----BEGIN CERTIFICATE-----) in it".into(),
        ));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_from_the_option_then_the_aws_variables() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let none = Options::default();
        let opt = Options {
            endpoint: Some("http://o:1".into()),
            ..Options::default()
        };
        let both: &[(&str, &str)] = &[
            ("AWS_ENDPOINT_URL", "http://u:1"),
            ("AWS_ENDPOINT_URL_S3", "http://s3:1"),
        ];
        assert_eq!(s3_endpoint(&opt, env(both)).unwrap().unwrap(), "http://o:1");
        assert_eq!(
            s3_endpoint(&none, env(both)).unwrap().unwrap(),
            "http://s3:1"
        );
        let url: &[(&str, &str)] = &[("AWS_ENDPOINT_URL", "http://u:1")];
        assert_eq!(s3_endpoint(&none, env(url)).unwrap().unwrap(), "http://u:1");
        assert_eq!(s3_endpoint(&none, env(&[])).unwrap(), None);
        let bad: &[(&str, &str)] = &[("AWS_ENDPOINT_URL", "localhost:9000")];
        let e = s3_endpoint(&none, env(bad)).unwrap_err();
        assert!(
            e.starts_with("AWS_ENDPOINT_URL localhost:9000: no scheme"),
            "{e}"
        );
    }

    #[test]
    fn join_paths() {
        assert_eq!(join("", "x"), "x");
        assert_eq!(join("p", ""), "p");
        assert_eq!(join("p/q", "x/y"), "p/q/x/y");
    }
}
