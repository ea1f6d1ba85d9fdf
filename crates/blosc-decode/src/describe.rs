//! Human-readable names for codecs, filters and chunk properties.

use crate::format::chunk::{filter_id, ChunkHeader};

pub fn filter_name(id: u8) -> String {
    match id {
        filter_id::NOFILTER => "nofilter".into(),
        filter_id::SHUFFLE => "shuffle".into(),
        filter_id::BITSHUFFLE => "bitshuffle".into(),
        filter_id::DELTA => "delta".into(),
        filter_id::TRUNC_PREC => "trunc_prec".into(),
        filter_id::NDCELL => "ndcell".into(),
        filter_id::NDMEAN => "ndmean".into(),
        filter_id::BYTEDELTA_BUGGY => "bytedelta_buggy".into(),
        filter_id::BYTEDELTA => "bytedelta".into(),
        filter_id::INT_TRUNC => "int_trunc".into(),
        n => format!("filter{n}"),
    }
}

/// The filters of a chunk header in pipeline (encode) order, no-ops left out.
pub fn filter_names(h: &ChunkHeader) -> Vec<String> {
    h.filters
        .iter()
        .filter(|&&f| f != filter_id::NOFILTER)
        .map(|&f| filter_name(f))
        .collect()
}
