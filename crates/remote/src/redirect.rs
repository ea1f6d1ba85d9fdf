//! Redirects: followed only to the origin (scheme, host and port) of the
//! request, and for S3 and Caterva2 only when asked for
//! (`-o follow_redirects`), so that no credential (a signature, a session
//! token, a cookie, a password) is ever sent to another host and no other
//! host's bytes or listing are used. A redirect not followed is an error
//! naming its target, never retried.

use object_store::client::{HttpError, HttpErrorKind, HttpRequest, HttpResponse, HttpService};
use reqwest::redirect::Policy;
use reqwest::Url;

/// The most redirects one request follows.
const MAX_HOPS: usize = 10;

/// Which redirects a client follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redirects {
    /// None.
    None,
    /// Those to the origin of the request, at most [`MAX_HOPS`].
    SameOrigin,
}

impl Redirects {
    /// The client's policy: a redirect it does not follow comes back as
    /// the answer, which [`Guarded`] turns into an error.
    pub fn policy(self) -> Policy {
        match self {
            Redirects::None => Policy::none(),
            Redirects::SameOrigin => Policy::custom(|a| {
                let first = a.previous().first().map(Url::origin);
                if a.previous().len() > MAX_HOPS || first != Some(a.url().origin()) {
                    a.stop()
                } else {
                    a.follow()
                }
            }),
        }
    }
}

/// A client whose answers are never redirects: a redirect its policy did
/// not follow is a [`NotFollowed`] error.
#[derive(Debug)]
pub struct Guarded {
    client: reqwest::Client,
    redirects: Redirects,
}

impl Guarded {
    pub fn new(client: reqwest::Client, redirects: Redirects) -> Guarded {
        Guarded { client, redirects }
    }
}

#[async_trait::async_trait]
impl HttpService for Guarded {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let url = req.uri().to_string();
        let res = HttpService::call(&self.client, req).await?;
        let status = res.status();
        if !status.is_redirection() || status == http::StatusCode::NOT_MODIFIED {
            return Ok(res);
        }
        let location = res.headers().get(http::header::LOCATION);
        let e = NotFollowed::new(&url, status.as_u16(), location, self.redirects);
        // `Unknown`: object_store does not retry it.
        Err(HttpError::new(HttpErrorKind::Unknown, e))
    }
}

/// A redirect answer that was not followed.
#[derive(Debug)]
pub struct NotFollowed {
    /// The target (resolved against the request's URL), or what the
    /// server sent if it is not a URL.
    target: String,
    status: u16,
    why: &'static str,
}

impl NotFollowed {
    fn new(
        url: &str,
        status: u16,
        location: Option<&http::HeaderValue>,
        redirects: Redirects,
    ) -> NotFollowed {
        let from = Url::parse(url).ok();
        let loc = location.map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let to = match (&from, &loc) {
            (Some(f), Some(l)) => f.join(l).ok(),
            _ => None,
        };
        let why = match (redirects, &to, &from) {
            (_, None, _) => "no usable Location",
            (Redirects::None, ..) => {
                "this store's redirects are followed only with -o follow_redirects, and only to the same scheme, host and port"
            }
            (Redirects::SameOrigin, Some(t), Some(f)) if t.origin() != f.origin() => {
                "another scheme, host or port than the request's"
            }
            _ => "more than 10 redirects",
        };
        let target = to
            .map(String::from)
            .or(loc)
            .unwrap_or_else(|| "nowhere".into());
        NotFollowed {
            target: shorten(target),
            status,
            why,
        }
    }
}

#[cfg(test)]
impl NotFollowed {
    /// One, for tests elsewhere in the crate.
    pub fn for_test() -> NotFollowed {
        NotFollowed::new("http://h/a", 307, None, Redirects::None)
    }
}

/// At most 256 characters of a server's text, for a message.
fn shorten(mut s: String) -> String {
    if let Some((i, _)) = s.char_indices().nth(256) {
        s.truncate(i);
        s.push_str("...");
    }
    s
}

impl std::fmt::Display for NotFollowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "redirected to {} ({}): not followed ({})",
            self.target, self.status, self.why
        )
    }
}

impl std::error::Error for NotFollowed {}

#[cfg(test)]
mod tests {
    use super::*;

    fn why(url: &str, loc: Option<&str>, r: Redirects) -> String {
        let v = loc.map(|l| http::HeaderValue::from_str(l).unwrap());
        NotFollowed::new(url, 307, v.as_ref(), r).to_string()
    }

    #[test]
    fn a_redirect_not_followed_names_its_target_and_why() {
        let e = why("http://h:1/a/b", Some("http://o:2/x"), Redirects::None);
        assert!(
            e.starts_with("redirected to http://o:2/x (307): not followed ("),
            "{e}"
        );
        assert!(e.contains("-o follow_redirects"), "{e}");
        let e = why(
            "http://h:1/a/b",
            Some("https://h:1/c"),
            Redirects::SameOrigin,
        );
        assert!(
            e.contains("https://h:1/c") && e.contains("another scheme"),
            "{e}"
        );
        let e = why("http://h:1/a/b", Some("c?x=1"), Redirects::SameOrigin);
        assert!(
            e.contains("http://h:1/a/c?x=1") && e.contains("more than"),
            "{e}"
        );
        let e = why("http://h:1/a", None, Redirects::SameOrigin);
        assert!(
            e.contains("nowhere") && e.contains("no usable Location"),
            "{e}"
        );
        let long = format!("http://o/{}", "x".repeat(10_000));
        assert!(why("http://h/", Some(&long), Redirects::None).len() < 500);
    }
}
