//! Decode kernels on one 256 KiB block: the filters (unshuffle,
//! bitunshuffle, delta, bytedelta), every codec through
//! `blosc_decode::codec::decompress`, and whole lz4 blocks (codec + filter)
//! through `blosc_decode::decode::decode_block`. Run with `cargo bench --bench kernels`;
//! throughput is reported in bytes of decoded output per second.

use blosc_decode::codec;
use blosc_decode::decode;
use blosc_decode::filter::{bitshuffle, bytedelta, delta, shuffle};
use blosc_decode::format::chunk::{
    filter_id, ChunkLayout, Codec, FLAG_BITSHUFFLE, FLAG_DONT_SPLIT, FLAG_SHUFFLE,
};
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use std::hint::black_box;
use std::io::Write;
use std::time::Duration;

const BLOCK: usize = 256 * 1024;

/// A float64 random walk (deterministic LCG), as little-endian bytes: the
/// typical content of a Blosc container.
fn random_walk(len: usize) -> Vec<u8> {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut x = 0.0f64;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x += ((seed >> 11) as f64 / (1u64 << 53) as f64) - 0.5;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Byte shuffle (encode direction), to build realistic codec inputs.
fn shuffle_bytes(ts: usize, src: &[u8]) -> Vec<u8> {
    let n = src.len() / ts;
    let mut out = src.to_vec();
    for i in 0..n {
        for j in 0..ts {
            out[j * n + i] = src[i * ts + j];
        }
    }
    out
}

/// Bitshuffle (encode direction, bit by bit), whole 8-element groups only.
fn bitshuffle_bits(ts: usize, src: &[u8]) -> Vec<u8> {
    let n = src.len() / ts / 8 * 8;
    let row = n / 8;
    let mut out = src.to_vec();
    out[..n * ts].fill(0);
    for i in 0..n {
        for j in 0..ts {
            for k in 0..8 {
                let bit = (src[i * ts + j] >> k) & 1;
                out[(8 * j + k) * row + i / 8] |= bit << (i % 8);
            }
        }
    }
    out
}

/// A one-block Blosc2 chunk (extended header, lz4, typesize 8, one
/// stream) holding `data` through the filter `filter`.
fn lz4_chunk(filter: u8, data: &[u8]) -> Vec<u8> {
    let filtered = match filter {
        filter_id::SHUFFLE => shuffle_bytes(8, data),
        _ => bitshuffle_bits(8, data),
    };
    let stream = lz4_flex::block::compress(&filtered);
    let cbytes = 32 + 4 + 4 + stream.len();
    let mut c = vec![0u8; 32];
    c[0] = 5; // format version
    c[1] = 1;
    c[2] = FLAG_SHUFFLE | FLAG_BITSHUFFLE | FLAG_DONT_SPLIT | (1 << 5); // extended, lz4
    c[3] = 8;
    c[4..8].copy_from_slice(&(data.len() as u32).to_le_bytes());
    c[8..12].copy_from_slice(&(data.len() as u32).to_le_bytes());
    c[12..16].copy_from_slice(&(cbytes as u32).to_le_bytes());
    c[21] = filter;
    c.extend_from_slice(&36u32.to_le_bytes()); // bstarts[0]
    c.extend_from_slice(&(stream.len() as i32).to_le_bytes());
    c.extend_from_slice(&stream);
    c
}

fn pipeline(c: &mut Criterion) {
    let data = random_walk(BLOCK);
    let mut out = vec![0u8; BLOCK];
    let mut g = config(c);
    for (name, filter) in [
        ("shuffle", filter_id::SHUFFLE),
        ("bitshuffle", filter_id::BITSHUFFLE),
    ] {
        let chunk = lz4_chunk(filter, &data);
        let layout = ChunkLayout::parse(&chunk).expect("bench chunk parses");
        let e = layout.extents[0];
        let block = &chunk[e.start as usize..e.end as usize];
        decode::decode_block(&layout, 0, block, None, &mut out).expect("bench chunk decodes");
        assert_eq!(out, data, "bench chunk round trip");
        g.bench_function(format!("block/lz4-{name}/ts8"), |b| {
            b.iter(|| {
                decode::decode_block(&layout, 0, black_box(block), None, black_box(&mut out))
                    .unwrap()
            })
        });
    }
    g.finish();
}

fn config(c: &mut Criterion) -> BenchmarkGroup<'_, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group("kernels");
    g.sample_size(20)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .throughput(Throughput::Bytes(BLOCK as u64));
    g
}

