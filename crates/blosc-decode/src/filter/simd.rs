//! Which vector instruction set the filter kernels use, detected once.
//!
//! On x86_64 SSE2 is always present; AVX2 is detected at run time. Other
//! architectures use the portable (scalar, auto-vectorised) kernels. The
//! environment variable `BLOSCFS_KERNELS=scalar|sse2` caps the level (for
//! benchmarks and debugging); it is read once, on first use.

use std::sync::atomic::{AtomicU8, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    Scalar = 1,
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Sse2 = 2,
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Avx2 = 3,
}

/// 0 = not detected yet, else a `Level` discriminant.
static LEVEL: AtomicU8 = AtomicU8::new(0);

/// The level the kernels dispatch on (detected on the first call only).
#[inline]
pub(crate) fn level() -> Level {
    match LEVEL.load(Ordering::Relaxed) {
        1 => Level::Scalar,
        2 => Level::Sse2,
        3 => Level::Avx2,
        _ => {
            let l = detect();
            LEVEL.store(l as u8, Ordering::Relaxed);
            l
        }
    }
}

fn detect() -> Level {
    let cap = match std::env::var("BLOSCFS_KERNELS").as_deref() {
        Ok("scalar") => Level::Scalar,
        Ok("sse2") => Level::Sse2,
        _ => Level::Avx2,
    };
    hardware().min(cap)
}

#[cfg(target_arch = "x86_64")]
fn hardware() -> Level {
    if is_x86_feature_detected!("avx2") {
        Level::Avx2
    } else {
        Level::Sse2
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn hardware() -> Level {
    Level::Scalar
}
