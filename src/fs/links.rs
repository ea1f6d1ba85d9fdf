//! Symbolic links: their targets as presented in the tree.

use super::*;

impl Fs {
    /// The target of link `ino`; when it is relative and names, inside the
    /// source, a container presented under another name, with its last
    /// component rewritten to that name (the link would dangle otherwise).
    pub fn readlink(&self, ino: u64) -> Result<Vec<u8>, Error> {
        let path = self.path_of(ino)?;
        if self.tree.hides(&path) {
            return Err(Error::stale());
        }
        let target = self
            .tree
            .read_link(&path)
            .map(|t| t.into_os_string().into_vec())
            .map_err(Error::from)?;
        Ok(self.presented_target(&path, &target).unwrap_or(target))
    }

    /// `target` (of the link at `link`) with its last component renamed as
    /// the mount presents it, or `None` to leave it as it is: absolute,
    /// leaving the source, through another link, not a container, missing,
    /// or presented under its own name. The target itself is not followed
    /// if it is a link.
    pub(super) fn presented_target(&self, link: &Path, target: &[u8]) -> Option<Vec<u8>> {
        let t = Path::new(OsStr::from_bytes(target));
        if t.is_absolute() || target.ends_with(b"/") {
            return None;
        }
        let mut dir = link.parent()?.to_path_buf();
        let mut parts: Vec<_> = t.components().collect();
        let std::path::Component::Normal(name) = parts.pop()? else {
            return None;
        };
        // `a/.` is read as `a` by `components`: the bytes must end in the name.
        let head = target.strip_suffix(name.as_bytes())?;
        if !(head.is_empty() || head.ends_with(b"/")) {
            return None;
        }
        for c in parts {
            match c {
                std::path::Component::CurDir => {}
                std::path::Component::ParentDir if dir != self.inodes.root() => {
                    dir.pop();
                }
                // A directory, not a link (which the kernel would follow
                // elsewhere, `..` included).
                std::path::Component::Normal(n) => {
                    dir.push(n);
                    let md = self.tree.stat(&dir).ok()?;
                    if !md.is_dir() || self.tree.hides(&dir) {
                        return None;
                    }
                }
                _ => return None,
            }
        }
        let shown = self.presented_in(&dir, name)?;
        (shown != name).then(|| [head, shown.as_bytes()].concat())
    }

    /// The name source entry `name` of source directory `dir` is presented
    /// under (`None`: not presented), as the directory's listing names it:
    /// from its cached listing if there is one, else from the few entries
    /// that could take the name it wants ([`names::resolve`]).
    fn presented_in(&self, dir: &Path, name: &OsStr) -> Option<OsString> {
        let dir_ino = if dir == self.inodes.root() {
            Some(ROOT_INO)
        } else {
            let ino = self.ino_for(&self.tree.stat(dir).ok()?);
            let known = self.inodes.holds(ino, dir);
            known.then_some(ino)
        };
        let from = |l: &DirListing| {
            l.entries
                .iter()
                .find(|e| e.source == name)
                .map(|e| e.shown.clone())
        };
        if let Some(ino) = dir_ino {
            if let Ok((_, Some(l))) = self.cached_listing(ino, dir) {
                return from(&l);
            }
        }
        let look = |src: &OsStr| self.naming_at(&dir.join(src));
        let wants = names::wanted(name, look(name)?);
        let Some(w) = wants else {
            return Some(name.to_os_string());
        };
        match names::resolve(&w, look) {
            Ok(Some(s)) if s == name => Some(w),
            Ok(_) => Some(name.to_os_string()),
            Err(()) => from(&*self.listing(dir_ino?).ok()?),
        }
    }

    /// How naming sees the source entry at `p` (`None`: absent, not
    /// presented, or not classified).
    fn naming_at(&self, p: &Path) -> Option<names::Naming> {
        if self.tree.hides(p) {
            return None;
        }
        let md = self.tree.stat(p).ok()?;
        if !presented(&md) {
            return None;
        }
        self.classify(p, &md).ok().map(|w| naming(&w))
    }
}
