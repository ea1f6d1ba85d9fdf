//! Set-up mistakes: each gives one line naming the cause and the fix, a
//! status of 1, never a panic (101) or a long wait.

use crate::common::*;
use crate::harness::*;
use crate::servers::*;
use std::process::Command;
use std::time::Duration;

const REL: &str = "frame/blocks-lz4.b2frame";

/// Every AWS variable the tests' environment or the machine's may set.
const AWS_VARS: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_METADATA_ENDPOINT",
];

/// An S3 remote with the AWS environment cleared, then `env` set.
fn bare_s3(base: &str, opts: &[&str], env: &[(&str, &str)]) -> Remote {
    let mut e: Vec<(String, Option<String>)> =
        AWS_VARS.iter().map(|k| (k.to_string(), None)).collect();
    e.extend(
        env.iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string()))),
    );
    Remote {
        base: base.into(),
        opts: opts.iter().map(|o| o.to_string()).collect(),
        env: e,
    }
}

/// `o` failed with status 1 and one line holding every one of `words`.
fn one_line(o: &Out, words: &[&str]) {
    let err = o.stderr.trim_end();
    assert_eq!(o.status.code(), Some(1), "status {:?}: {err}", o.status);
    assert!(!err.contains("panicked"), "a panic: {err}");
    assert_eq!(err.lines().count(), 1, "not one line: {err}");
    for w in words {
        assert!(err.contains(w), "{w:?} not in: {err}");
    }
}

/// A port on 127.0.0.1 nothing listens on.
fn closed_port() -> String {
    format!("http://127.0.0.1:{}", free_port())
}

#[test]
fn an_endpoint_without_a_scheme_is_refused_in_one_line() {
    let r = bare_s3(
        "s3://b",
        &["endpoint=127.0.0.1:5603"],
        &[("AWS_ACCESS_KEY_ID", "a"), ("AWS_SECRET_ACCESS_KEY", "s")],
    );
    let o = r.cat("k.b2frame", None, &[]);
    one_line(
        &o,
        &["endpoint 127.0.0.1:5603: no scheme: write http://127.0.0.1:5603 or https://"],
    );
    let o = r.info("k.b2frame", &[]);
    one_line(&o, &["no scheme"]);
    // The mount refuses it before mounting anything.
    let mp = tempfile::tempdir().unwrap();
    let mut c = Command::new(bin());
    c.arg("s3://b/")
        .arg(mp.path())
        .args(["-f", "-o", "endpoint=127.0.0.1:5603"]);
    let o = run(c, Duration::from_secs(30));
    // A mount's option errors are usage errors: status 2.
    assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
    assert!(
        o.stderr
            .starts_with("bloscfs: endpoint 127.0.0.1:5603: no scheme"),
        "{}",
        o.stderr
    );
}

#[test]
fn odd_regions_endpoints_and_keys_are_errors_not_panics() {
    let closed = closed_port();
    let endpoint = format!("endpoint={closed}");
    let keys = [("AWS_ACCESS_KEY_ID", "a"), ("AWS_SECRET_ACCESS_KEY", "s")];
    for region in ["region=a\u{1}b", "region=a b", "region=a/b"] {
        let o = bare_s3("s3://b", &[&endpoint, region], &keys).cat(REL, None, &[]);
        one_line(&o, &["not a region name"]);
    }
    let mut env = keys.to_vec();
    env.push(("AWS_REGION", "eu\u{1}"));
    let o = bare_s3("s3://b", &[&endpoint], &env).cat(REL, None, &[]);
    one_line(&o, &["AWS_REGION", "not a region name"]);
    let o = bare_s3("s3://b", &["endpoint=http://h/a b"], &keys).cat(REL, None, &[]);
    one_line(&o, &["endpoint"]);
    let env = [
        ("AWS_ACCESS_KEY_ID", "a\u{1}"),
        ("AWS_SECRET_ACCESS_KEY", "s"),
    ];
    let o = bare_s3("s3://b", &[&endpoint], &env).cat(REL, None, &[]);
    one_line(&o, &["AWS_ACCESS_KEY_ID: a control or non-ASCII character"]);
}

/// What `bloscfs cat` of the local fixture `rel` writes.
fn local_cat(rel: &str) -> Vec<u8> {
    let o = Command::new(bin())
        .arg("cat")
        .arg(fixture(rel))
        .output()
        .unwrap();
    assert!(o.status.success());
    o.stdout
}

