//! N-dimensional layout mapping, dtype descriptions (read and written back)
//! and .npy headers on arbitrary geometry.
#![no_main]
use blosc_decode::dtype::Dtype;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (Vec<(u16, u8, u8)>, u8, u32, u16, String)| {
    let (dims, itemsize, start, len, descr) = input;
    let dims = &dims[..dims.len().min(8)];
    let shape: Vec<u64> = dims.iter().map(|d| d.0 as u64).collect();
    let cs: Vec<u64> = dims.iter().map(|d| d.1 as u64).collect();
    let bs: Vec<u64> = dims.iter().map(|d| d.2 as u64).collect();
    if let Ok(l) = blosc_decode::npy::NdLayout::new(&shape, &cs, &bs, itemsize as u64) {
        let n = l.nelems();
        if n > 0 {
            let s = start as u64 % n;
            let len = (len as u64).min(n - s);
            let mut total = 0;
            l.for_each_run(s, len, |raw, k| {
                assert!(raw + k * l.itemsize <= l.raw_len());
                total += k;
                Ok(())
            })
            .unwrap();
            assert_eq!(total, len);
        }
    }
    if let Ok(d) = Dtype::parse(&descr) {
        assert!(d.itemsize() <= blosc_decode::dtype::MAX_ITEMSIZE);
        if let Ok(text) = d.descr() {
            // What is written back reads back as items of the same size.
            if let Ok(again) = Dtype::parse(&text) {
                assert_eq!(again.itemsize(), d.itemsize(), "{descr:?} -> {text}");
            }
            let data = shape
                .iter()
                .fold(d.itemsize(), |a, &n| a.saturating_mul(n));
            let h = blosc_decode::npy::npy_header(&text, false, &shape, data);
            assert_eq!(h.len() % 64, 0);
            // On a page when the data is longer than one, unless np.load
            // would then refuse the header.
            let page = h.len() % 4096 == 0 || h.len() - 10 > 10_000 - 4096;
            assert!(data <= 4096 || page, "{} bytes", h.len());
        }
    }
});
