//! Host names resolved with their addresses shuffled, as object_store's
//! client does: connections to a store whose name has many addresses (S3)
//! spread over them instead of all going to the first.

use rand::seq::SliceRandom;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::ToSocketAddrs;

/// The system's resolver (`getaddrinfo`, on a blocking thread), its
/// answer shuffled.
#[derive(Debug)]
pub struct Shuffled;

impl Resolve for Shuffled {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let found = tokio::task::spawn_blocking(move || {
                let mut addrs: Vec<_> = (name.as_str(), 0).to_socket_addrs()?.collect();
                addrs.shuffle(&mut rand::rng());
                Ok::<_, std::io::Error>(addrs)
            })
            .await
            .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)??;
            Ok(Box::new(found.into_iter()) as Addrs)
        })
    }
}
