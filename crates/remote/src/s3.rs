//! S3 requests built by this crate: the bucket's base URL as object_store
//! derives it from its configuration, and SigV4 signatures with the
//! credential object_store's chain gives (none for unsigned requests).

use crate::error::FetchError;
use crate::net::chain;
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey, AwsAuthorizer};
use object_store::client::HttpRequest;

/// How to address and sign requests to one bucket.
pub struct Bucket {
    /// `https://s3.REGION.amazonaws.com/BUCKET`, `ENDPOINT/BUCKET` (path
    /// style) or the virtual-hosted form; no slash at its end.
    pub url: String,
    region: String,
    /// The built store, for its credential chain; `None`: unsigned.
    signer: Option<AmazonS3>,
    /// Where object_store's chain takes its credential from.
    from: Chain,
}

/// The link of object_store's credential chain a builder uses (it picks
/// one when built, in this order).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Chain {
    /// `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`.
    Static,
    /// `AWS_WEB_IDENTITY_TOKEN_FILE` and `AWS_ROLE_ARN`.
    WebIdentity,
    /// `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` or `_FULL_URI`.
    Container,
    /// Nothing named: the instance metadata service at this URL.
    Instance(String),
}

/// How long the instance metadata service may take to give a credential
/// when nothing else names one: on a machine that is not a cloud instance
/// its address is unreachable or a black hole.
const INSTANCE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The places looked for a credential and the fixes, for the error of
/// finding none.
fn none_found(metadata: &str, why: &str) -> String {
    format!(
        "no AWS credentials found: looked in the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: not set), \
         web identity (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN: not set), container credentials \
         (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI: not set) and instance metadata at {metadata} ({why}); \
         ~/.aws profiles are not read: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or -o anonymous for a public bucket"
    )
}

/// The credential-chain link a builder uses (see [`Chain`]).
fn chain_of(builder: &AmazonS3Builder, env: impl Fn(&str) -> Option<String>) -> Chain {
    let get = |k| builder.get_config_value(&k).filter(|v| !v.is_empty());
    if get(AmazonS3ConfigKey::AccessKeyId).is_some()
        || get(AmazonS3ConfigKey::SecretAccessKey).is_some()
    {
        Chain::Static
    } else if env("AWS_WEB_IDENTITY_TOKEN_FILE").is_some() && env("AWS_ROLE_ARN").is_some() {
        Chain::WebIdentity
    } else if get(AmazonS3ConfigKey::ContainerCredentialsRelativeUri).is_some()
        || get(AmazonS3ConfigKey::ContainerCredentialsFullUri).is_some()
    {
        Chain::Container
    } else {
        Chain::Instance(
            get(AmazonS3ConfigKey::MetadataEndpoint)
                .unwrap_or_else(|| "http://169.254.169.254".into()),
        )
    }
}

/// A credential's parts that go into headers, checked (object_store
/// panics on a header value it cannot make).
fn header_safe(what: &str, v: &str) -> Result<(), FetchError> {
    if reqwest::header::HeaderValue::from_str(v).is_err() {
        let m = format!("{what}: a control or non-ASCII character in it");
        return Err(FetchError::denied(m));
    }
    Ok(())
}

impl std::fmt::Debug for Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bucket({})", self.url)
    }
}

impl Bucket {
    /// The bucket `builder` (not built yet) is configured for; `store` is
    /// what it built.
    pub fn new(builder: &AmazonS3Builder, store: AmazonS3, bucket: &str) -> Bucket {
        let get = |k| builder.get_config_value(&k);
        let region = get(AmazonS3ConfigKey::Region).unwrap_or_else(|| "us-east-1".into());
        let virtual_hosted = get(AmazonS3ConfigKey::VirtualHostedStyleRequest)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let unsigned =
            get(AmazonS3ConfigKey::SkipSignature).is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let url = base_url(
            get(AmazonS3ConfigKey::Endpoint).as_deref(),
            virtual_hosted,
            &region,
            bucket,
        );
        Bucket {
            url,
            region,
            signer: (!unsigned).then_some(store),
            from: chain_of(builder, |k| std::env::var(k).ok().filter(|v| !v.is_empty())),
        }
    }

