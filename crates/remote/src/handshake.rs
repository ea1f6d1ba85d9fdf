//! Connections made within a bound, and which part of one a server left
//! unanswered: the TCP connect, or the TLS handshake after it.
//!
//! reqwest's own connect timeout covers both parts and says only "timed
//! out", and a timed-out connect is retried: an `https://` URL naming a
//! server that takes connections and never speaks TLS (a plain-HTTP port
//! that waits for a request, a stalled proxy) would cost every retry.
//! Here the TLS configuration is ours ([`config`]): its session cache,
//! which rustls asks while building a ClientHello (when the TCP
//! connection is up), marks the connect under way as in its handshake
//! ([`Bounded`] scopes the mark to one connect). A connect that runs out
//! of time in its handshake fails with [`NoHandshake`], not retried.

use object_store::client::{HttpError, HttpErrorKind};
use rustls::client::{ClientSessionMemoryCache, ClientSessionStore};
use rustls::client::{Tls12ClientSessionValue, Tls13ClientSessionValue};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::NamedGroup;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

tokio::task_local! {
    /// Set by the session cache when the connect it is scoped to sends its
    /// ClientHello.
    static IN_HANDSHAKE: Arc<AtomicBool>;
}

/// The TLS configuration of every client: the system's certificate
/// authorities (or `SSL_CERT_FILE` / `SSL_CERT_DIR`) and `extra`, HTTP/1.1
/// by ALPN, rustls with ring, sessions resumed from a cache that marks
/// handshakes begun.
pub fn config(extra: &[CertificateDer<'static>]) -> Result<rustls::ClientConfig, rustls::Error> {
    let mut roots = rustls::RootCertStore::empty();
    for c in extra {
        roots.add(c.clone())?;
    }
    let native = rustls_native_certs::load_native_certs();
    for e in &native.errors {
        log::debug!("system certificate authorities: {e}");
    }
    // Old or odd certificates in a system store are skipped, as reqwest does.
    let (added, skipped) = roots.add_parsable_certificates(native.certs);
    log::debug!("{added} system certificate authorities ({skipped} skipped)");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    tls.resumption =
        rustls::client::Resumption::store(Arc::new(Marking(ClientSessionMemoryCache::new(256))));
    Ok(tls)
}

/// A connect (TCP and, for `https://`, the TLS handshake) that did not
/// end within its bound after the server took the TCP connection: the
/// server's `host:port` once [`naming`] has added it.
#[derive(Debug)]
pub struct NoHandshake {
    pub limit: Duration,
    pub at: Option<String>,
}

impl std::fmt::Display for NoHandshake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = self.at.as_deref().map(|a| format!(" from {a}"));
        write!(
            f,
            "no TLS handshake{} within {:?}: is it an https server?",
            at.unwrap_or_default(),
            self.limit
        )
    }
}

impl std::error::Error for NoHandshake {}

/// `e` as the one line [`NoHandshake`] says, naming the server `at`, if
/// a [`NoHandshake`] is in its chain (reqwest's words around it say
/// nothing more); else `e`.
pub fn naming(e: HttpError, at: Option<String>) -> HttpError {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(x) = cur {
        if let Some(n) = x.downcast_ref::<NoHandshake>() {
            let limit = n.limit;
            return HttpError::new(HttpErrorKind::Timeout, NoHandshake { limit, at });
        }
        cur = x.source();
    }
    e
}

/// A connect whose TCP connection was not made within its bound.
#[derive(Debug)]
pub struct NoConnection(pub Duration);

impl std::fmt::Display for NoConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "connect timed out: no connection within {:?}", self.0)
    }
}

impl std::error::Error for NoConnection {}

/// The connector layer bounding every connect by `limit`.
#[derive(Clone, Copy, Debug)]
pub struct Bounded(pub Duration);

impl<S> tower_layer::Layer<S> for Bounded {
    type Service = BoundedService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        BoundedService {
            inner,
            limit: self.0,
        }
    }
}

/// See [`Bounded`].
#[derive(Clone, Debug)]
pub struct BoundedService<S> {
    inner: S,
    limit: Duration,
}

impl<S, R> tower_service::Service<R> for BoundedService<S>
where
    S: tower_service::Service<R, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let limit = self.limit;
        let mark = Arc::new(AtomicBool::new(false));
        let connect = IN_HANDSHAKE.scope(mark.clone(), self.inner.call(req));
        Box::pin(async move {
            match tokio::time::timeout(limit, connect).await {
                Ok(r) => r,
                Err(_) if mark.load(Ordering::Relaxed) => {
                    Err(NoHandshake { limit, at: None }.into())
                }
                Err(_) => Err(NoConnection(limit).into()),
            }
        })
    }
}

/// Mark the connect under way (if any) as in its TLS handshake.
fn handshake_begun() {
    let _ = IN_HANDSHAKE.try_with(|m| m.store(true, Ordering::Relaxed));
}

/// rustls's session cache, marking each handshake begun: rustls asks it
/// for a server's key-exchange hint and tickets as it builds a ClientHello.
#[derive(Debug)]
struct Marking(ClientSessionMemoryCache);

impl ClientSessionStore for Marking {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: NamedGroup) {
        self.0.set_kx_hint(server_name, group)
    }
    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<NamedGroup> {
        handshake_begun();
        self.0.kx_hint(server_name)
    }
    fn set_tls12_session(&self, server_name: ServerName<'static>, v: Tls12ClientSessionValue) {
        self.0.set_tls12_session(server_name, v)
    }
    fn tls12_session(&self, server_name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        handshake_begun();
        self.0.tls12_session(server_name)
    }
    fn remove_tls12_session(&self, server_name: &ServerName<'static>) {
        self.0.remove_tls12_session(server_name)
    }
    fn insert_tls13_ticket(&self, server_name: ServerName<'static>, v: Tls13ClientSessionValue) {
        self.0.insert_tls13_ticket(server_name, v)
    }
    fn take_tls13_ticket(
        &self,
        server_name: &ServerName<'static>,
    ) -> Option<Tls13ClientSessionValue> {
        handshake_begun();
        self.0.take_tls13_ticket(server_name)
    }
}
