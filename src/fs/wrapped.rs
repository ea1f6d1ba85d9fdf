//! [`WrappedTree`]: a source tree that wraps another and says only what it
//! changes; every method it leaves out is the inner tree's.

use super::source_tree::{Meta, RawFile, SourceTree};
use super::Statfs;
use blosc_decode::container::{Container, Env};
use blosc_decode::detect::Probe;
use blosc_decode::io::{First, Source};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A [`SourceTree`] over an inner one (`ZarrTree`, `StoreTree`): each
/// method defaults to the inner tree's, and every `WrappedTree` is a
/// `SourceTree`. The methods are [`SourceTree`]'s, documented there.
pub trait WrappedTree: Send + Sync {
    /// The tree this one wraps.
    fn inner(&self) -> &dyn SourceTree;

    fn root(&self) -> &Path {
        self.inner().root()
    }
    fn hides(&self, path: &Path) -> bool {
        self.inner().hides(path)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<OsString>> {
        self.inner().list(dir)
    }
    fn stat(&self, path: &Path) -> std::io::Result<Meta> {
        self.inner().stat(path)
    }
    fn stat_follow(&self, path: &Path) -> std::io::Result<Meta> {
        self.inner().stat_follow(path)
    }
    fn read_link(&self, path: &Path) -> std::io::Result<PathBuf> {
        self.inner().read_link(path)
    }
    fn never_container(&self, path: &Path) -> bool {
        self.inner().never_container(path)
    }
    fn probe(&self, path: &Path, meta: &Meta) -> blosc_decode::Result<Option<Probe>> {
        self.inner().probe(path, meta)
    }
    fn open_container(
        &self,
        path: &Path,
        meta: &Meta,
        env: &Env,
    ) -> blosc_decode::Result<Option<Container>> {
        self.inner().open_container(path, meta, env)
    }
    fn open_source(&self, path: &Path, meta: &Meta) -> blosc_decode::Result<Arc<dyn Source>> {
        self.inner().open_source(path, meta)
    }
    fn open_plain(&self, path: &Path) -> std::io::Result<(Box<dyn RawFile>, Meta)> {
        self.inner().open_plain(path)
    }
    fn dir_container_access(&self, path: &Path, meta: &Meta) -> (u16, u64) {
        self.inner().dir_container_access(path, meta)
    }
    fn statfs(&self) -> std::io::Result<Statfs> {
        self.inner().statfs()
    }
    fn listing_workers(&self, entries: usize) -> usize {
        self.inner().listing_workers(entries)
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.inner().counters()
    }
    fn open_file(
        &self,
        path: &Path,
        first: First,
    ) -> blosc_decode::Result<Option<Arc<dyn Source>>> {
        self.inner().open_file(path, first)
    }
    fn xattrs(&self, path: &Path) -> Vec<(String, Vec<u8>)> {
        self.inner().xattrs(path)
    }
}

impl<W: WrappedTree> SourceTree for W {
    fn root(&self) -> &Path {
        WrappedTree::root(self)
    }
    fn hides(&self, path: &Path) -> bool {
        WrappedTree::hides(self, path)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<OsString>> {
        WrappedTree::list(self, dir)
    }
    fn stat(&self, path: &Path) -> std::io::Result<Meta> {
        WrappedTree::stat(self, path)
    }
    fn stat_follow(&self, path: &Path) -> std::io::Result<Meta> {
        WrappedTree::stat_follow(self, path)
    }
    fn read_link(&self, path: &Path) -> std::io::Result<PathBuf> {
        WrappedTree::read_link(self, path)
    }
    fn never_container(&self, path: &Path) -> bool {
        WrappedTree::never_container(self, path)
    }
    fn probe(&self, path: &Path, meta: &Meta) -> blosc_decode::Result<Option<Probe>> {
        WrappedTree::probe(self, path, meta)
    }
    fn open_container(
        &self,
        path: &Path,
        meta: &Meta,
        env: &Env,
    ) -> blosc_decode::Result<Option<Container>> {
        WrappedTree::open_container(self, path, meta, env)
    }
    fn open_source(&self, path: &Path, meta: &Meta) -> blosc_decode::Result<Arc<dyn Source>> {
        WrappedTree::open_source(self, path, meta)
    }
    fn open_plain(&self, path: &Path) -> std::io::Result<(Box<dyn RawFile>, Meta)> {
        WrappedTree::open_plain(self, path)
    }
    fn dir_container_access(&self, path: &Path, meta: &Meta) -> (u16, u64) {
        WrappedTree::dir_container_access(self, path, meta)
    }
    fn statfs(&self) -> std::io::Result<Statfs> {
        WrappedTree::statfs(self)
    }
    fn listing_workers(&self, entries: usize) -> usize {
        WrappedTree::listing_workers(self, entries)
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        WrappedTree::counters(self)
    }
    fn open_file(
        &self,
        path: &Path,
        first: First,
    ) -> blosc_decode::Result<Option<Arc<dyn Source>>> {
        WrappedTree::open_file(self, path, first)
    }
    fn xattrs(&self, path: &Path) -> Vec<(String, Vec<u8>)> {
        WrappedTree::xattrs(self, path)
    }
}
