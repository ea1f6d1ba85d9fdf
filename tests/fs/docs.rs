//! The documents name real places: every repository path in backticks in
//! README.md, CHANGELOG.md and docs/*.md exists, and a `path::name` names a
//! function (or other item) that path defines.

use crate::common::*;

/// Directories a repository path starts with.
const TOP: &[&str] = &[
    "src/", "crates/", "tests/", "scripts/", "docs/", "fuzz/", "man/", ".ci/",
];

/// The backticked words of `text` that name repository paths, with the item
/// named after `::` if any.
fn named_paths(text: &str) -> Vec<(String, Option<String>)> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| !w.contains(char::is_whitespace) && TOP.iter().any(|t| w.starts_with(t)))
        .filter(|w| !w.contains(['*', '{', '<', '$', 'N']) || w.contains("::"))
        .map(|w| match w.split_once("::") {
            Some((p, item)) => {
                let name = item.rsplit("::").next().unwrap_or(item);
                (p.to_string(), Some(name.to_string()))
            }
            None => (w.to_string(), None),
        })
        .collect()
}

#[test]
fn paths_named_in_the_docs_exist() {
    let top = root();
    let mut docs = vec![top.join("README.md"), top.join("CHANGELOG.md")];
    for e in std::fs::read_dir(top.join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            docs.push(p);
        }
    }
    let mut missing = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        for (path, item) in named_paths(&text) {
            let at = top.join(path.trim_end_matches(['.', ',', ':', ';', ')']));
            let found = match &item {
                _ if !at.exists() => false,
                Some(item) => {
                    std::fs::read_to_string(&at).is_ok_and(|src| src.contains(item.as_str()))
                }
                None => true,
            };
            if !found {
                missing.push(format!(
                    "{}: {path}{}",
                    doc.display(),
                    item.map(|i| format!("::{i}")).unwrap_or_default()
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "named in the docs, not in the tree:\n{}",
        missing.join("\n")
    );
}
