//! What the daemon adds to reading a local source: the rules by which a
//! sparse frame's files are opened for other users and who may read them
//! (`srcdir.rs`, [`Caller`]), paths longer than `PATH_MAX` (`longpath.rs`),
//! the process-wide budget of chunk files kept open (`lazy.rs`), and block
//! reads that bypass the page cache (`-o source_io`, [`DirectFile`]). The
//! decoder reaches them through its `FrameFiles` trait ([`FrameDir`]) and
//! the sources opened here.

pub mod direct;
pub mod lazy;
pub mod longpath;
pub mod srcdir;

pub use direct::DirectFile;
pub use lazy::{fd_limit, fd_limits, lazy_in_dir, max_kept_open, LazyFileSource};
pub use srcdir::{Caller, SourceDir};

use blosc_decode::detect::{self, Probe};
use blosc_decode::error::Error;
use blosc_decode::io::{self, FileSource, Source};
use blosc_decode::open::frame::MAX_CHUNKS;
use blosc_decode::open::{self, FrameFiles};
use blosc_decode::Result;
use blosc_decode::{Container, Env};
use std::fs::{File, Metadata};
use std::path::Path;
use std::sync::Arc;

/// Open `path` (of any length) for reading only if it is a regular file, as
/// [`io::open_regular`] does.
pub fn open_regular(path: &Path) -> std::io::Result<(File, Metadata)> {
    io::checked_regular(longpath::open(&io::regular_options(), path)?)
}

/// The regular file at `path` (of any length), as a source.
pub fn open_file(path: &Path) -> Result<DirectFile> {
    let (file, md) = open_regular(path).map_err(|e| Error::from(e).in_file(path))?;
    Ok(DirectFile::new(FileSource::opened(file, &md, path)))
}

/// `name` in `dir`, opened by [`SourceDir::open_file`]'s rules.
pub fn open_in(dir: &SourceDir, name: &str) -> Result<DirectFile> {
    let (file, md) = dir.open_file(name)?;
    let path = dir.path().join(name);
    Ok(DirectFile::new(FileSource::opened(file, &md, &path)))
}

/// Is `dir` (of any length) a sparse frame (a directory holding
/// `chunks.b2frame`)?
pub fn is_sframe_dir(dir: &Path) -> bool {
    longpath::is_file(&dir.join("chunks.b2frame"))
}

/// Is `path` a container, and what does it present (`probe_path` of the
/// decoder, for paths of any length and frames' files opened by
/// [`SourceDir`]'s rules)?
pub fn probe_path(path: &Path) -> Result<Option<Probe>> {
    if longpath::is_dir(path) {
        if !is_sframe_dir(path) {
            return Ok(None);
        }
        let dir = SourceDir::open(path, true).map_err(|e| Error::from(e).in_file(path))?;
        let index = Arc::new(open_in(&dir, "chunks.b2frame")?);
        return hinted(
            detect::probe_sframe_index(index.clone(), path),
            index.as_ref(),
        );
    }
    let src = Arc::new(open_file(path)?);
    hinted(detect::probe_source(src.clone(), path), src.as_ref())
}

/// `probe`, having had the frame's offsets index read ahead for the open
/// that usually follows ([`detect::hint_offsets`]).
fn hinted(probe: Result<Option<Probe>>, src: &dyn Source) -> Result<Option<Probe>> {
    if let Ok(Some(p)) = &probe {
        detect::hint_offsets(src, p);
    }
    probe
}

/// Open `path` (of any length) as a container sharing `env` (`open_path`
/// of the decoder, with a sparse frame's files opened as [`FrameDir`]
/// opens them); `Ok(None)` if it is not one.
pub fn open_path(path: &Path, env: &Env) -> Result<Option<Container>> {
    if longpath::is_dir(path) {
        if !is_sframe_dir(path) {
            return Ok(None);
        }
        let dir = SourceDir::open(path, true).map_err(|e| Error::from(e).in_file(path))?;
        return open::open_sframe(&FrameDir(Arc::new(dir)), env);
    }
    open::open_source(Arc::new(open_file(path)?), path, env)
}

/// A sparse frame's directory, opened once: its index and chunk files are
/// opened relative to it by [`SourceDir::open_file`]'s rules, each chunk
/// file on its first read and kept open within [`max_kept_open`].
pub struct FrameDir(pub Arc<SourceDir>);

impl FrameFiles for FrameDir {
    fn path(&self) -> &Path {
        self.0.path()
    }
    fn entries(&self) -> u64 {
        longpath::read_dir_names(self.0.path())
            .map(|d| d.take(MAX_CHUNKS as usize).count() as u64)
            .unwrap_or(0)
    }
    fn index(&self) -> Result<Arc<dyn Source>> {
        Ok(Arc::new(open_in(&self.0, "chunks.b2frame")?))
    }
    fn chunk(&self, name: &str) -> Arc<dyn Source> {
        Arc::new(lazy_in_dir(self.0.clone(), name))
    }
}
