use bloscfs::{cli, mount};

fn main() {
    use_huge_pages();
    keep_freed_blocks_mapped();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("cat") => cli::cmd_cat(&args[1..]),
        Some("info") => cli::cmd_info(&args[1..]),
        None => {
            eprint!("{}", mount::USAGE);
            std::process::exit(2);
        }
        _ => std::process::exit(mount::main(&args)),
    };
    if let Err(msg) = result {
        eprintln!("bloscfs: {msg}");
        std::process::exit(1);
    }
}

/// Decoded blocks (256 KiB to a few MiB) are allocated and freed all the
/// time. By default glibc serves such sizes with mmap and returns them with
/// munmap (or trims them off the heap), so every block decoded lands on fresh
/// pages and pays a page fault per 4 KiB: measured here, a third of a random
/// 4 KiB read (68,000 faults for 300 reads; 800 without). Keep them in the
/// heap for reuse instead; the block cache bounds how much that is.
fn keep_freed_blocks_mapped() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
        // Grow the heap 64 MiB at a time: room for whole huge pages.
        libc::mallopt(libc::M_TOP_PAD, 64 << 20);
    }
}

/// The block cache fills with fresh memory as it grows, and each 4 KiB page
/// of it costs a page fault (several microseconds on a VM). Transparent huge
/// pages cost one fault per 2 MiB: a cold random 4 KiB read went from about
/// 290 to 190 us with everything on one CPU. glibc asks for huge pages for
/// its heap only when told so by a tunable it reads at start, so set it and
/// start again (once; not when the system has huge pages off, and not when
/// `GLIBC_TUNABLES` already says, so `glibc.malloc.hugetlb=0` turns it off).
fn use_huge_pages() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::unix::process::CommandExt;
        const KEY: &str = "glibc.malloc.hugetlb";
        let old = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
        if old.contains(KEY) {
            return;
        }
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
        if !thp.is_ok_and(|s| s.contains("[always]") || s.contains("[madvise]")) {
            return;
        }
        let new = if old.is_empty() {
            format!("{KEY}=1")
        } else {
            format!("{old}:{KEY}=1")
        };
        let mut args = std::env::args_os();
        let argv0 = args.next().unwrap_or_default();
        // Only returns on failure: then carry on as we are.
        let _ = std::process::Command::new("/proc/self/exe")
            .arg0(argv0)
            .args(args)
            .env("GLIBC_TUNABLES", new)
            .exec();
    }
}
