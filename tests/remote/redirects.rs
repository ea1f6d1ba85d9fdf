//! Redirects never carry a credential to another host, nor bring its bytes
//! or listing back: a store (`faulty.py`) answers 301/302/307/308 with a
//! `Location` on the other host, a second `faulty.py` started with
//! `--record` and serving other bytes under the same names, which must be
//! sent nothing. S3 and Caterva2 follow no redirect unless `-o
//! follow_redirects` (to the same origin only even then); plain HTTP
//! follows those to the same origin. A redirect not followed is an error
//! naming its target, asked once (not retried).

use crate::common::*;
use crate::harness::*;
use crate::servers::*;
use std::process::Command;
use std::time::Duration;

const REL: &str = "frame/blocks-lz4.b2frame";
/// What the other host serves under [`REL`]'s name.
const OTHER_REL: &str = "frame/blosclz-shuffle-ts1-c.b2frame";
/// 307 and 308 first: they resend a body (a login form) where they lead.
const CODES: [u16; 4] = [307, 308, 301, 302];
const TOKEN: &str = "session-token-for-here-only";
const USER: &str = "reader-here@example.com";
const PASSWORD: &str = "password-for-here-only";

/// The store and the other host, and the directory they serve.
struct Hosts {
    here: Faulty,
    other: Faulty,
    dir: tempfile::TempDir,
}

/// [`REL`] served by the store at `REL`, `bkt/REL` (S3, path-style) and
/// `api/fetch/@public/REL` (Caterva2); the other host serves
/// [`OTHER_REL`]'s bytes under the same names.
fn hosts() -> Option<Hosts> {
    let dir = tempfile::tempdir().unwrap();
    for (top, from) in [("here", REL), ("other", OTHER_REL)] {
        for under in ["", "bkt/", "api/fetch/@public/"] {
            let to = dir.path().join(top).join(format!("{under}{REL}"));
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            copy(&fixture(from), &to);
        }
    }
    let here = Faulty::start_recording(&dir.path().join("here"))?;
    let other = Faulty::start_recording(&dir.path().join("other"))?;
    Some(Hosts { here, other, dir })
}

impl Hosts {
    /// `redirect:CODE:PORT` of the other host.
    fn elsewhere(&self, code: u16) -> String {
        format!("redirect:{code}:{}", self.other.0.port)
    }

    /// The URL `path` names on the other host.
    fn there(&self, path: &str) -> String {
        format!("{}/{path}", self.other.base())
    }

    /// The other host was sent nothing.
    fn nothing_elsewhere(&self, what: &str) {
        let got = self.other.received();
        assert!(got.is_empty(), "{what}: the other host was sent {got:#?}");
    }

    /// The store was redirecting, and was asked nothing twice (a redirect
    /// not followed is not retried).
    fn asked_once(&self, what: &str) {
        assert!(self.here.faulted("redirect") > 0, "{what}: no redirect");
        let mut asked: Vec<String> = (self.here.received().iter())
            .map(|r| format!("{} {}", r["method"], r["path"]))
            .collect();
        let n = asked.len();
        asked.sort();
        asked.dedup();
        assert_eq!(asked.len(), n, "{what}: asked again: {asked:?}");
    }

    /// Both servers' counters and faults cleared.
    fn reset(&self) {
        self.here.reset();
        self.other.reset();
    }

    /// Caterva2 at the store, logging in with a password file only its
    /// owner reads.
    fn caterva2(&self) -> Remote {
        use std::os::unix::fs::PermissionsExt;
        let pw = self.dir.path().join("pw");
        std::fs::write(&pw, format!("{PASSWORD}\n")).unwrap();
        std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o600)).unwrap();
        Remote {
            base: format!("caterva2://127.0.0.1:{}/@public", self.here.0.port),
            opts: vec![
                format!("user={USER}"),
                format!("password_file={}", pw.display()),
            ],
            env: vec![],
        }
    }

    /// The bucket `bkt` at the store, with a session token.
    fn s3(&self) -> Remote {
        let mut env: Vec<(String, Option<String>)> = Moto::env()
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect();
        env.push(("AWS_SESSION_TOKEN".into(), Some(TOKEN.into())));
        Remote {
            base: "s3://bkt".into(),
            opts: vec![
                format!("endpoint={}", self.here.base()),
                "region=us-east-1".into(),
            ],
            env,
        }
    }
}

/// `o` failed, saying it was redirected to `target` (its start: a query
/// may follow) with code `code`, and did not follow.
fn refused(o: &Out, target: &str, code: u16, what: &str) {
    assert!(!o.status.success(), "{what}: succeeded");
    for want in [
        format!("redirected to {target}"),
        format!("({code}): not followed"),
    ] {
        assert!(
            o.stderr.contains(&want),
            "{what}: {want:?} not in {}",
            o.stderr
        );
    }
}

