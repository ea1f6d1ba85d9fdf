//! The v3 `sharding_indexed` codec's configuration: each chunk of the
//! grid (a shard) is one stored file holding a grid of inner chunks and an
//! index of where each lies. An inner chunk may itself be a shard (nested
//! sharding: the inner codecs are one `sharding_indexed`), down to
//! [`MAX_LEVELS`] levels.

use super::{dims, product, text, MAX_NDIM};
use crate::{Error, Result};
use serde_json::Value;

/// Largest shard index accepted, in bytes (a million inner chunks).
pub const MAX_INDEX_BYTES: u64 = 16 << 20;

/// Levels of shards within shards, at most.
pub const MAX_LEVELS: usize = 4;

/// How an array's shards are laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardMeta {
    /// Elements of one shard along each dimension (the grid's chunk shape).
    pub shape: Vec<u64>,
    /// Inner chunks of one shard along each dimension.
    pub per: Vec<u64>,
    /// Is the index at the start of the shard file (else at its end)?
    pub index_at_start: bool,
    /// Are the index's numbers big-endian?
    pub index_big: bool,
    /// Is a CRC-32C of the index appended to it?
    pub index_crc: bool,
    /// The layout of each inner chunk when it is itself a shard.
    pub inner: Option<Box<ShardMeta>>,
}

impl ShardMeta {
    /// Inner chunks in one shard (validated: its index fits
    /// [`MAX_INDEX_BYTES`]).
    pub fn inner_count(&self) -> u64 {
        product(&self.per, 1).unwrap_or(u64::MAX)
    }

    /// Bytes of the index: 16 per inner chunk, and 4 for the CRC.
    pub fn index_bytes(&self) -> u64 {
        self.inner_count()
            .saturating_mul(16)
            .saturating_add(if self.index_crc { 4 } else { 0 })
    }

    /// This level and the levels of shards inside it, outermost first.
    pub fn levels(&self) -> impl Iterator<Item = &ShardMeta> {
        std::iter::successors(Some(self), |m| m.inner.as_deref())
    }

    /// Chunks of the innermost level in one shard of this level, along
    /// each dimension.
    pub fn innermost_per(&self) -> Vec<u64> {
        let mut per = self.per.clone();
        for m in self.levels().skip(1) {
            for (p, q) in per.iter_mut().zip(&m.per) {
                *p = p.saturating_mul(*q);
            }
        }
        per
    }

    /// "end" or "start".
    pub fn location(&self) -> &'static str {
        if self.index_at_start {
            "start"
        } else {
            "end"
        }
    }
}

/// What the codec's configuration gives: the layout, the inner chunk
/// shape and the inner codec list.
pub(super) struct Sharding<'a> {
    pub meta: ShardMeta,
    pub inner: Vec<u64>,
    pub codecs: &'a [Value],
}

/// The `sharding_indexed` codec `conf` of an array whose grid's chunk
/// shape is `shard`, with the shards nested in it.
pub(super) fn parse<'a>(conf: &'a Value, shard: &[u64]) -> Result<Sharding<'a>> {
    parse_level(conf, shard, 1)
}

/// Level `level` (1: the outermost) of [`parse`].
fn parse_level<'a>(conf: &'a Value, shard: &[u64], level: usize) -> Result<Sharding<'a>> {
    let inner = dims(&conf["chunk_shape"], "sharding chunk_shape")?;
    if inner.len() != shard.len() || inner.len() > MAX_NDIM {
        return Err(Error::corrupt(format!(
            "an inner chunk shape of {} dimensions in shards of {}",
            inner.len(),
            shard.len()
        )));
    }
    let mut per = Vec::with_capacity(inner.len());
    for (&s, &i) in shard.iter().zip(&inner) {
        if i == 0 || s == 0 || s % i != 0 {
            return Err(Error::corrupt(format!(
                "shard shape {shard:?} is not a multiple of inner chunk shape {inner:?}"
            )));
        }
        per.push(s / i);
    }
    let codecs = conf["codecs"]
        .as_array()
        .ok_or_else(|| Error::corrupt("sharding_indexed without codecs"))?;
    let is_shard = |c: &Value| c.get("name").and_then(Value::as_str) == Some("sharding_indexed");
    let nested = match codecs.as_slice() {
        [c] if is_shard(c) && level >= MAX_LEVELS => {
            return Err(Error::unsupported(format!(
                "sharding_indexed nested more than {MAX_LEVELS} levels deep"
            )))
        }
        [c] if is_shard(c) => Some(parse_level(&c["configuration"], &inner, level + 1)?),
        _ if codecs.iter().any(is_shard) => {
            return Err(Error::unsupported("sharding_indexed among other codecs"))
        }
        _ => None,
    };
    let (index_big, index_crc) = index_codecs(&conf["index_codecs"])?;
    let index_at_start = match conf.get("index_location").and_then(Value::as_str) {
        None | Some("end") => false,
        Some("start") => true,
        Some(other) => return Err(Error::corrupt(format!("index_location {other:?}"))),
    };
    let n = product(&per, 16).unwrap_or(u64::MAX);
    if n > MAX_INDEX_BYTES {
        return Err(Error::unsupported(format!(
            "a shard index of more than {MAX_INDEX_BYTES} bytes"
        )));
    }
    // The grid and codecs of the innermost level.
    let (nested, inner, codecs) = match nested {
        Some(n) => (Some(Box::new(n.meta)), n.inner, n.codecs),
        None => (None, inner, codecs.as_slice()),
    };
    Ok(Sharding {
        meta: ShardMeta {
            shape: shard.to_vec(),
            per,
            index_at_start,
            index_big,
            index_crc,
            inner: nested,
        },
        inner,
        codecs,
    })
}

/// The index codecs: `bytes` (either endian), then optionally `crc32c`.
/// Returns (big-endian, crc).
fn index_codecs(v: &Value) -> Result<(bool, bool)> {
    let list = v
        .as_array()
        .ok_or_else(|| Error::corrupt("sharding_indexed without index_codecs"))?;
    let names: Vec<&str> = list
        .iter()
        .map(|c| text(c, "name"))
        .collect::<Result<_>>()?;
    let big = match list.first().map(|c| &c["configuration"]["endian"]) {
        Some(e) if names[0] == "bytes" => match e.as_str() {
            Some("little") => false,
            Some("big") => true,
            _ => return Err(Error::corrupt(format!("index bytes codec endian {e}"))),
        },
        _ => return Err(Error::unsupported(format!("index codecs {names:?}"))),
    };
    match &names[1..] {
        [] => Ok((big, false)),
        ["crc32c"] => Ok((big, true)),
        _ => Err(Error::unsupported(format!("index codecs {names:?}"))),
    }
}
