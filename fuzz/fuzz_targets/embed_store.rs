//! An EmbedStore (`.b2e`): the frame, its `estore_metadata` key map, and
//! each key's frame read and probed through the store's content; the key
//! map's parser alone on the same bytes.
#![no_main]
use blosc_decode::container::Env;
use blosc_decode::io::{MemSource, Source};
use blosc_decode::open::embed::{self, Leaf};
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};

static ENV: OnceLock<Env> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let _ = blosc_decode::format::embed::parse(data);
    let env = ENV.get_or_init(|| Env::new(8 << 20));
    let src: Arc<dyn Source> = Arc::new(MemSource::new(data.to_vec()));
    if let Ok(store) = embed::open(src, "f.b2e".as_ref(), env) {
        for e in store.entries.iter().take(100) {
            let leaf = Arc::new(Leaf::new(store.store.clone(), e, "f.b2e/k".into()));
            let mut b = [0u8; 16];
            let n = (leaf.len() as usize).min(16);
            let _ = leaf.read_exact_at(0, &mut b[..n]);
            let _ = blosc_decode::detect::probe_source(leaf, "f.b2e/k".as_ref());
        }
    }
});
