//! How source names become presented names, both ways.
//!
//! A container found by content loses one known suffix (`t.b2frame` is
//! shown as `t`); an array gets `.npy` (`w.b2nd` is shown as `w.npy`). A
//! container keeps its own name when the name it wants is taken: by a
//! source entry of that name, or by a second container wanting it too.
//!
//! [`assign`] names a whole directory at once (readdir). [`resolve`] finds
//! the one source entry presented under a given name by looking only at the
//! few source names that could be presented so, so that the first lookup in
//! a directory of 100,000 files costs a few stats, not a probe of every
//! file. Both follow the same rules; a property test holds them together.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

/// The suffixes stripped from container names, longest first: the one list
/// both naming directions use. `.b2nd` (NDArray), `.b2f` and `.b2frame`
/// (SChunk frames), `.b2b` (BatchArray), Bloscpack's and the generic ones.
pub const SUFFIXES: &[&str] = &[
    ".bloscpack",
    ".b2frame",
    ".b2pack",
    ".blosc2",
    ".blosc",
    ARRAY_SUFFIX,
    ".b2b",
    ".b2f",
    ".bl2",
    ".blp",
    ".b2",
];

/// The array suffix: replaced by `.npy`, and kept by an array presented as
/// its bytes (its dtype has no `.npy` form), whose name then still says
/// what it holds.
const ARRAY_SUFFIX: &str = ".b2nd";

/// `name` without the first of [`SUFFIXES`] it ends with (for a container
/// presented as `.npy` or not), if what is left is not empty.
fn stem_of(name: &str, npy: bool) -> Option<&str> {
    SUFFIXES
        .iter()
        .filter(|suf| npy || **suf != ARRAY_SUFFIX)
        .find_map(|suf| name.strip_suffix(suf))
        .filter(|stem| !stem.is_empty())
}

/// A source entry as naming sees it: `None` if it is not a container,
/// `Some(npy)` if it is one (`npy`: presented as a `.npy` array).
pub type Naming = Option<bool>;

/// The presented name of a container: one of [`SUFFIXES`] removed; arrays
/// get `.npy` (replacing the suffix, or appended).
pub fn presented_name(name: &OsStr, npy: bool) -> OsString {
    let s = name.to_string_lossy();
    let stem = stem_of(&s, npy);
    if npy {
        return match stem {
            Some(stem) => OsString::from(format!("{stem}.npy")),
            // The name is a bare suffix: nothing left to name the array.
            None if SUFFIXES.contains(&&*s) => name.to_os_string(),
            None => OsString::from(format!("{s}.npy")),
        };
    }
    match stem {
        Some(stem) if name.as_bytes().len() == s.len() => OsString::from(stem),
        _ => name.to_os_string(),
    }
}

/// The name a source entry asks for, if it is a container and that name
/// differs from its own.
pub fn wanted(name: &OsStr, naming: Naming) -> Option<OsString> {
    naming
        .map(|npy| presented_name(name, npy))
        .filter(|w| w != name)
}

/// Presented names for a whole directory: `(presented, source, payload)`
/// for every `(source name, payload)`, in the same order. Non-containers
/// keep their names; a container takes the name it wants unless that name
/// is any source name in the directory or is wanted by another container
/// too; then it keeps its source name. Nothing is hidden, and the outcome
/// does not depend on listing order.
pub fn assign<T>(
    raw: Vec<(OsString, T)>,
    naming: impl Fn(&T) -> Naming,
) -> Vec<(OsString, OsString, T)> {
    let sources: HashSet<&OsStr> = raw.iter().map(|(n, _)| n.as_os_str()).collect();
    let wants: Vec<Option<OsString>> = raw.iter().map(|(n, t)| wanted(n, naming(t))).collect();
    let mut count: HashMap<&OsStr, usize> = HashMap::new();
    for w in wants.iter().flatten() {
        *count.entry(w.as_os_str()).or_default() += 1;
    }
    let names: Vec<OsString> = raw
        .iter()
        .zip(&wants)
        .map(|((n, _), w)| match w {
            Some(w) if !sources.contains(w.as_os_str()) && count[w.as_os_str()] == 1 => w.clone(),
            _ => n.clone(),
        })
        .collect();
    raw.into_iter()
        .zip(names)
        .map(|((n, t), p)| (p, n, t))
        .collect()
}

/// Every source name that could ask for `name` ([`wanted`]), or `None` if
/// that set cannot be enumerated (a name that is not valid UTF-8, or holds
/// U+FFFD, may come from a lossy conversion: use [`assign`] then).
pub fn wanting(name: &OsStr) -> Option<Vec<OsString>> {
    let s = name.to_str()?;
    if s.contains('\u{FFFD}') {
        return None;
    }
    let mut out: Vec<OsString> = SUFFIXES
        .iter()
        .map(|suf| format!("{s}{suf}").into())
        .collect();
    if let Some(stem) = s.strip_suffix(".npy").filter(|st| !st.is_empty()) {
        out.push(stem.into());
        out.extend(
            SUFFIXES
                .iter()
                .map(|suf| OsString::from(format!("{stem}{suf}"))),
        );
    }
    out.retain(|c| {
        [Some(false), Some(true)]
            .into_iter()
            .any(|n| wanted(c, n).as_deref() == Some(name))
    });
    out.sort();
    out.dedup();
    Some(out)
}