/// Is `secret` in anything the store was sent?
fn sent_here(h: &Hosts, secret: &str) -> bool {
    h.here
        .received()
        .iter()
        .any(|r| r.to_string().contains(secret))
}

#[test]
fn a_caterva2_login_redirected_elsewhere_sends_no_password_there() {
    let Some(h) = hosts() else { return };
    let r = h.caterva2();
    let want = reference_bytes(REL);
    let o = r.cat(REL, None, &[]);
    assert!(o.status.success() && o.stdout == want, "{}", o.stderr);
    assert!(sent_here(&h, PASSWORD), "the login did not reach the store");
    h.reset();
    for code in CODES {
        for r in [r.clone(), r.with("follow_redirects")] {
            let what = format!("login answered {code} elsewhere, {:?}", r.opts);
            h.here.set_fault(&format!("{}&count=1", h.elsewhere(code)));
            let o = r.cat(REL, None, &[]);
            h.nothing_elsewhere(&what);
            refused(&o, &h.there("auth/jwt/login"), code, &what);
            assert!(!o.stderr.contains(PASSWORD), "{}", o.stderr);
            h.asked_once(&what);
            h.reset();
        }
        // To the same origin: followed only if asked for.
        h.here.set_fault(&format!("redirect:{code}&count=1"));
        let o = r.cat(REL, None, &[]);
        let here = format!("{}/auth/jwt/login", h.here.base());
        refused(&o, &here, code, &format!("login answered {code} here"));
        assert!(o.stderr.contains("-o follow_redirects"), "{}", o.stderr);
        h.reset();
    }
    // 307 and 308 resend the form: the login then succeeds on the store.
    for code in [307, 308] {
        h.here.set_fault(&format!("redirect:{code}&count=1"));
        let o = r.with("follow_redirects").cat(REL, None, &[]);
        assert!(
            o.status.success() && o.stdout == want,
            "{code}: {}",
            o.stderr
        );
        h.nothing_elsewhere(&format!("{code} followed here"));
        h.reset();
    }
}

#[test]
fn s3_gets_redirected_elsewhere_send_no_token_and_take_no_bytes_there() {
    let Some(h) = hosts() else { return };
    let r = h.s3();
    let o = r.cat(REL, None, &[]);
    assert!(
        o.status.success() && o.stdout == reference_bytes(REL),
        "{}",
        o.stderr
    );
    assert!(sent_here(&h, TOKEN), "the session token was not used");
    h.reset();
    for code in CODES {
        for r in [r.clone(), r.with("follow_redirects")] {
            let what = format!("GET answered {code} elsewhere, {:?}", r.opts);
            h.here.set_fault(&h.elsewhere(code));
            let o = r.cat(REL, None, &[]);
            h.nothing_elsewhere(&what);
            refused(&o, &h.there(&format!("bkt/{REL}")), code, &what);
            assert!(o.stdout.is_empty(), "{what}: bytes were written");
            h.asked_once(&what);
            h.reset();
        }
    }
}

/// `bloscfs -f SOURCE MNT` with `r`'s options, expected to fail before
/// mounting.
fn mount_fails(r: &Remote) -> Out {
    let mp = tempfile::tempdir().unwrap();
    let mut c = Command::new(bin());
    for (k, v) in &r.env {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c.arg("-f").arg(&r.base).arg(mp.path());
    c.arg("-o").arg(r.opts.join(","));
    run(c, Duration::from_secs(30))
}

#[test]
fn an_s3_listing_redirected_elsewhere_is_not_followed() {
    let Some(h) = hosts() else { return };
    for code in CODES {
        let what = format!("listing answered {code} elsewhere");
        h.here.set_fault(&h.elsewhere(code));
        let o = mount_fails(&h.s3());
        h.nothing_elsewhere(&what);
        refused(&o, &h.there("bkt"), code, &what);
        h.asked_once(&what);
        h.reset();
    }
}

#[test]
fn plain_http_follows_redirects_to_its_own_origin_only() {
    let Some(h) = hosts() else { return };
    let r = Remote::http(&h.here);
    let want = reference_bytes(REL);
    for code in CODES {
        let o = r.cat(&format!("_f/redirect:{code}/{REL}"), None, &[]);
        assert!(
            o.status.success() && o.stdout == want,
            "{code}: {}",
            o.stderr
        );
        assert!(h.here.faulted("redirect") > 0);
        h.nothing_elsewhere(&format!("{code} here"));
        h.reset();
        let what = format!("GET answered {code} elsewhere");
        let o = r.cat(&format!("_f/{}/{REL}", h.elsewhere(code)), None, &[]);
        h.nothing_elsewhere(&what);
        refused(&o, &h.there(REL), code, &what);
        assert!(o.stdout.is_empty(), "{what}: bytes were written");
        h.asked_once(&what);
        h.reset();
    }
}
