//! What an answer to a GET means: its status, `Content-Range`, `ETag` and
//! `Last-Modified` read here, its body checked against what was asked.

use crate::error::FetchError;
use crate::fetch::{classify, Answer, Attempt};
use crate::net::is_too_long;
use crate::parse;
use bytes::Bytes;
use object_store::client::HttpResponse;
use std::ops::Range;

/// The bytes a GET asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Want {
    /// These bytes (`Range: bytes=A-B`).
    Range(Range<u64>),
    /// The last N bytes (`Range: bytes=-N`).
    Suffix(u64),
    /// The whole object, if it is empty (its body is not read otherwise).
    Empty,
}

impl Want {
    /// The `Range` header's value.
    pub fn header(&self) -> Option<String> {
        match self {
            Want::Range(r) => Some(format!("bytes={}-{}", r.start, r.end.saturating_sub(1))),
            Want::Suffix(n) => Some(format!("bytes=-{n}")),
            Want::Empty => None,
        }
    }
}

/// The object answer `res` to a GET of `want`: 206 with the range asked
/// (200 for [`Want::Empty`]), its body read whole; anything else an error
/// (retried for 5xx, 429 and a body that broke off).
pub async fn object(res: HttpResponse, want: &Want) -> Attempt<Answer> {
    let status = res.status().as_u16();
    let h = res.headers();
    let header = |n: http::HeaderName| h.get(n).and_then(|v| v.to_str().ok()).map(str::to_string);
    let etag = header(http::header::ETAG).map(|e| e.trim().to_string());
    let mtime = header(http::header::LAST_MODIFIED).and_then(|d| parse::http_date(&d));
    let (start, len) = match (status, want) {
        (206, Want::Range(_) | Want::Suffix(_)) => {
            let cr = header(http::header::CONTENT_RANGE).unwrap_or_default();
            let (a, b, total) = parse::content_range(&cr).ok_or_else(|| {
                let m = format!("206 with an unusable Content-Range `{cr}`");
                (FetchError::failed(m), false)
            })?;
            check_range(want, a, b, total).map_err(|m| (FetchError::failed(m), false))?;
            (a, total)
        }
        (200, Want::Empty) => {
            let n = header(http::header::CONTENT_LENGTH);
            if n.as_deref().map(str::trim) != Some("0") {
                let m = "the server answers no byte range".to_string();
                return Err((FetchError::NoRange(m), false));
            }
            (0, 0)
        }
        (200, _) => {
            let m = "a 200 (the whole object) to a ranged request".to_string();
            return Err((FetchError::NoRange(m), false));
        }
        _ => return Err(failed(res).await),
    };
    let data = body(res).await?;
    let got = data.len() as u64;
    let asked = match want {
        Want::Range(r) => r.end.min(len) - start,
        Want::Suffix(n) => (*n).min(len),
        Want::Empty => 0,
    };
    if got != asked {
        let m = format!("the answer broke off after {got} of {asked} bytes");
        return Err((FetchError::failed(m), true));
    }
    Ok(Answer {
        data,
        len,
        etag,
        mtime,
    })
}

/// Is `a-b/total` what a request for `want` is answered with?
fn check_range(want: &Want, a: u64, b: u64, total: u64) -> Result<(), String> {
    let ok = match want {
        Want::Range(r) => a == r.start && b + 1 == r.end.min(total),
        Want::Suffix(n) => b + 1 == total && a == total.saturating_sub(*n),
        Want::Empty => false,
    };
    match ok {
        true => Ok(()),
        false => Err(format!(
            "Content-Range bytes {a}-{b}/{total} is not the range asked ({want:?})"
        )),
    }
}

/// The whole body of `res` (bounded by the connector).
pub async fn body(res: HttpResponse) -> Attempt<Bytes> {
    res.into_body().bytes().await.map_err(|e| {
        let again = !is_too_long(&e);
        (classify(&e), again)
    })
}

