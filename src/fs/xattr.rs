//! Extended attributes and file system statistics.

use super::*;

/// What `statfs` answers (`statvfs(3)` fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statfs {
    /// Size of the file system in `frsize` units.
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    /// Inodes.
    pub files: u64,
    pub ffree: u64,
    /// Preferred I/O block size.
    pub bsize: u32,
    /// Longest file name.
    pub namelen: u32,
    /// Fragment size: the unit of `blocks`.
    pub frsize: u32,
}

impl Fs {
    /// Extended attributes of `ino` (name, value).
    pub fn xattrs(&self, ino: u64) -> Result<Vec<(String, Vec<u8>)>, Error> {
        let mut out = Vec::new();
        if ino == ROOT_INO {
            let mut stats = self.env.stats.render(&self.env.cache);
            stats.push_str(&format!("inodes_held={}\n", self.nodes_held()));
            for (k, v) in self.tree.counters() {
                stats.push_str(&format!("{k}={v}\n"));
            }
            out.push(("user.bloscfs.stats".to_string(), stats.into_bytes()));
            return Ok(out);
        }
        let (path, what, md) = self.what_of(ino)?;
        if let Shown::Plain = what {
            out.extend(self.tree.xattrs(&path));
        }
        if let Shown::Container(_) = what {
            let Some(c) = self.container(ino, &path, &md)? else {
                return Ok(out);
            };
            let i = c.info();
            let mut add =
                |k: &str, v: String| out.push((format!("user.blosc.{k}"), v.into_bytes()));
            add("format", i.format.clone());
            add("codec", i.codec.clone());
            add("filters", i.filters.join(","));
            add("typesize", i.typesize.to_string());
            add("chunksize", i.chunksize.to_string());
            let bs = c.first_layout().and_then(|l| l.header.fixed_blocksize());
            add("blocksize", bs.unwrap_or(0).to_string());
            add("nchunks", i.nchunks.to_string());
            add("nbytes", i.nbytes.to_string());
            add("cbytes", i.cbytes.to_string());
            add("cratio", format!("{:.3}", i.ratio()));
            if let View::Npy { descr, nd, .. } = c.view() {
                add("dtype", descr.clone());
                if let Some(nd) = nd {
                    add("shape", format!("{:?}", nd.shape));
                    add("chunkshape", format!("{:?}", nd.chunkshape));
                    add("blockshape", format!("{:?}", nd.blockshape));
                }
            }
            let layers = [("meta", &i.metalayers), ("vlmeta", &i.vlmetalayers)];
            for (prefix, list) in layers {
                for (n, v) in list.iter().filter(|(n, _)| !n.contains('\0')) {
                    out.push((format!("user.blosc.{prefix}.{n}"), v.clone()));
                }
            }
        }
        Ok(out)
    }

    pub fn getxattr(&self, ino: u64, name: &OsStr) -> Result<Vec<u8>, Error> {
        // Tools ask for security.* and system.* attributes on every file
        // (`ls -l`): answer those without opening the container.
        let ours = [&b"user.blosc"[..], b"user.zarr."];
        if !ours.iter().any(|p| name.as_bytes().starts_with(p)) {
            return Err(Error::no_attribute());
        }
        self.xattrs(ino)?
            .into_iter()
            .find(|(n, _)| n.as_bytes() == name.as_bytes())
            .map(|(_, v)| v)
            .ok_or_else(Error::no_attribute)
    }

    /// NUL-separated attribute names.
    pub fn listxattr(&self, ino: u64) -> Result<Vec<u8>, Error> {
        let mut v = Vec::new();
        for (n, _) in self.xattrs(ino)? {
            v.extend_from_slice(n.as_bytes());
            v.push(0);
        }
        Ok(v)
    }

    /// Statistics of the source file system, as the mount presents them
    /// (nothing free: it is read-only).
    pub fn statfs(&self) -> Result<Statfs, Error> {
        self.tree.statfs().map_err(Error::from)
    }
}
