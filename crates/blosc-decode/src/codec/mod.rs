//! Stream codecs: each decompresses one stream into a caller-provided buffer
//! and must fill it exactly (Blosc stores the uncompressed size of every
//! stream implicitly, so a short or long result is corruption).
//!
//! ```
//! use blosc_decode::codec::{decompress, Params};
//! use blosc_decode::format::chunk::Codec;
//!
//! let data = b"blosc blosc blosc blosc blosc blosc".to_vec();
//! let stream = lz4_flex::block::compress(&data); // a raw LZ4 block
//! let mut out = vec![0; data.len()];
//! decompress(Codec::Lz4, &stream, &mut out, &Params::default())?;
//! assert_eq!(out, data);
//! // One byte too many asked for: the stream does not fill it.
//! let mut long = vec![0; data.len() + 1];
//! assert!(decompress(Codec::Lz4, &stream, &mut long, &Params::default()).is_err());
//! # Ok::<(), blosc_decode::Error>(())
//! ```

pub mod blosclz;
mod lz4;
pub mod zfp;

use crate::error::{Error, Result};
use crate::format::chunk::Codec;
use std::cell::RefCell;

thread_local! {
    static ZSTD: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
    static ZLIB: RefCell<Option<flate2::Decompress>> = const { RefCell::new(None) };
}

/// What a stream's codec may need besides the stream: the chunk's
/// dictionary (zstd, lz4), and for ZFP the chunk's codec meta byte and
/// typesize and the array's block shape (from its `b2nd` metalayer).
#[derive(Debug, Clone, Copy, Default)]
pub struct Params<'a> {
    /// The chunk's dictionary (zstd, lz4), if it has one.
    pub dict: Option<&'a [u8]>,
    /// The chunk's codec meta byte (ZFP: its tolerance, precision or rate).
    pub meta: u8,
    /// The chunk's typesize (ZFP: 4 for `f32`, 8 for `f64`).
    pub typesize: u8,
    /// The array's block shape (ZFP: the field's dimensions).
    pub block_shape: Option<&'a [u64]>,
}

/// Decompress `src` into all of `dst`.
pub fn decompress(codec: Codec, src: &[u8], dst: &mut [u8], p: &Params) -> Result<()> {
    let dict = p.dict;
    let n = match codec {
        Codec::BloscLz => blosclz::decompress(src, dst)?,
        Codec::Lz4 => lz4::decompress(src, dst, dict)?,
        Codec::Snappy => snap::raw::Decoder::new()
            .decompress(src, dst)
            .map_err(|e| Error::corrupt(format!("snappy stream: {e}")))?,
        Codec::Zlib => zlib_decompress(src, dst)?,
        Codec::Zstd => zstd_decompress(src, dst, dict)?,
        Codec::Zfp(mode) => zfp::decompress(mode, src, dst, p)?,
    };
    if n != dst.len() {
        return Err(Error::corrupt(format!(
            "{} stream decoded to {n} bytes, expected {}",
            codec.name(),
            dst.len()
        )));
    }
    Ok(())
}

fn zlib_decompress(src: &[u8], dst: &mut [u8]) -> Result<usize> {
    ZLIB.with(|cell| {
        let mut slot = cell.borrow_mut();
        let z = slot.get_or_insert_with(|| flate2::Decompress::new(true));
        z.reset(true);
        let status = z
            .decompress(src, dst, flate2::FlushDecompress::Finish)
            .map_err(|e| Error::corrupt(format!("zlib stream: {e}")))?;
        if status != flate2::Status::StreamEnd {
            return Err(Error::corrupt(
                "zlib stream does not end where its block does",
            ));
        }
        Ok(z.total_out() as usize)
    })
}

/// zstd contexts made by [`prepare`], each taken by the first thread that
/// decodes zstd without one.
static SPARE_ZSTD: std::sync::Mutex<Vec<zstd::bulk::Decompressor<'static>>> =
    std::sync::Mutex::new(Vec::new());

/// Make this thread's decoding state now (the zstd context it decodes with,
/// its scratch buffers with their pages mapped), rather than on its first
/// block.
pub fn prepare_thread() {
    crate::decode::prepare_thread();
    ZSTD.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = zstd::bulk::Decompressor::new().ok();
        }
    });
}

/// Do now what the first blocks decoded would: detect the CPU's vector
/// instructions, and make `threads` zstd contexts and scratch buffers for
/// threads that will decode without having called [`prepare_thread`] (each
/// takes its own on its first block). The first two ask the CPU what it
/// supports, which a virtual machine answers slowly, and the buffers' pages
/// are mapped: a fresh mount's first read need not pay for either.
pub fn prepare(threads: usize) {
    crate::filter::prepare();
    crate::decode::prepare_spares(threads);
    let made: Vec<_> = (0..threads)
        .filter_map(|_| zstd::bulk::Decompressor::new().ok())
        .collect();
    if let Ok(mut s) = SPARE_ZSTD.lock() {
        s.extend(made);
    }
}

/// A context for a thread that has none: one [`prepare`] made, or a new one.
fn new_zstd() -> std::io::Result<zstd::bulk::Decompressor<'static>> {
    match SPARE_ZSTD.lock().ok().and_then(|mut s| s.pop()) {
        Some(d) => Ok(d),
        None => zstd::bulk::Decompressor::new(),
    }
}

fn zstd_decompress(src: &[u8], dst: &mut [u8], dict: Option<&[u8]>) -> Result<usize> {
    let map = |e: std::io::Error| Error::corrupt(format!("zstd stream: {e}"));
    if let Some(d) = dict {
        let mut dec = zstd::bulk::Decompressor::with_dictionary(d).map_err(map)?;
        return dec.decompress_to_buffer(src, dst).map_err(map);
    }
    ZSTD.with(|cell| {
        let mut slot = cell.borrow_mut();
        let dec = match &mut *slot {
            Some(dec) => dec,
            empty => empty.insert(new_zstd().map_err(map)?),
        };
        dec.decompress_to_buffer(src, dst).map_err(map)
    })
}
