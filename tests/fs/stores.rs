//! python-blosc2's containers by suffix and its stores
//! (scripts/fixtures/gen_store_fixtures.py, fixtures in
//! tests/fixtures/stores): a BatchArray loses `.b2b` like every container;
//! a metalayer and a vlmetalayer of one name are two attributes, each
//! holding its own value; a `.b2z` store is a directory of its members,
//! each file the manifest lists presented with the bytes python-blosc2
//! reads there; a member not stored in place is listed and reads fail;
//! an EmbedStore (`.b2e`) is a directory of its keys, and a DictStore
//! (`.b2d`, `.b2z`) shows the keys of its `embed.b2e` beside its external
//! leaves, an external leaf winning over an embedded one of the same key.

use crate::common;
use bloscfs::fs::{Fs, FsOptions, Kind, ROOT_INO};
use sha2::{Digest, Sha256};
use std::ffi::OsStr;
use std::path::PathBuf;

/// Every writer's fixture directory.
fn writers() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(common::fixture("stores"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("manifest.json").is_file())
        .collect();
    out.sort();
    assert!(!out.is_empty());
    out
}

fn manifest(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap()
}

/// The presented tree of a writer's fixtures.
fn fs_of(dir: &std::path::Path) -> Fs {
    Fs::new(dir, &FsOptions::default()).unwrap()
}

/// The inode presented at `rel` (`/`-separated).
fn lookup(fs: &Fs, rel: &str) -> bloscfs::fs::Attr {
    let mut ino = ROOT_INO;
    let mut attr = None;
    for part in rel.split('/') {
        let a = fs
            .lookup(ino, OsStr::new(part))
            .unwrap_or_else(|e| panic!("{rel}: {part}: errno {e}"));
        ino = a.ino;
        attr = Some(a);
    }
    attr.unwrap()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn batch_array_loses_its_suffix() {
    let mut seen = 0;
    for dir in writers() {
        let m = manifest(&dir);
        let files = m["files"].as_array().unwrap();
        if !files.iter().any(|f| f["presented"] == "batch") {
            continue; // a release without BatchArray
        }
        seen += 1;
        let fs = fs_of(&dir);
        let names = common::names(&fs, ROOT_INO);
        assert!(names.contains(&"batch".to_string()), "{names:?}");
        assert!(!names.contains(&"batch.b2b".to_string()), "{names:?}");
    }
    assert!(seen > 0);
}

#[test]
fn metalayer_and_vlmetalayer_of_one_name_are_both_read() {
    for dir in writers() {
        let fs = fs_of(&dir);
        let want = manifest(&dir)["xattrs"].as_object().unwrap().clone();
        for (file, attrs) in want {
            let ino = lookup(&fs, &file).ino;
            let list = fs.listxattr(ino).unwrap();
            let names: Vec<&[u8]> = list.split(|&b| b == 0).filter(|n| !n.is_empty()).collect();
            let mut unique = names.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), names.len(), "{file}: duplicate names");
            for (name, value) in attrs.as_object().unwrap() {
                assert!(
                    names.contains(&name.as_bytes()),
                    "{file}: {name} not listed"
                );
                let got = fs.getxattr(ino, OsStr::new(name)).unwrap();
                assert_eq!(hex(&got), value.as_str().unwrap(), "{file}: {name}");
            }
        }
    }
}

#[test]
fn files_read_as_python_blosc2_reads_them() {
    for dir in writers() {
        let fs = fs_of(&dir);
        for f in manifest(&dir)["files"].as_array().unwrap() {
            let rel = f["presented"].as_str().unwrap();
            let a = lookup(&fs, rel);
            assert_eq!(a.kind, Kind::File, "{rel}");
            let (fh, _) = fs.open(a.ino, false).unwrap();
            let got = fs.read(fh, 0, a.size as u32 + 1).unwrap();
            fs.release(fh);
            assert_eq!(a.size, got.len() as u64, "{rel}");
            let got = common::as_numpy_saves(&got);
            assert_eq!(got.len() as u64, f["len"].as_u64().unwrap(), "{rel}");
            let sha = format!("{:x}", Sha256::digest(&got));
            assert_eq!(sha, f["sha256"].as_str().unwrap(), "{rel}");
        }
    }
}

#[test]
fn store_members_are_listed_and_deflated_ones_fail() {
    for dir in writers() {
        let fs = fs_of(&dir);
        let top = lookup(&fs, "dict.b2z");
        assert_eq!(top.kind, Kind::Dir);
        assert_eq!(
            common::names(&fs, top.ino),
            [".", "..", "a.npy", "grp", "s", "tiny.npy"]
        );
        let d = lookup(&fs, "deflated.b2z");
        assert_eq!(d.kind, Kind::Dir);
        let names = common::names(&fs, d.ino);
        assert_eq!(names, [".", "..", "a.b2nd", "embed.b2e", "grp", "s.b2f"]);
        let a = lookup(&fs, "deflated.b2z/a.b2nd");
        assert_eq!(
            fs.open(a.ino, false).err().map(|e| e.errno()),
            Some(libc::EIO)
        );
    }
}

