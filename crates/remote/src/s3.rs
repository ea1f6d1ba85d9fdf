//! S3 requests built by this crate: the bucket's base URL as object_store
//! derives it from its configuration, and SigV4 signatures with the
//! credential object_store's chain gives (none for unsigned requests).

use crate::fetch::FetchError;
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
        }
    }

    /// Sign `req` (SigV4, service `s3`: the path is signed as sent).
    pub async fn sign(&self, req: &mut HttpRequest) -> Result<(), FetchError> {
        let Some(store) = &self.signer else {
            return Ok(());
        };
        let cred = store.credentials().get_credential().await.map_err(|e| {
            FetchError::Io(libc::EACCES, format!("no AWS credential: {}", chain(&e)))
        })?;
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
    use super::base_url;

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
