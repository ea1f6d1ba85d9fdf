//! The command line: --help and the man page agree; errors name the file,
//! chunk and reason and exit nonzero.

use crate::common;
use common::*;
use std::collections::BTreeSet;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_bloscfs");

fn options(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let l = line
            .trim()
            .replace("\\-", "-")
            .replace("\\fB", "")
            .replace("\\fR", "")
            .replace("\\fI", "");
        if let Some(i) = l.find("-o ") {
            // The option column: up to the description (two spaces) or the end.
            let col = l[i + 3..].split("  ").next().unwrap_or("");
            for o in col.split(", ") {
                let name: String = o
                    .trim_start_matches('"')
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                    .collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        }
        for flag in ["-f", "-d", "-s", "-h", "--help", "-V", "--version"] {
            if l.starts_with(flag)
                || l.starts_with(&format!(".B {flag}"))
                || l.starts_with(&format!(".BR {flag}"))
            {
                out.insert(flag.to_string());
            }
        }
    }
    out
}

#[test]
fn help_and_man_page_document_the_same_options() {
    let help = Command::new(BIN).arg("--help").output().unwrap();
    assert!(help.status.success());
    let help = String::from_utf8(help.stdout).unwrap();
    let man =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/man/bloscfs.1")).unwrap();
    let (h, m) = (options(&help), options(&man));
    assert!(h.len() > 15, "parsed too few options from --help: {h:?}");
    assert_eq!(h, m, "--help and man/bloscfs.1 disagree");
}

#[test]
fn cat_and_info_work_and_fail_clearly() {
    let f = fixture("frame/blocks-lz4.b2frame");
    let o = Command::new(BIN)
        .args(["cat", "--offset", "1000", "--length", "5000"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(
        o.stdout,
        reference_bytes("frame/blocks-lz4.b2frame")[1000..6000]
    );
    let o = Command::new(BIN)
        .args(["info", "--chunks"])
        .arg(fixture("b2nd/array1-2d.b2nd"))
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.contains("shape:         [97, 131]") && s.contains("dtype <i4"),
        "{s}"
    );
    // A damaged chunk: nonzero exit, message naming file, chunk and reason.
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("bad.b2");
    let o = Command::new(BIN)
        .arg("cat")
        .arg(fixture("bad/unknown-filter.b2"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("unknown-filter.b2")
            && e.contains("chunk 0")
            && e.contains("unsupported filter 200"),
        "{e}"
    );
    std::fs::write(&p, b"hello").unwrap();
    let o = Command::new(BIN).arg("cat").arg(&p).output().unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a Blosc container"));
}

#[test]
fn mount_options_parse_like_fstab_gives_them() {
    use bloscfs::options::parse;
    let a: Vec<String> = [
        "/src",
        "/mnt",
        "-o",
        "ro,dev,suid,noauto,_netdev,cache_size=1G,threads=3,noverify,decode_ahead=8M",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let m = parse(&a).unwrap().unwrap();
    assert_eq!(m.fs.cache_size, 1 << 30);
    assert_eq!(m.threads, 3);
    assert_eq!(m.fs.decode_ahead, blosc_decode::DecodeAhead::Fixed(8 << 20));
    assert!(!m.fs.verify_checksums && !m.foreground && !m.allow_other && !m.default_permissions);
    let a: Vec<String> = ["-o", "decode_ahead=auto", "/src", "/mnt"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let m = parse(&a).unwrap().unwrap();
    assert_eq!(m.fs.decode_ahead, blosc_decode::DecodeAhead::Auto);
    let a: Vec<String> = ["-f", "-o", "allow_other", "/src", "/mnt"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let m = parse(&a).unwrap().unwrap();
    assert!(
        m.allow_other && m.default_permissions,
        "allow_other brings default_permissions"
    );
    for bad in [
        "cache_size=lots",
        "threads=0",
        "decode_ahead=far",
        "frobnicate",
    ] {
        let a: Vec<String> = ["-o", bad, "/src", "/mnt"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(parse(&a).is_err(), "{bad} accepted");
    }
}

/// Regression: `info --chunks` showed, per chunk of a frame, the bytes from
/// the chunk to the end of the file instead of the chunk's own size.
#[test]
fn info_chunks_shows_each_chunks_own_compressed_size() {
    let f = common::fixture("frame/blocks-lz4.b2frame");
    let o = Command::new(BIN)
        .args(["info", "--chunks"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("chunk "))
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(rows.len() >= 2, "{text}");
    let sum: u64 = rows.iter().map(|r| r[4].parse::<u64>().unwrap()).sum();
    let len = std::fs::metadata(&f).unwrap().len();
    assert!(
        sum <= len,
        "chunk sizes add up to {sum}, the file has {len}:\n{text}"
    );
}

/// `bloscfs info FILE | head -1` and `bloscfs cat FILE | head -c 10`: when
/// the reader of standard output goes, the command ends quietly (as other
/// tools do, by `SIGPIPE`), with no panic or error message.
#[test]
fn cat_and_info_end_quietly_when_their_reader_goes() {
    // 250 KB of `info --chunks` lines: more than a pipe holds.
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/frame/many-chunks.b2frame");
    for cmd in ["info --chunks", "cat"] {
        let o = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "{BIN} {cmd} {} | head -c 10 >/dev/null",
                file.display()
            ))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.is_empty(), "{cmd}: {err}");
    }
}