/// `bloscfs cat` and `info` open a member through its store's path, as the
/// mount presents it; a deflated member fails with the reason.
#[test]
fn cat_and_info_read_members_in_place() {
    let bin = env!("CARGO_BIN_EXE_bloscfs");
    for dir in writers() {
        let m = manifest(&dir);
        let want = m["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["presented"] == "dict.b2z/a.npy")
            .unwrap()
            .clone();
        let member = dir.join("dict.b2z/a.b2nd");
        let o = std::process::Command::new(bin)
            .arg("cat")
            .arg(&member)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let sha = format!("{:x}", Sha256::digest(common::as_numpy_saves(&o.stdout)));
        assert_eq!(sha, want["sha256"].as_str().unwrap());
        let o = std::process::Command::new(bin)
            .arg("info")
            .arg(&member)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && text.contains("shape:         [40, 50]"),
            "{text}"
        );
        let o = std::process::Command::new(bin)
            .arg("cat")
            .arg(dir.join("deflated.b2z/a.b2nd"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("not stored"), "{err}");
    }
}

/// The sorted names of the directory presented at `rel`.
fn listed(fs: &Fs, rel: &str) -> Vec<String> {
    common::names(fs, lookup(fs, rel).ino)
}

#[test]
fn embed_store_is_a_directory_of_its_keys() {
    for dir in writers() {
        let fs = fs_of(&dir);
        assert_eq!(lookup(&fs, "embed.b2e").kind, Kind::Dir);
        assert_eq!(listed(&fs, "embed.b2e"), [".", "..", "big.npy", "grp", "s"]);
        assert_eq!(listed(&fs, "embed.b2e/grp"), [".", "..", "c.npy"]);
    }
}

/// A key whose range runs past the store's content is left out; the rest
/// are shown.
#[test]
fn embed_store_key_past_its_content_is_left_out() {
    for dir in writers() {
        let fs = fs_of(&dir);
        assert_eq!(listed(&fs, "lying.b2e"), [".", "..", "ok.npy"]);
    }
}

/// A `.b2d` shows its embedded keys beside the external leaves, and not
/// its `embed.b2e`; the external `x.b2nd` hides the embedded `/x`.
#[test]
fn dict_directory_shows_its_embedded_keys() {
    for dir in writers() {
        let fs = fs_of(&dir);
        assert_eq!(
            listed(&fs, "dict.b2d"),
            [".", "..", "a.npy", "grp", "tiny.npy", "x.npy"]
        );
        assert_eq!(listed(&fs, "dict.b2d/grp"), [".", "..", "b.npy", "t2.npy"]);
        let top = lookup(&fs, "dict.b2d");
        for hidden in ["embed.b2e", "x"] {
            assert_eq!(
                fs.lookup(top.ino, OsStr::new(hidden))
                    .err()
                    .map(|e| e.errno()),
                Some(libc::ENOENT),
                "{hidden}"
            );
        }
    }
}

/// An EmbedStore that cannot be read is a file: one that is not a frame
/// reads as its bytes, a frame cut short fails like any damaged container.
#[test]
fn unreadable_embed_store_passes_through_as_a_file() {
    let dir = writers().pop().unwrap();
    let whole = std::fs::read(dir.join("embed.b2e")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("cut.b2e"), &whole[..whole.len() / 2]).unwrap();
    std::fs::write(tmp.path().join("text.b2e"), b"not a store").unwrap();
    let fs = Fs::new(tmp.path(), &FsOptions::default()).unwrap();
    let a = lookup(&fs, "text.b2e");
    assert_eq!(a.kind, Kind::File);
    let (fh, _) = fs.open(a.ino, false).unwrap();
    assert_eq!(fs.read(fh, 0, 100).unwrap(), b"not a store");
    fs.release(fh);
    let a = lookup(&fs, "cut.b2e");
    assert_eq!(a.kind, Kind::File);
    assert_eq!(
        fs.open(a.ino, false).err().map(|e| e.errno()),
        Some(libc::EIO)
    );
}

/// `bloscfs cat` reads an embedded key by its path in the store.
#[test]
fn cat_reads_embedded_keys() {
    let bin = env!("CARGO_BIN_EXE_bloscfs");
    for dir in writers() {
        let m = manifest(&dir);
        for (source, presented) in [
            ("embed.b2e/big", "embed.b2e/big.npy"),
            ("dict.b2d/tiny", "dict.b2d/tiny.npy"),
            ("dict.b2z/tiny", "dict.b2z/tiny.npy"),
        ] {
            let want = m["files"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["presented"] == presented)
                .unwrap();
            let o = std::process::Command::new(bin)
                .arg("cat")
                .arg(dir.join(source))
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{source}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let sha = format!("{:x}", Sha256::digest(common::as_numpy_saves(&o.stdout)));
            assert_eq!(sha, want["sha256"].as_str().unwrap(), "{source}");
        }
    }
}