#[test]
fn aws_endpoint_url_variables_name_the_endpoint_as_the_aws_tools_do() {
    let Some(moto) = Moto::start() else { return };
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("frame")).unwrap();
    copy(&fixture(REL), &d.path().join(REL));
    moto.mkbucket("envb");
    moto.upload("envb", "p", d.path());
    let want = local_cat(REL);
    let moto_url = moto.endpoint();
    let closed = closed_port();
    let mut env: Vec<(&str, &str)> = Moto::env().to_vec();
    env.push(("AWS_ENDPOINT_URL", &moto_url));
    let o = bare_s3("s3://envb/p", &[], &env).cat(REL, None, &[]);
    assert!(o.status.success(), "AWS_ENDPOINT_URL: {}", o.stderr);
    assert!(o.stdout == want, "AWS_ENDPOINT_URL: other bytes");
    // AWS_ENDPOINT_URL_S3 wins over AWS_ENDPOINT_URL (a closed port here).
    let mut env: Vec<(&str, &str)> = Moto::env().to_vec();
    env.push(("AWS_ENDPOINT_URL", &closed));
    env.push(("AWS_ENDPOINT_URL_S3", &moto_url));
    let o = bare_s3("s3://envb/p", &[], &env).cat(REL, None, &[]);
    assert!(o.status.success(), "AWS_ENDPOINT_URL_S3: {}", o.stderr);
    assert!(o.stdout == want, "AWS_ENDPOINT_URL_S3: other bytes");
    // -o endpoint= wins over both.
    let e = format!("endpoint={moto_url}");
    let mut env: Vec<(&str, &str)> = Moto::env().to_vec();
    env.push(("AWS_ENDPOINT_URL_S3", &closed));
    let o = bare_s3("s3://envb/p", &[&e], &env).cat(REL, None, &[]);
    assert!(o.status.success(), "-o endpoint=: {}", o.stderr);
    // A variable without a scheme is named in the error.
    let mut env: Vec<(&str, &str)> = Moto::env().to_vec();
    env.push(("AWS_ENDPOINT_URL", "127.0.0.1:9"));
    let o = bare_s3("s3://envb/p", &[], &env).cat(REL, None, &[]);
    one_line(&o, &["AWS_ENDPOINT_URL 127.0.0.1:9: no scheme"]);
}

#[test]
fn no_credentials_found_is_one_line_within_seconds() {
    // An instance metadata service that takes connections and never
    // answers: the kernel accepts them into the backlog of this socket.
    let stall = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let metadata = format!("http://{}", stall.local_addr().unwrap());
    let endpoint = format!("endpoint={}", closed_port());
    for md in [metadata.clone(), closed_port()] {
        let r = bare_s3("s3://b", &[&endpoint], &[("AWS_METADATA_ENDPOINT", &md)]);
        let mut c = r.command();
        c.args(["cat", "-o", &r.opts.join(",")]).arg(r.url(REL));
        // Within the limit, or the harness fails the test.
        let o = run(c, Duration::from_secs(15));
        one_line(
            &o,
            &[
                "no AWS credentials found",
                "AWS_ACCESS_KEY_ID",
                "web identity",
                "container credentials",
                &format!("instance metadata at {md}"),
                "-o anonymous",
            ],
        );
    }
    drop(stall);
}

/// A missing key and a missing bucket say so in words.
#[test]
fn s3_errors_are_words() {
    let Some(moto) = Moto::start() else { return };
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("frame")).unwrap();
    copy(&fixture(REL), &d.path().join(REL));
    moto.mkbucket("words");
    moto.upload("words", "", d.path());
    let r = Remote::s3(&moto, "words", "");
    let nob = Remote::s3(&moto, "nobucket", "");
    for (o, words) in [
        (
            r.cat("frame/none.b2frame", None, &[]),
            "no such key (NoSuchKey, 404)",
        ),
        (
            r.info("frame/none.b2frame", &[]),
            "no such key (NoSuchKey, 404)",
        ),
        (
            nob.cat(REL, None, &[]),
            "no such bucket (NoSuchBucket, 404)",
        ),
        (nob.info(REL, &[]), "no such bucket (NoSuchBucket, 404)"),
    ] {
        one_line(&o, &[words]);
        assert!(!o.stderr.contains('<'), "XML: {}", o.stderr);
    }
}

