//! Keys in URLs, for every request of every backend: a key is the exact
//! text the store gave (`%` is a literal character), encoded once here.
//! Every byte but the unreserved ones of RFC 3986 (`A-Z a-z 0-9 - . _ ~`)
//! is sent as `%XX`: S3's SigV4 canonical form, and what any HTTP server
//! decodes back to the same bytes.

use percent_encoding::{percent_decode, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// Everything but the unreserved characters.
const RESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The URL path of `key` (`/`-separated segments, each encoded).
pub fn path(key: &str) -> String {
    key.split('/')
        .map(|s| utf8_percent_encode(s, RESERVED).to_string())
        .collect::<Vec<_>>()
        .join("/")
}

/// A query value (`/` encoded too).
pub fn query(value: &str) -> String {
    utf8_percent_encode(value, RESERVED).to_string()
}

/// `base` (a URL without a slash at its end) and `key`'s path joined.
pub fn under(base: &str, key: &str) -> String {
    if key.is_empty() {
        base.to_string()
    } else {
        format!("{base}/{}", path(key))
    }
}

/// A name an S3 listing sent with `encoding-type=url`, decoded exactly as
/// S3 encoded it (`%XX`, and `+` for a space, as AWS does and its SDKs
/// decode); `None` if it is not UTF-8 once decoded.
pub fn listed(name: &str) -> Option<String> {
    let spaced = name.replace('+', " ");
    let bytes: Vec<u8> = percent_decode(spaced.as_bytes()).collect();
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_special_character_is_encoded_once() {
        let key = "d/~[]#%?*|{}\\^\"<> `é%41%2F%2E%2E+.b2frame";
        assert_eq!(
            path(key),
            "d/~%5B%5D%23%25%3F%2A%7C%7B%7D%5C%5E%22%3C%3E%20%60%C3%A9%2541%252F%252E%252E%2B.b2frame"
        );
        assert_eq!(path("a/b-c_d.e"), "a/b-c_d.e");
        assert_eq!(query("p/q r&s=t+"), "p%2Fq%20r%26s%3Dt%2B");
        assert_eq!(under("http://h/x", ""), "http://h/x");
        assert_eq!(under("http://h/x", "a b/c"), "http://h/x/a%20b/c");
        assert_eq!(path("\u{1}x"), "%01x");
    }

    #[test]
    fn listed_names_decode_exactly() {
        assert_eq!(listed("x%2541.b2frame").as_deref(), Some("x%41.b2frame"));
        assert_eq!(listed("a+b%2Bc").as_deref(), Some("a b+c"));
        assert_eq!(listed("%01%00").as_deref(), Some("\u{1}\0"));
        assert_eq!(listed("%C3%A9").as_deref(), Some("é"));
        assert_eq!(listed("%FF"), None);
        // A name sent by a server that left it raw.
        assert_eq!(listed("plain.b2nd").as_deref(), Some("plain.b2nd"));
    }
}
