//! A python-blosc2 proxy cache through a real mount
//! (`scripts/fixtures/gen_proxy.py`): its fetched chunks read as the proxy
//! reads them, a read of an unfetched chunk of the same file fails with EIO
//! and one log line naming the file and the chunk, and the file (and the
//! rest of the mount) is served on.

use crate::common::*;
use crate::mount::Mount;
use sha2::{Digest, Sha256};
use std::io::{Read, Seek, SeekFrom};

fn read_at(f: &mut std::fs::File, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
    f.seek(SeekFrom::Start(offset))?;
    let mut buf = vec![0u8; len as usize];
    f.read_exact(&mut buf)?;
    Ok(buf)
}

#[test]
fn unfetched_chunk_is_eio_fetched_ones_read() {
    if !fuse_available() {
        return;
    }
    let dir = fixture("proxy/4.14.1");
    let text = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
    let f = manifest["fixtures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "4.14.1/nd-partial.b2nd")
        .unwrap()
        .clone();
    let m = Mount::prepare();
    copy(&dir.join("nd-partial.b2nd"), &m.src().join("cache.b2nd"));
    let (mut m, log) = m.mount_logged(&[]);
    let path = m.mp().join("cache.npy");
    let units = f["chunks"].as_array().unwrap();
    let (fetched, missing) = (&units[1], &units[3]);
    assert!(fetched["fetched"] == true && missing["fetched"] == false);
    // The manifest's offsets count in the file numpy.save writes; the data
    // of the `.npy` presented starts `shift` bytes further.
    let c = blosc_decode::open_path(&dir.join("nd-partial.b2nd"))
        .unwrap()
        .unwrap();
    let mut head = vec![0u8; c.view().header_len() as usize];
    c.read_at(0, &mut head).unwrap();
    let (ours, numpy) = numpy_header(&head, c.len()).unwrap();
    let shift = (ours - numpy.len()) as u64;
    let at = |u: &serde_json::Value, k: &str| match k {
        "offset" => u[k].as_u64().unwrap() + shift,
        _ => u[k].as_u64().unwrap(),
    };
    let mut file = std::fs::File::open(&path).unwrap();
    // Twice: the failure is logged once, and each read fails.
    for _ in 0..2 {
        let err = read_at(&mut file, at(missing, "offset"), 4096).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    }
    let got = read_at(&mut file, at(fetched, "offset"), at(fetched, "len")).unwrap();
    let sha = format!("{:x}", Sha256::digest(&got));
    assert_eq!(sha, fetched["sha256"].as_str().unwrap());
    drop(file);
    m.unmount_without_panic(&log);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("not fetched")).collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(
        lines[0].contains("cache.b2nd: chunk 3: chunk not fetched"),
        "{text}"
    );
}