/// Against a store that checks signatures (moto with its checks on, keys
/// made by its IAM): the right secret reads (our SigV4 signing is what the
/// store computes), a wrong one and an unknown key id are one line in
/// words, never XML.
#[test]
fn a_wrong_secret_is_said_in_words_by_a_store_that_checks_signatures() {
    let Some(moto) = Moto::start() else { return };
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("frame")).unwrap();
    copy(&fixture(REL), &d.path().join(REL));
    moto.mkbucket("signed");
    moto.upload("signed", "", d.path());
    let (id, secret) = moto.iam_key("reader");
    moto.check_signatures();
    let base = "s3://signed";
    let endpoint = format!("endpoint={}", moto.endpoint());
    let opts = [endpoint.as_str(), "region=us-east-1"];
    let with = |id: &str, secret: &str| {
        bare_s3(
            base,
            &opts,
            &[("AWS_ACCESS_KEY_ID", id), ("AWS_SECRET_ACCESS_KEY", secret)],
        )
    };
    let good = with(&id, &secret).cat(REL, None, &[]);
    assert!(good.status.success(), "the right secret: {}", good.stderr);
    assert!(good.stdout == local_cat(REL));
    let wrong = format!("{secret}x");
    for (r, words) in [
        (
            with(&id, &wrong),
            "the secret key does not match the access key id (SignatureDoesNotMatch, 403)",
        ),
        (
            with("AKIANOSUCHKEY0000000", &secret),
            "the store knows no such access key id",
        ),
    ] {
        for o in [r.cat(REL, None, &[]), r.info(REL, &[])] {
            one_line(&o, &[words]);
            assert!(!o.stderr.contains('<'), "XML: {}", o.stderr);
            assert!(
                !o.stderr.contains(&wrong),
                "the secret printed: {}",
                o.stderr
            );
        }
    }
}

/// Options of another kind of source are refused before any request.
#[test]
fn options_that_do_not_apply_to_the_source_are_refused() {
    let port = free_port();
    let c2 = Remote {
        base: format!("caterva2://127.0.0.1:{port}/@public"),
        opts: vec!["region=eu-west-1".into()],
        env: vec![],
    };
    one_line(
        &c2.cat(REL, None, &[]),
        &["option region (s3://) does not apply to caterva2://"],
    );
    let http = Remote {
        base: format!("http://127.0.0.1:{port}"),
        opts: vec!["anonymous".into()],
        env: vec![],
    };
    one_line(
        &http.info(REL, &[]),
        &["anonymous (s3://) does not apply to http(s)://"],
    );
    let s3 = bare_s3("s3://b", &["manifest=m.txt"], &[]);
    one_line(
        &s3.cat(REL, None, &[]),
        &["manifest (http(s)://) does not apply to s3://"],
    );
    // A local source: cat, and the mount (a usage error).
    let mut c = Command::new(bin());
    c.args(["cat", "-o", "timeout=3"]).arg(fixture(REL));
    one_line(
        &run(c, Duration::from_secs(30)),
        &["timeout (remote sources)"],
    );
    let mp = tempfile::tempdir().unwrap();
    let mut c = Command::new(bin());
    c.arg(fixture("frame"))
        .arg(mp.path())
        .args(["-f", "-o", "endpoint=http://127.0.0.1:9"]);
    let o = run(c, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
    assert!(
        o.stderr.contains("does not apply to a local source"),
        "{}",
        o.stderr
    );
}

/// `https://` spoken to a plain-HTTP server: an error at once, saying so.
#[test]
fn https_to_a_plain_http_server_says_so() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("frame")).unwrap();
    copy(&fixture(REL), &d.path().join(REL));
    let Some(srv) = Faulty::start(d.path()) else {
        return;
    };
    let r = Remote {
        base: format!("https://127.0.0.1:{}", srv.0.port),
        opts: vec![],
        env: vec![],
    };
    // Within the harness's limit, or the test fails.
    one_line(&r.cat(REL, None, &[]), &["is it an http:// server?"]);
}

/// object_store asks the instance metadata service (plain `http://` on the
/// local link) for credentials: it is asked, not refused by the client,
/// when the store itself is reached over `https://` only.
#[test]
fn instance_metadata_is_asked_over_http_for_an_https_store() {
    let md = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", md.local_addr().unwrap());
    let endpoint = format!("endpoint=https://127.0.0.1:{}", free_port());
    let r = bare_s3("s3://b", &[&endpoint], &[("AWS_METADATA_ENDPOINT", &url)]);
    let mut c = r.command();
    c.args(["cat", "-o", &r.opts.join(",")]).arg(r.url(REL));
    let o = run(c, Duration::from_secs(15));
    assert!(!o.status.success(), "{}", o.stderr);
    // A connection it made waits in the listener's backlog.
    md.set_nonblocking(true).unwrap();
    assert!(
        md.accept().is_ok(),
        "the instance metadata service was never asked: {}",
        o.stderr
    );
}

/// A prefix holding nothing mounts (as `ls` of it is no error) and the log
/// says so.
#[test]
fn an_empty_prefix_mounts_with_a_warning() {
    if !fuse_available() {
        return;
    }
    let Some(moto) = Moto::start() else { return };
    moto.mkbucket("empty");
    let r = Remote::s3(&moto, "empty", "nothing/here");
    let mut m = r.mount(&[]);
    assert_eq!(std::fs::read_dir(m.mp()).unwrap().count(), 0);
    let log = m.log();
    m.unmount();
    assert!(
        log.contains("s3://empty/nothing/here: nothing there"),
        "{log}"
    );
}
