//! Remote URLs: what the user types, parsed into a [`Location`].

use std::fmt;

/// Where a remote tree lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// `s3://bucket/prefix`: objects under `prefix` (no slashes at its ends;
    /// empty for the whole bucket).
    S3 {
        /// The bucket name.
        bucket: String,
        /// The key prefix, without slashes at its ends.
        prefix: String,
    },
    /// `http://...` or `https://...`: files served by an HTTP server that
    /// honours `Range`. The URL as typed (a directory when it ends in `/`).
    Http {
        /// The URL as typed.
        url: String,
    },
    /// `caterva2://host[:port]/ROOT[/path]` (`caterva2s://` for HTTPS): a
    /// Caterva2 server's root, or a directory or dataset inside it.
    Caterva2 {
        /// The server's base URL: `http://host:port` (no path, no slash).
        url: String,
        /// The root and the path inside it, no slashes at its ends
        /// (`@public/dir/x.b2nd`).
        root: String,
    },
}

impl Location {
    /// None: not a remote URL (a local path). Some(Err(msg)): a malformed
    /// remote URL.
    pub fn parse(s: &str) -> Option<Result<Location, String>> {
        let (scheme, rest) = s.split_once("://")?;
        let scheme = scheme.to_ascii_lowercase();
        if !matches!(
            scheme.as_str(),
            "s3" | "http" | "https" | "caterva2" | "caterva2s"
        ) {
            // `./a://b` or `dir://x` are local paths; a scheme has no '/'.
            if scheme.contains('/') || scheme.is_empty() {
                return None;
            }
            return Some(Err(format!(
                "unknown URL scheme `{scheme}://` (s3://, http://, https://, caterva2://, caterva2s://)"
            )));
        }
        Some(parse_remote(&scheme, rest))
    }

    /// The URL scheme as typed (lower case).
    pub fn scheme(&self) -> &'static str {
        match self {
            Location::S3 { .. } => "s3",
            Location::Http { url } if url.starts_with("https") => "https",
            Location::Http { .. } => "http",
            Location::Caterva2 { url, .. } if url.starts_with("https") => "caterva2s",
            Location::Caterva2 { .. } => "caterva2",
        }
    }
}

fn parse_remote(scheme: &str, rest: &str) -> Result<Location, String> {
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    if host.contains('@') {
        return Err(format!(
            "{scheme}:// URL with credentials in it: give them with -o user=,password_file= or the environment, never in the URL"
        ));
    }
    if host.is_empty() {
        return Err(format!("{scheme}:// URL without a host or bucket"));
    }
    if host.contains(['?', '#']) || path.contains(['?', '#']) {
        return Err(format!(
            "{scheme}:// URL with a query or fragment: not supported"
        ));
    }
    let path = path.trim_matches('/');
    if path.split('/').any(|c| c == "." || c == "..") {
        return Err(format!("{scheme}:// URL with `.` or `..` in its path"));
    }
    match scheme {
        "s3" => {
            if !host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
            {
                return Err(format!("s3://{host}: not a valid bucket name"));
            }
            Ok(Location::S3 {
                bucket: host.to_string(),
                prefix: squeeze(path),
            })
        }
        "http" | "https" => Ok(Location::Http {
            url: format!("{scheme}://{rest}"),
        }),
        _ => {
            if path.is_empty() {
                return Err(format!(
                    "{scheme}://{host}/ needs a root: {scheme}://{host}/@public"
                ));
            }
            let web = if scheme == "caterva2s" {
                "https"
            } else {
                "http"
            };
            Ok(Location::Caterva2 {
                url: format!("{web}://{host}"),
                root: squeeze(path),
            })
        }
    }
}

/// Check an S3 endpoint URL (`-o endpoint=`, `AWS_ENDPOINT_URL`, ...)
/// before it reaches a URL or HTTP builder: `http://` or `https://`, a
/// host, nothing that cannot be in a URL. `what` names where it came from.
pub fn check_endpoint(what: &str, v: &str) -> Result<(), String> {
    let lower = v.to_ascii_lowercase();
    if !lower.starts_with("http://") && !lower.starts_with("https://") {
        let shown = v.split_once("://").map_or(v, |(_, r)| r);
        return Err(if v.contains("://") {
            format!("{what} {v}: not an http:// or https:// URL: write http://{shown} or https://{shown}")
        } else {
            format!("{what} {v}: no scheme: write http://{v} or https://{v}")
        });
    }
    if v.contains(|c: char| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{what} {v:?}: a space or control character in a URL"
        ));
    }
    let url = reqwest::Url::parse(v).map_err(|e| format!("{what} {v}: not a URL: {e}"))?;
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("{what} {v}: no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{what}: a URL with credentials in it: give them in the environment, never in the URL"
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("{what} {v}: a query or fragment: not supported"));
    }
    Ok(())
}

