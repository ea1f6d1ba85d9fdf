//! Which names a listing may show as file names, and the one log line
//! about those it leaves out.

/// The longest file name, in bytes (`NAME_MAX`).
pub const NAME_MAX: usize = 255;

/// Can `name` (one component) be a file name: not empty, not `.` or
/// `..`, no `/` or NUL, at most 255 bytes (`NAME_MAX`)?
pub fn showable(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name.len() <= NAME_MAX
        && !name.contains(['/', '\0'])
}

/// Is every component of the relative path `p` [`showable`] (so no `/`
/// at its start or end, no `//`)?
pub fn showable_path(p: &str) -> bool {
    p.split('/').all(showable)
}

/// The names a listing left out: how many, and the first (shortened).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    pub count: usize,
    pub example: Option<String>,
}

impl Skipped {
    /// Count `name` out.
    pub fn skip(&mut self, name: &str) {
        self.count += 1;
        if self.example.is_none() {
            let short: String = name.chars().take(64).collect();
            let more = if short.len() < name.len() { "..." } else { "" };
            self.example = Some(format!("{short:?}{more} ({} bytes)", name.len()));
        }
    }

    /// Add what `other` left out.
    pub fn add(&mut self, other: Skipped) {
        self.count += other.count;
        if self.example.is_none() {
            self.example = other.example;
        }
    }

    /// One warning for the listing `what`, if it left anything out.
    pub fn log(&self, what: &str) {
        if let Some(e) = &self.example {
            log::warn!(
                "{what}: {} names that cannot be file names left out (empty, `.` or `..` \
                 components, NUL, a leading `/`, over {NAME_MAX} bytes, outside the \
                 listed prefix, or an object named as a directory), such as {e}",
                self.count
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_cannot_be_file_names() {
        for bad in ["", ".", "..", "a/b", "nul\0", &"x".repeat(256)] {
            assert!(!showable(bad), "{bad:?}");
        }
        for good in [
            "a",
            "...",
            ".hidden",
            "~[]#%?*|{}\\^\"<> `é",
            "\u{1}",
            &"x".repeat(255),
        ] {
            assert!(showable(good), "{good:?}");
        }
        assert!(showable_path("a/b/c.b2nd"));
        for bad in ["/lead", "a//b", "a/./b", "a/../b", "end/", ""] {
            assert!(!showable_path(bad), "{bad:?}");
        }
    }

    #[test]
    fn skipped_names_keep_one_short_example() {
        let mut s = Skipped::default();
        s.skip(&"y".repeat(1 << 20));
        s.skip("a//b");
        assert_eq!(s.count, 2);
        let e = s.example.clone().unwrap();
        assert!(e.len() < 100 && e.contains("1048576 bytes"), "{e}");
        let mut t = Skipped::default();
        t.add(s);
        assert_eq!(t.count, 2);
    }
}
