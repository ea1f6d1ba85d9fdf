//! A Caterva2 login: the session cookie every request carries, renewed
//! when the server stops taking it (its tokens expire after 12 hours).

use crate::error::{denied, failed, invalid};
use crate::net::chain;
use crate::optfile;
use object_store::client::{HttpClient, HttpError, HttpRequest, HttpResponse};
use object_store::HeaderValue;
use parking_lot::Mutex;
use std::path::PathBuf;

/// A logged-in user of one server.
pub struct Session {
    url: String,
    user: String,
    password_file: PathBuf,
    /// The cookie and how many logins gave one.
    cookie: Mutex<(Option<HeaderValue>, u64)>,
    /// One login at a time.
    login: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Session({} at {})", self.user, self.url)
    }
}

impl Session {
    /// A session of `user` at the server `url`, not logged in yet.
    pub fn new(url: &str, user: &str, password_file: PathBuf) -> Self {
        Session {
            url: url.to_string(),
            user: user.to_string(),
            password_file,
            cookie: Mutex::new((None, 0)),
            login: tokio::sync::Mutex::new(()),
        }
    }

    /// Send `req` with the session cookie: the answer, and which login's
    /// cookie it carried.
    pub async fn send(
        &self,
        client: &HttpClient,
        mut req: HttpRequest,
    ) -> Result<(HttpResponse, u64), HttpError> {
        let (cookie, n) = self.cookie.lock().clone();
        if let Some(c) = cookie {
            req.headers_mut().insert("cookie", c);
        }
        Ok((client.execute(req).await?, n))
    }

    /// Log in again, unless another request did since login `seen`.
    pub async fn relogin(&self, client: &HttpClient, seen: u64) -> std::io::Result<()> {
        let _one = self.login.lock().await;
        if self.cookie.lock().1 != seen {
            return Ok(());
        }
        self.login_now(client).await
    }

    /// Log in (through a client without the session).
    pub async fn login(&self, client: &crate::net::Counting) -> std::io::Result<()> {
        let _one = self.login.lock().await;
        self.login_with(|req| client.execute(req)).await
    }

    async fn login_now(&self, client: &HttpClient) -> std::io::Result<()> {
        self.login_with(|req| client.execute(req)).await
    }

    async fn login_with<F, Fut>(&self, send: F) -> std::io::Result<()>
    where
        F: FnOnce(HttpRequest) -> Fut,
        Fut: std::future::Future<Output = Result<HttpResponse, HttpError>>,
    {
        let what = format!("{}/auth/jwt/login as {}", self.url, self.user);
        let file = &self.password_file;
        let rules = optfile::Rules {
            option: "password_file",
            max: optfile::MAX_PASSWORD_FILE,
            secret: true,
        };
        let bytes = optfile::read(file, &rules).map_err(|e| invalid(format!("{what}: {e}")))?;
        let password = String::from_utf8(bytes).map_err(|_| {
            let m = format!("{what}: password_file {}: not UTF-8", file.display());
            invalid(m)
        })?;
        let password = password.lines().next().unwrap_or("");
        let body = format!("username={}&password={}", form(&self.user), form(password));
        let req = http::Request::post(format!("{}/auth/jwt/login", self.url))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.into())
            .map_err(|e| invalid(format!("{what}: {e}")))?;
        let res = send(req)
            .await
            .map_err(|e| failed(format!("{what}: {}", chain(&e))))?;
        let status = res.status();
        if !status.is_success() {
            return Err(denied(format!("{what}: refused ({status})")));
        }
        let cookie = res
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or("").trim().to_string())
            .find(|c| c.contains('='))
            .ok_or_else(|| denied(format!("{what}: no session cookie in the answer")))?;
        let mut v = HeaderValue::from_str(&cookie)
            .map_err(|_| denied(format!("{what}: an unusable cookie")))?;
        v.set_sensitive(true);
        let mut c = self.cookie.lock();
        *c = (Some(v), c.1 + 1);
        Ok(())
    }
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
    fn debug_shows_no_secret() {
        let s = Session::new("http://h", "u", "/x/pw".into());
        *s.cookie.lock() = (Some(HeaderValue::from_static("c2subauth=SECRET")), 1);
        assert!(!format!("{s:?}").contains("SECRET"));
    }
}