/// Check an S3 region name (`-o region=`, `AWS_REGION`): it goes into
/// host names and signatures, so letters, digits, `-`, `_` and `.` only.
pub fn check_region(what: &str, v: &str) -> Result<(), String> {
    if v.is_empty()
        || !v
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        return Err(format!(
            "{what} {v:?}: not a region name (letters, digits, '-', '_', '.': us-east-1)"
        ));
    }
    Ok(())
}

/// `a//b` -> `a/b`.
fn squeeze(path: &str) -> String {
    path.split('/')
        .filter(|c| !c.is_empty())
        .collect::<Vec<_>>()
        .join("/")
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            Location::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
            Location::Http { url } => f.write_str(url),
            Location::Caterva2 { url, root } => {
                let host = url.split_once("://").map_or(url.as_str(), |(_, h)| h);
                write!(f, "{}://{host}/{root}", self.scheme())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Location {
        Location::parse(s).unwrap().unwrap()
    }
    fn err(s: &str) -> String {
        Location::parse(s).unwrap().unwrap_err()
    }

    #[test]
    fn local_paths_are_not_remote() {
        for p in ["/data/x.b2frame", "x", "./s3:/x", "a/b://c", "", "C:x"] {
            assert_eq!(Location::parse(p), None, "{p}");
        }
    }

    #[test]
    fn s3_bucket_and_prefix() {
        assert_eq!(
            ok("s3://bkt/some//prefix/"),
            Location::S3 {
                bucket: "bkt".into(),
                prefix: "some/prefix".into()
            }
        );
        let root = ok("s3://bkt");
        assert_eq!(
            root,
            Location::S3 {
                bucket: "bkt".into(),
                prefix: String::new()
            }
        );
        assert_eq!(root.to_string(), "s3://bkt");
        assert_eq!(ok("S3://bkt/a/b").to_string(), "s3://bkt/a/b");
    }

    #[test]
    fn http_keeps_the_url() {
        let l = ok("https://example.org/data/");
        assert_eq!(
            l,
            Location::Http {
                url: "https://example.org/data/".into()
            }
        );
        assert_eq!(l.to_string(), "https://example.org/data/");
    }

    #[test]
    fn caterva2_root_and_path() {
        let l = ok("caterva2://127.0.0.1:8000/@public/dir/x.b2nd");
        assert_eq!(
            l,
            Location::Caterva2 {
                url: "http://127.0.0.1:8000".into(),
                root: "@public/dir/x.b2nd".into()
            }
        );
        assert_eq!(
            l.to_string(),
            "caterva2://127.0.0.1:8000/@public/dir/x.b2nd"
        );
        let s = ok("caterva2s://h/@public/");
        assert_eq!(s.to_string(), "caterva2s://h/@public");
        assert!(matches!(s, Location::Caterva2 { url, .. } if url == "https://h"));
    }

    #[test]
    fn endpoints_need_a_scheme_and_a_host() {
        let e = check_endpoint("endpoint", "127.0.0.1:5603").unwrap_err();
        assert_eq!(
            e,
            "endpoint 127.0.0.1:5603: no scheme: write http://127.0.0.1:5603 or https://127.0.0.1:5603"
        );
        assert!(check_endpoint("endpoint", "ftp://h")
            .unwrap_err()
            .contains("http://h"));
        assert!(check_endpoint("endpoint", "http://").is_err());
        assert!(check_endpoint("endpoint", "http://h/a b").is_err());
        assert!(check_endpoint("endpoint", "http://h\x01").is_err());
        let e = check_endpoint("endpoint", "http://k:secret@h").unwrap_err();
        assert!(!e.contains("secret"), "{e}");
        check_endpoint("endpoint", "http://127.0.0.1:5603").unwrap();
        check_endpoint("endpoint", "HTTPS://minio.example/").unwrap();
    }

    #[test]
    fn regions_are_names() {
        for r in ["", "a b", "a/b", "a\x01b", "a\nb", "é"] {
            assert!(check_region("region", r).is_err(), "{r:?}");
        }
        for r in ["us-east-1", "garage", "eu_1.x"] {
            check_region("region", r).unwrap();
        }
    }

    #[test]
    fn malformed_urls_are_errors_without_secrets() {
        let e = err("s3://key:secret@bkt/x");
        assert!(!e.contains("secret"), "{e}");
        assert!(err("caterva2://host").contains("needs a root"));
        assert!(err("s3:///x").contains("without a host"));
        assert!(err("s3://b/a/../c").contains(".."));
        assert!(err("ftp://h/x").contains("unknown URL scheme"));
        assert!(err("https://h/x?list").contains("query"));
        assert!(err("s3://bad bucket/x").contains("bucket"));
    }
}