/// An answer whose status is not the one wanted, as an error: 412 a
/// changed object, 404 a gone one, 416 no range, 401/403 `EACCES`, 5xx
/// and 429 to retry, anything else `EIO`; the S3 error document's code and
/// message in words, never the raw body.
pub async fn failed(res: HttpResponse) -> (FetchError, bool) {
    let status = res.status();
    let words = match res.into_body().bytes().await {
        Ok(b) => parse::s3_error(&b),
        Err(_) => None,
    };
    let m = in_words(status.as_u16(), &status.to_string(), words.as_deref());
    match status.as_u16() {
        412 => (
            FetchError::Changed(format!("the object changed ({m})")),
            false,
        ),
        404 if m.starts_with("no such") => (FetchError::Gone(m), false),
        404 => (FetchError::Gone(format!("no such object ({m})")), false),
        416 => (FetchError::NoRange(m), false),
        401 | 403 => (FetchError::denied(m), false),
        429 | 500..=599 => (FetchError::failed(m), true),
        _ => (FetchError::failed(m), false),
    }
}

/// An error answer's message: the S3 error codes users meet set up
/// wrong as a sentence naming the cause (the code after it), else the
/// status and the document's words.
fn in_words(status: u16, shown: &str, words: Option<&str>) -> String {
    let code = words.map(|w| w.split(':').next().unwrap_or(w).trim());
    let said = match code {
        Some("SignatureDoesNotMatch") => "the secret key does not match the access key id",
        Some("InvalidAccessKeyId") => "the store knows no such access key id",
        Some("AccessDenied") => {
            "access denied: the credentials may not read this (-o anonymous for a public bucket)"
        }
        Some("NoSuchBucket") => "no such bucket",
        Some("NoSuchKey") => "no such key",
        Some("ExpiredToken") | Some("TokenRefreshRequired") => "the session token has expired",
        Some("InvalidToken") => "the session token is not valid",
        Some("AuthorizationHeaderMalformed") => {
            "the request's region or credentials are malformed (check -o region=)"
        }
        Some("PermanentRedirect") => "the bucket is in another region (check -o region=)",
        _ => {
            return match words {
                Some(w) => format!("{shown} ({w})"),
                None => shown.to_string(),
            }
        }
    };
    format!("{said} ({}, {status})", code.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_error_codes_in_words() {
        let w = |s, c: Option<&str>| in_words(s, &format!("{s} Reason"), c);
        assert_eq!(
            w(
                403,
                Some("SignatureDoesNotMatch: The request signature ...")
            ),
            "the secret key does not match the access key id (SignatureDoesNotMatch, 403)"
        );
        assert!(w(403, Some("AccessDenied: Access Denied")).starts_with("access denied"));
        assert!(w(404, Some("NoSuchBucket: x")).starts_with("no such bucket (NoSuchBucket"));
        assert!(w(404, Some("NoSuchKey: x")).starts_with("no such key (NoSuchKey"));
        assert_eq!(w(500, Some("Slow: down")), "500 Reason (Slow: down)");
        assert_eq!(w(502, None), "502 Reason");
    }

    #[test]
    fn ranges_answered_are_the_ranges_asked() {
        let r = Want::Range(10..20);
        assert!(check_range(&r, 10, 19, 100).is_ok());
        assert!(check_range(&r, 10, 14, 15).is_ok());
        assert!(check_range(&r, 10, 14, 100).is_err());
        assert!(check_range(&r, 0, 19, 100).is_err());
        let s = Want::Suffix(50);
        assert!(check_range(&s, 50, 99, 100).is_ok());
        assert!(check_range(&s, 0, 9, 10).is_ok());
        assert!(check_range(&s, 60, 99, 100).is_err());
        assert_eq!(r.header().as_deref(), Some("bytes=10-19"));
        assert_eq!(s.header().as_deref(), Some("bytes=-50"));
        assert_eq!(Want::Empty.header(), None);
    }
}
