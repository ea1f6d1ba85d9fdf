//! Bloscpack files: 32-byte header, optional metadata section, optional
//! offsets table, then C-Blosc1 chunks each followed by its checksum.

use crate::bytes::Reader;
use crate::ensure;
use crate::error::{Error, Result};
use sha1::Digest;

/// The first bytes of a Bloscpack file.
pub const MAGIC: &[u8; 4] = b"blpk";
/// Bytes of the file header.
pub const HEADER_LEN: usize = 32;
/// Bytes of the metadata section's header.
pub const META_HEADER_LEN: usize = 32;
/// Metadata sections larger than this are refused.
pub const MAX_META: u64 = 64 << 20;

/// Checksum names by their id in the header.
pub const CHECKSUM_NAMES: [&str; 9] = [
    "none", "adler32", "crc32", "md5", "sha1", "sha224", "sha256", "sha384", "sha512",
];

/// A Bloscpack file header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Format version.
    pub version: u8,
    /// An offsets table follows the metadata.
    pub offsets: bool,
    /// A metadata section follows the header.
    pub metadata: bool,
    /// Checksum id of every chunk (`CHECKSUM_NAMES`).
    pub checksum: u8,
    /// Bytes of one item.
    pub typesize: u8,
    /// -1: unknown.
    pub chunk_size: i32,
    /// Uncompressed bytes of the last chunk (-1: unknown).
    pub last_chunk: i32,
    /// Number of chunks (-1: unknown).
    pub nchunks: i64,
    /// Chunks that may still be appended (room in the offsets table).
    pub max_app_chunks: i64,
}

/// Does `head` start with the Bloscpack magic?
pub fn is_bloscpack(head: &[u8]) -> bool {
    head.len() >= 4 && &head[..4] == MAGIC
}

/// Parse the 32-byte file header.
pub fn parse_header(b: &[u8]) -> Result<Header> {
    ensure!(
        b.len() >= HEADER_LEN,
        truncated,
        "Bloscpack header needs 32 bytes, got {}",
        b.len()
    );
    ensure!(
        is_bloscpack(b),
        corrupt,
        "not a Bloscpack file (no blpk magic)"
    );
    let mut r = Reader::at(b, 8, "Bloscpack header");
    let h = Header {
        version: b[4],
        offsets: b[5] & 1 != 0,
        metadata: b[5] & 2 != 0,
        checksum: b[6],
        typesize: b[7],
        chunk_size: r.le()?,
        last_chunk: r.le()?,
        nchunks: r.le()?,
        max_app_chunks: r.le()?,
    };
    ensure!(
        h.version == 3,
        unsupported,
        "unsupported Bloscpack format version {}",
        h.version
    );
    ensure!(
        h.checksum <= 8,
        unsupported,
        "unknown Bloscpack checksum id {}",
        h.checksum
    );
    ensure!(
        h.nchunks >= -1,
        corrupt,
        "Bloscpack nchunks {} is negative",
        h.nchunks
    );
    ensure!(
        h.max_app_chunks >= 0,
        corrupt,
        "Bloscpack max_app_chunks {} is negative",
        h.max_app_chunks
    );
    Ok(h)
}

/// The header of a Bloscpack metadata section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaHeader {
    /// Its magic (`JSON`).
    pub magic: String,
    /// Checksum id of the metadata.
    pub checksum: u8,
    /// 0 none, 1 zlib.
    pub codec: u8,
    /// Bytes of the metadata once decompressed.
    pub size: u32,
    /// Bytes reserved for it (it may grow in place).
    pub max_size: u32,
    /// Bytes of the stored metadata.
    pub comp_size: u32,
}

impl MetaHeader {
    /// Bytes of the whole metadata section (header, data, preallocation, checksum).
    pub fn section_len(&self) -> Result<u64> {
        Ok(META_HEADER_LEN as u64
            + self.max_size.max(self.comp_size) as u64
            + digest_len(self.checksum)? as u64)
    }
}

