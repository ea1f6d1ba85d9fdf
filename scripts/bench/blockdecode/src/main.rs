//! blockdecode FILE OFFSET CBYTES [REPS]: every block of the chunk stored at
//! OFFSET (CBYTES long; `bloscfs info --chunks FILE` lists them) decoded
//! in-process, best of REPS per block: whole (streams and filters), the
//! streams of a small read's range-first decode (byte-shuffled chunks), the
//! rest of that block unshuffled into a mapped buffer, and into a fresh one
//! (its first touch: page faults).

use blosc_decode::cache::BlockBuf;
use blosc_decode::decode::{decode_block, RangeFirst};
use blosc_decode::format::chunk::ChunkLayout;
use std::os::unix::fs::FileExt;
use std::time::Instant;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 4 {
        eprintln!("usage: blockdecode FILE OFFSET CBYTES [REPS]");
        std::process::exit(2);
    }
    let f = std::fs::File::open(&a[1]).expect("open");
    let off: u64 = a[2].parse().expect("OFFSET");
    let cb: usize = a[3].parse().expect("CBYTES");
    let reps: usize = a.get(4).map_or(20, |s| s.parse().expect("REPS"));
    let mut chunk = vec![0u8; cb];
    f.read_exact_at(&mut chunk, off).expect("read the chunk");
    let l = ChunkLayout::parse(&chunk).expect("a chunk");
    let n = l.nblocks();
    let bl = l.block_len(0) as usize;
    let data = |i: u32| {
        let e = l.extents[i as usize];
        &chunk[e.start as usize..e.end as usize]
    };
    let mut out = vec![0u8; bl];
    let mut dst = vec![0u8; 4096.min(bl)];
    let (mut whole, mut part, mut rest, mut fresh) = (f64::MAX, f64::MAX, f64::MAX, f64::MAX);
    let per = |t: Instant| t.elapsed().as_secs_f64() * 1e6 / n as f64;
    for _ in 0..reps {
        let t = Instant::now();
        for i in 0..n {
            let len = l.block_len(i) as usize;
            decode_block(&l, i, data(i), None, &mut out[..len]).expect("decode");
        }
        whole = whole.min(per(t));
        let Some(_) = RangeFirst::of(&l, 0) else {
            continue;
        };
        let (mut tp, mut tr, mut tf) = (0.0, 0.0, 0.0);
        for i in 0..n {
            let len = l.block_len(i) as usize;
            let Some(r) = RangeFirst::of(&l, i) else {
                continue;
            };
            let d = dst.len().min(len);
            let t = Instant::now();
            let s = r.decode(&l, i, data(i), 0, &mut dst[..d]).expect("decode");
            tp += t.elapsed().as_secs_f64();
            let t = Instant::now();
            s.unshuffle(&mut out[..len]);
            tr += t.elapsed().as_secs_f64();
            let s = r.decode(&l, i, data(i), 0, &mut dst[..d]).expect("decode");
            let t = Instant::now();
            let mut b = BlockBuf::new(len);
            s.unshuffle(&mut b);
            tf += t.elapsed().as_secs_f64();
        }
        part = part.min(tp * 1e6 / n as f64);
        rest = rest.min(tr * 1e6 / n as f64);
        fresh = fresh.min(tf * 1e6 / n as f64);
    }
    println!("{n} blocks of {bl} bytes, per block: whole {whole:.1} us");
    if part < f64::MAX {
        println!(
            "  range first: streams {part:.1} us; the rest unshuffled {rest:.1} us, \
             into a fresh buffer {fresh:.1} us"
        );
    }
}
