//! The schema JSON of a python-blosc2 CTable (`_meta.b2f`'s vlmeta), and
//! the checks of its columns' dtypes against their kinds.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = blosc_decode::format::ctable::parse(data) {
        for c in &s.columns {
            let _ = c.fits("<i8", 8) || c.fits("|S3", 3) || c.fits("", 0);
            let _ = c.key();
        }
    }
});