/// The source entry presented as `name`, given `look`, which tells whether
/// a source name is listed (`None`: absent, or not presented at all) and
/// how naming sees it. `Err(())` when the candidates cannot be enumerated
/// (see [`wanting`]): name the whole directory with [`assign`] instead.
#[allow(clippy::result_unit_err)]
pub fn resolve(
    name: &OsStr,
    mut look: impl FnMut(&OsStr) -> Option<Naming>,
) -> Result<Option<OsString>, ()> {
    match look(name) {
        // An entry of this name shows under it, unless it is a container
        // that gets the name it wants; then nothing shows as `name` (those
        // wanting `name` are blocked by the entry itself).
        Some(naming) => match wanted(name, naming) {
            None => Ok(Some(name.to_os_string())),
            Some(w) => {
                let gets_it = look(&w).is_none() && wanting_present(&w, &mut look)?.len() == 1;
                Ok((!gets_it).then(|| name.to_os_string()))
            }
        },
        // No entry of this name: the container wanting it, if only one does.
        None => {
            let mut found = wanting_present(name, &mut look)?;
            Ok(if found.len() == 1 { found.pop() } else { None })
        }
    }
}

/// The listed source entries that ask for `name`.
fn wanting_present(
    name: &OsStr,
    look: &mut impl FnMut(&OsStr) -> Option<Naming>,
) -> Result<Vec<OsString>, ()> {
    let mut out = wanting(name).ok_or(())?;
    out.retain(|c| look(c).is_some_and(|naming| wanted(c, naming).as_deref() == Some(name)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names() {
        assert_eq!(presented_name(OsStr::new("t.b2frame"), false), "t");
        assert_eq!(presented_name(OsStr::new("t.blosc2"), false), "t");
        assert_eq!(presented_name(OsStr::new("a.tar.b2"), false), "a.tar");
        assert_eq!(presented_name(OsStr::new("x"), false), "x");
        assert_eq!(presented_name(OsStr::new(".b2"), false), ".b2");
        assert_eq!(presented_name(OsStr::new("w.b2nd"), true), "w.npy");
        assert_eq!(presented_name(OsStr::new("w.blp"), true), "w.npy");
        assert_eq!(presented_name(OsStr::new("w"), true), "w.npy");
        assert_eq!(presented_name(OsStr::new(".b2nd"), true), ".b2nd");
    }

    /// Every suffix of the one list is stripped, both ways: from a frame's
    /// name, and before `.npy` from an array's; `wanting` finds them all.
    #[test]
    fn every_suffix_is_stripped() {
        assert!(SUFFIXES.contains(&".b2b"));
        for suf in SUFFIXES {
            let src = OsString::from(format!("t{suf}"));
            let bytes = if *suf == ARRAY_SUFFIX {
                &*src
            } else {
                OsStr::new("t")
            };
            assert_eq!(presented_name(&src, false), bytes, "{suf}");
            assert_eq!(presented_name(&src, true), "t.npy", "{suf}");
            if *suf != ARRAY_SUFFIX {
                assert!(wanting(OsStr::new("t")).unwrap().contains(&src), "{suf}");
            }
            assert!(
                wanting(OsStr::new("t.npy")).unwrap().contains(&src),
                "{suf}"
            );
        }
    }

    #[test]
    fn wanting_lists_every_source_name_that_asks() {
        let w = wanting(OsStr::new("w.npy")).unwrap();
        for s in ["w", "w.b2nd", "w.b2frame", "w.npy.b2", "w.npy.blosc2"] {
            assert!(w.contains(&OsString::from(s)), "{s} missing from {w:?}");
        }
        assert!(wanting(OsStr::new("a\u{FFFD}")).is_none());
        assert!(wanting(OsStr::from_bytes(b"a\xff")).is_none());
    }

    /// Names built from a few stems and suffixes, so that collisions of
    /// every kind are common.
    fn name() -> impl Strategy<Value = String> {
        let stems = prop::sample::select(vec!["a", "b", "a.npy", "a.b2", "x.tar", ".b2", "w"]);
        let sufs = prop::sample::select(vec![
            "",
            "",
            ".b2",
            ".b2frame",
            ".npy",
            ".b2nd",
            ".blp",
            ".bloscpack",
            ".b2f",
            ".b2b",
        ]);
        (stems, sufs).prop_map(|(a, b)| format!("{a}{b}"))
    }

    fn naming() -> impl Strategy<Value = Naming> {
        prop::sample::select(vec![None, Some(false), Some(true)])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// `resolve` finds exactly what `assign` names, for every presented
        /// name and for names nothing is presented as.
        #[test]
        fn resolve_agrees_with_assign(dir in prop::collection::btree_map(name(), naming(), 0..12), probes in prop::collection::vec(name(), 0..8)) {
            let raw: Vec<(OsString, Naming)> = dir.iter().map(|(n, k)| (OsString::from(n), *k)).collect();
            let named = assign(raw, |k| *k);
            let by_presented: HashMap<&OsStr, &OsStr> = named.iter().map(|(p, s, _)| (p.as_os_str(), s.as_os_str())).collect();
            prop_assert_eq!(by_presented.len(), named.len(), "presented names are unique: {:?}", named);
            let look = |s: &OsStr| dir.get(s.to_str().unwrap()).copied();
            let mut asked: Vec<OsString> = named.iter().map(|(p, _, _)| p.clone()).collect();
            asked.extend(named.iter().map(|(_, s, _)| s.clone()));
            asked.extend(probes.into_iter().map(OsString::from));
            for n in asked {
                let got = resolve(&n, look).unwrap();
                prop_assert_eq!(got.as_deref(), by_presented.get(n.as_os_str()).copied(), "name {:?} in {:?}", n, named);
            }
        }
    }
}