fn filters(c: &mut Criterion) {
    let src = random_walk(BLOCK);
    let mut dst = vec![0u8; BLOCK];
    let mut g = config(c);
    for ts in [2usize, 4, 8, 16] {
        g.bench_function(format!("unshuffle/ts{ts}"), |b| {
            b.iter(|| shuffle::unshuffle(ts, black_box(&src), black_box(&mut dst)))
        });
    }
    for ts in [4usize, 8] {
        g.bench_function(format!("bitunshuffle/ts{ts}"), |b| {
            b.iter(|| {
                bitshuffle::bitunshuffle(ts, black_box(&src), black_box(&mut dst), 5).unwrap()
            })
        });
    }
    let dref = random_walk(BLOCK + 8)[8..].to_vec();
    g.bench_function("delta/decode_against/ts8", |b| {
        b.iter(|| delta::decode_against(8, black_box(&dref), black_box(&mut dst)))
    });
    g.bench_function("delta/decode_ref/ts8", |b| {
        b.iter(|| delta::decode_ref(8, black_box(&mut dst)))
    });
    g.bench_function("bytedelta/ts8", |b| {
        b.iter(|| bytedelta::decode(8, black_box(&src), black_box(&mut dst)).unwrap())
    });
    g.finish();
}

/// One blosclz stream from a committed fixture chunk: (stream, decoded length).
fn blosclz_stream() -> Option<(Vec<u8>, usize)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/chunk1/blosclz-sh1-ts16-series.blosc"
    );
    let chunk = std::fs::read(path).ok()?;
    let layout = ChunkLayout::parse(&chunk).ok()?;
    let h = &layout.header;
    let mut best: Option<(Vec<u8>, usize)> = None;
    for i in 0..layout.nblocks() {
        let e = layout.extents[i as usize];
        let data = chunk.get(e.start as usize..e.end as usize)?;
        let nstreams = h.nstreams(i) as usize;
        let neblock = layout.block_len(i) as usize / nstreams;
        // Each stream: i32 compressed size, then the bytes (see decode.rs).
        let mut pos = 0;
        for _ in 0..nstreams {
            let csize = i32::from_le_bytes(data.get(pos..pos + 4)?.try_into().ok()?);
            pos += 4;
            if csize <= 0 {
                break;
            }
            let s = data.get(pos..pos + csize as usize)?;
            pos += csize as usize;
            if s.len() < neblock && best.as_ref().is_none_or(|b| b.1 < neblock) {
                best = Some((s.to_vec(), neblock));
            }
        }
    }
    best
}

fn codecs(c: &mut Criterion) {
    let input = shuffle_bytes(8, &random_walk(BLOCK));
    let mut streams: Vec<(Codec, Vec<u8>, usize)> = vec![
        (Codec::Lz4, lz4_flex::block::compress(&input), BLOCK),
        (
            Codec::Zstd,
            zstd::bulk::compress(&input, 1).expect("zstd compress"),
            BLOCK,
        ),
        (
            Codec::Zlib,
            {
                let mut e =
                    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(5));
                e.write_all(&input).unwrap();
                e.finish().unwrap()
            },
            BLOCK,
        ),
        (
            Codec::Snappy,
            snap::raw::Encoder::new()
                .compress_vec(&input)
                .expect("snappy compress"),
            BLOCK,
        ),
    ];
    // No Rust blosclz encoder: a stream from a committed fixture (small, so
    // its figure is indicative only).
    if let Some((s, n)) = blosclz_stream() {
        streams.push((Codec::BloscLz, s, n));
    }
    let mut g = config(c);
    for (codec, src, n) in &streams {
        let mut dst = vec![0u8; *n];
        codec::decompress(*codec, src, &mut dst, &Default::default()).expect("round trip");
        g.throughput(Throughput::Bytes(*n as u64));
        g.bench_function(format!("codec/{}", codec.name()), |b| {
            b.iter(|| {
                codec::decompress(
                    *codec,
                    black_box(src),
                    black_box(&mut dst),
                    &Default::default(),
                )
                .unwrap()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, filters, codecs, pipeline);
criterion_main!(benches);