    /// Sign `req` (SigV4, service `s3`: the path is signed as sent).
    pub async fn sign(&self, req: &mut HttpRequest) -> Result<(), FetchError> {
        let Some(store) = &self.signer else {
            return Ok(());
        };
        let got = store.credentials().get_credential();
        let cred = match &self.from {
            Chain::Instance(at) => match tokio::time::timeout(INSTANCE_WAIT, got).await {
                Err(_) => Err(none_found(at, "no answer in 2 s")),
                Ok(r) => r.map_err(|e| none_found(at, &chain(&e))),
            },
            Chain::WebIdentity => got
                .await
                .map_err(|e| format!("AWS credentials by web identity (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN): {}", chain(&e))),
            Chain::Container => got
                .await
                .map_err(|e| format!("AWS container credentials (AWS_CONTAINER_CREDENTIALS_*): {}", chain(&e))),
            Chain::Static => got.await.map_err(|e| format!("AWS credentials: {}", chain(&e))),
        }
        .map_err(FetchError::denied)?;
        header_safe("AWS_ACCESS_KEY_ID", &cred.key_id)?;
        if let Some(t) = &cred.token {
            header_safe("AWS_SESSION_TOKEN", t)?;
        }
        AwsAuthorizer::new(&cred, "s3", &self.region).authorize(req, None);
        Ok(())
    }
}

/// The base URL of `bucket`, as object_store makes it.
fn base_url(endpoint: Option<&str>, virtual_hosted: bool, region: &str, bucket: &str) -> String {
    match (endpoint, virtual_hosted) {
        (Some(e), true) => e.trim_end_matches('/').to_string(),
        (Some(e), false) => format!("{}/{bucket}", e.trim_end_matches('/')),
        (None, true) => format!("https://{bucket}.s3.{region}.amazonaws.com"),
        (None, false) => format!("https://s3.{region}.amazonaws.com/{bucket}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_link_a_builder_uses() {
        let env = |_: &str| None;
        let b = AmazonS3Builder::new();
        assert_eq!(
            chain_of(&b, env),
            Chain::Instance("http://169.254.169.254".into())
        );
        let m = b.clone().with_metadata_endpoint("http://127.0.0.1:9");
        assert_eq!(
            chain_of(&m, env),
            Chain::Instance("http://127.0.0.1:9".into())
        );
        let k = b
            .clone()
            .with_access_key_id("a")
            .with_secret_access_key("s");
        assert_eq!(chain_of(&k, env), Chain::Static);
        let web = |k: &str| k.starts_with("AWS_").then(|| "x".to_string());
        assert_eq!(chain_of(&b, web), Chain::WebIdentity);
        let c = b.with_config(AmazonS3ConfigKey::ContainerCredentialsRelativeUri, "/v2/x");
        assert_eq!(chain_of(&c, env), Chain::Container);
        let e = none_found("http://169.254.169.254", "no answer in 2 s");
        for w in [
            "AWS_ACCESS_KEY_ID",
            "web identity",
            "container",
            "instance metadata",
            "-o anonymous",
        ] {
            assert!(e.contains(w), "{w} not in {e}");
        }
    }

    #[test]
    fn credentials_with_control_characters_are_errors() {
        assert!(header_safe("AWS_ACCESS_KEY_ID", "a\u{1}b").is_err());
        header_safe("AWS_ACCESS_KEY_ID", "AKIA").unwrap();
    }

    #[test]
    fn bucket_urls() {
        let b = |e, v| base_url(e, v, "eu-west-1", "bk");
        assert_eq!(b(None, false), "https://s3.eu-west-1.amazonaws.com/bk");
        assert_eq!(b(None, true), "https://bk.s3.eu-west-1.amazonaws.com");
        assert_eq!(
            b(Some("http://127.0.0.1:9/"), false),
            "http://127.0.0.1:9/bk"
        );
        assert_eq!(b(Some("https://bk.minio"), true), "https://bk.minio");
    }
}