/// Parse a metadata section's 32-byte header.
pub fn parse_meta_header(b: &[u8]) -> Result<MetaHeader> {
    ensure!(
        b.len() >= META_HEADER_LEN,
        truncated,
        "Bloscpack metadata header is truncated"
    );
    let mut r = Reader::at(b, 12, "Bloscpack metadata header");
    let m = MetaHeader {
        magic: String::from_utf8_lossy(&b[..8])
            .trim_end_matches('\0')
            .to_string(),
        checksum: b[9],
        codec: b[10],
        size: r.le()?,
        max_size: r.le()?,
        comp_size: r.le()?,
    };
    ensure!(
        m.checksum <= 8,
        unsupported,
        "unknown metadata checksum id {}",
        m.checksum
    );
    ensure!(
        m.codec <= 1,
        unsupported,
        "unknown metadata codec id {}",
        m.codec
    );
    ensure!(
        (m.size as u64) <= MAX_META
            && (m.max_size as u64) <= MAX_META
            && m.comp_size <= m.max_size.max(m.comp_size),
        corrupt,
        "metadata sizes are not plausible"
    );
    Ok(m)
}

/// Decode the metadata payload (`data` = the `comp_size` stored bytes).
pub fn decode_meta(m: &MetaHeader, data: &[u8]) -> Result<Vec<u8>> {
    match m.codec {
        0 => Ok(data.to_vec()),
        _ => {
            let mut out = vec![0u8; m.size as usize];
            let mut z = flate2::Decompress::new(true);
            z.decompress(data, &mut out, flate2::FlushDecompress::Finish)
                .map_err(|e| Error::corrupt(format!("Bloscpack metadata: zlib: {e}")))?;
            ensure!(
                z.total_out() == m.size as u64,
                corrupt,
                "Bloscpack metadata decompressed to the wrong size"
            );
            Ok(out)
        }
    }
}

/// Digest length of a Bloscpack checksum id.
pub fn digest_len(algo: u8) -> Result<usize> {
    Ok(match algo {
        0 => 0,
        1 | 2 => 4,
        3 => 16,
        4 => 20,
        5 => 28,
        6 => 32,
        7 => 48,
        8 => 64,
        n => return Err(Error::unsupported(format!("unknown checksum id {n}"))),
    })
}

/// Compute a checksum of `data` as Bloscpack stores it.
pub fn digest(algo: u8, data: &[u8]) -> Result<Vec<u8>> {
    Ok(match algo {
        0 => Vec::new(),
        1 => {
            let mut a = adler2::Adler32::new();
            a.write_slice(data);
            a.checksum().to_le_bytes().to_vec()
        }
        2 => crc32fast::hash(data).to_le_bytes().to_vec(),
        3 => md5::Md5::digest(data).to_vec(),
        4 => sha1::Sha1::digest(data).to_vec(),
        5 => sha2::Sha224::digest(data).to_vec(),
        6 => sha2::Sha256::digest(data).to_vec(),
        7 => sha2::Sha384::digest(data).to_vec(),
        8 => sha2::Sha512::digest(data).to_vec(),
        n => return Err(Error::unsupported(format!("unknown checksum id {n}"))),
    })
}

/// Check `data` against the stored digest.
pub fn verify_checksum(algo: u8, data: &[u8], stored: &[u8]) -> Result<()> {
    let d = digest(algo, data)?;
    if d != stored {
        return Err(Error::checksum(format!(
            "{} checksum mismatch (stored {}, computed {})",
            CHECKSUM_NAMES.get(algo as usize).unwrap_or(&"?"),
            hex(stored),
            hex(&d)
        )));
    }
    Ok(())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// What the JSON metadata of a NumPy array says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumpyMeta {
    /// The dtype's `descr`.
    pub descr: String,
    /// The array's shape.
    pub shape: Vec<u64>,
    /// Stored in Fortran order?
    pub fortran_order: bool,
}

/// Parse bloscpack's ndarray metadata (`{"dtype": "'<f8'", "shape": [..],
/// "order": "C", "container": "numpy"}`); `None` if it is not that.
pub fn numpy_meta(json: &[u8]) -> Option<NumpyMeta> {
    let v: serde_json::Value = serde_json::from_slice(json).ok()?;
    if v.get("container")?.as_str()? != "numpy" {
        return None;
    }
    let dtype = v.get("dtype")?.as_str()?.trim();
    let descr = dtype.trim_matches('\'').trim_matches('"').to_string();
    let descr = if dtype.starts_with('[') {
        dtype.to_string()
    } else {
        descr
    };
    let shape = v
        .get("shape")?
        .as_array()?
        .iter()
        .map(|x| x.as_u64())
        .collect::<Option<Vec<u64>>>()?;
    let fortran_order = v.get("order").and_then(|o| o.as_str()) == Some("F");
    Some(NumpyMeta {
        descr,
        shape,
        fortran_order,
    })
}
