//! The subset of Python literal syntax NumPy dtype descriptions are written
//! in (`str(dtype)`, `repr(dtype.descr)`): strings, integers, `True`,
//! `False`, `None`, lists, tuples and dicts, read as `ast.literal_eval`
//! reads them; and `repr` of a string, as Python writes it.

/// A Python literal value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lit {
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
    /// `True` or `False`.
    Bool(bool),
    /// `None`.
    None,
    /// A list.
    List(Vec<Lit>),
    /// A tuple.
    Tuple(Vec<Lit>),
    /// A dict, as its key-value pairs in order.
    Dict(Vec<(Lit, Lit)>),
}

/// Nesting deeper than this is refused (the parser recurses).
pub const MAX_DEPTH: usize = 32;

/// Parse one literal making up the whole of `s` (surrounding spaces allowed).
pub fn parse(s: &str) -> Result<Lit, String> {
    let mut p = Parser {
        s: s.as_bytes(),
        text: s,
        i: 0,
    };
    let v = p.value(0)?;
    p.skip_ws();
    if p.i != p.s.len() {
        return Err(format!("unexpected text at byte {}", p.i));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    i: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.i).copied()
    }

    fn value(&mut self, depth: usize) -> Result<Lit, String> {
        if depth > MAX_DEPTH {
            return Err("nested too deeply".into());
        }
        match self.peek() {
            None => Err("unexpected end".into()),
            Some(b'[') => self.seq(b']', depth).map(|(v, _)| Lit::List(v)),
            Some(b'(') => {
                let (v, trailing_comma) = self.seq(b')', depth)?;
                match <[Lit; 1]>::try_from(v) {
                    // `(x)` is x itself; `(x,)` a 1-tuple.
                    Ok([x]) if !trailing_comma => Ok(x),
                    Ok(one) => Ok(Lit::Tuple(one.into())),
                    Err(v) => Ok(Lit::Tuple(v)),
                }
            }
            Some(b'{') => self.dict(depth),
            Some(b'\'' | b'"') => self.string().map(Lit::Str),
            Some(b'u' | b'U') if matches!(self.s.get(self.i + 1), Some(b'\'' | b'"')) => {
                self.i += 1;
                self.string().map(Lit::Str)
            }
            Some(b'-' | b'+' | b'0'..=b'9') => self.int(),
            Some(_) => self.word(),
        }
    }

    /// Items up to `close`, comma separated; also says whether a comma
    /// ended the last item.
    fn seq(&mut self, close: u8, depth: usize) -> Result<(Vec<Lit>, bool), String> {
        self.i += 1;
        let mut v = Vec::new();
        let mut comma = false;
        loop {
            if self.peek() == Some(close) {
                self.i += 1;
                return Ok((v, comma));
            }
            if !v.is_empty() && !comma {
                return Err(format!("expected ',' at byte {}", self.i));
            }
            v.push(self.value(depth + 1)?);
            comma = self.peek() == Some(b',');
            if comma {
                self.i += 1;
            }
        }
    }

    fn dict(&mut self, depth: usize) -> Result<Lit, String> {
        self.i += 1;
        let mut v = Vec::new();
        loop {
            if self.peek() == Some(b'}') {
                self.i += 1;
                return Ok(Lit::Dict(v));
            }
            let k = self.value(depth + 1)?;
            if self.peek() != Some(b':') {
                return Err(format!("expected ':' at byte {}", self.i));
            }
            self.i += 1;
            let x = self.value(depth + 1)?;
            v.push((k, x));
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {}
                _ => return Err(format!("expected ',' or '}}' at byte {}", self.i)),
            }
        }
    }

    fn int(&mut self) -> Result<Lit, String> {
        let start = self.i;
        if matches!(self.s[self.i], b'-' | b'+') {
            self.i += 1;
        }
        while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
            self.i += 1;
        }
        self.text[start..self.i]
            .parse()
            .map(Lit::Int)
            .map_err(|_| format!("bad integer at byte {start}"))
    }

    fn word(&mut self) -> Result<Lit, String> {
        let start = self.i;
        while self.i < self.s.len() && self.s[self.i].is_ascii_alphanumeric() {
            self.i += 1;
        }
        match &self.text[start..self.i] {
            "True" => Ok(Lit::Bool(true)),
            "False" => Ok(Lit::Bool(false)),
            "None" => Ok(Lit::None),
            _ => Err(format!("unexpected text at byte {start}")),
        }
    }

    /// A quoted string (single line, Python escapes).
    fn string(&mut self) -> Result<String, String> {
        let q = self.s[self.i] as char;
        let start = self.i;
        let rest = &self.text[self.i + 1..];
        let mut out = String::new();
        let mut chars = rest.char_indices();
        while let Some((k, c)) = chars.next() {
            if c == q {
                self.i += 1 + k + 1;
                return Ok(out);
            }
            match c {
                '\n' | '\r' => break,
                '\\' => {
                    let (_, e) = chars.next().ok_or("unterminated string")?;
                    escape(e, &mut chars, &mut out)?;
                }
                c => out.push(c),
            }
        }
        Err(format!("unterminated string at byte {start}"))
    }
}

/// The character(s) an escape `\e...` stands for, appended to `out`.
fn escape(e: char, chars: &mut std::str::CharIndices, out: &mut String) -> Result<(), String> {
    let mut hex = |n: usize| -> Result<char, String> {
        let mut v = 0u32;
        for _ in 0..n {
            let (_, h) = chars.next().ok_or("truncated escape")?;
            v = v * 16 + h.to_digit(16).ok_or("bad hex escape")?;
        }
        char::from_u32(v).ok_or_else(|| "escape is not a character".to_string())
    };
    let c = match e {
        '\\' | '\'' | '"' => e,
        'n' => '\n',
        'r' => '\r',
        't' => '\t',
        'a' => '\x07',
        'b' => '\x08',
        'f' => '\x0c',
        'v' => '\x0b',
        'x' => hex(2)?,
        'u' => hex(4)?,
        'U' => hex(8)?,
        '\n' => return Ok(()),
        '0'..='7' => {
            // Up to three octal digits.
            let mut v = e.to_digit(8).unwrap_or(0);
            for _ in 0..2 {
                let mut peek = chars.clone();
                match peek.next().and_then(|(_, d)| d.to_digit(8)) {
                    Some(d) => {
                        v = v * 8 + d;
                        chars.next();
                    }
                    None => break,
                }
            }
            char::from_u32(v).ok_or("bad octal escape")?
        }
        // `\N{...}` and unknown escapes: not in what NumPy writes.
        _ => return Err(format!("unsupported escape \\{e}")),
    };
    out.push(c);
    Ok(())
}

/// `repr(s)` as Python 3 writes it: single quotes unless the text holds a
/// single quote and no double one; backslash, the quote and control
/// characters escaped. Non-ASCII letters and digits are kept as they are;
/// every other non-ASCII character is escaped (`\xe9`, `\u2028`), which
/// Python reads back as the same text.
pub fn repr_str(s: &str) -> String {
    let q = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            c if !c.is_ascii() && c.is_alphanumeric() => out.push(c),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push(q);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Lit {
        Lit::Str(x.into())
    }

    #[test]
    fn literals() {
        assert_eq!(parse("'<f8'").unwrap(), s("<f8"));
        assert_eq!(
            parse("[('a', '<i4'), (\"b\", 'S3', (2,))]").unwrap(),
            Lit::List(vec![
                Lit::Tuple(vec![s("a"), s("<i4")]),
                Lit::Tuple(vec![s("b"), s("S3"), Lit::Tuple(vec![Lit::Int(2)])]),
            ])
        );
        assert_eq!(
            parse("{'names': ['a'], 'aligned': True, 'x': None, 'n': (3)}").unwrap(),
            Lit::Dict(vec![
                (s("names"), Lit::List(vec![s("a")])),
                (s("aligned"), Lit::Bool(true)),
                (s("x"), Lit::None),
                (s("n"), Lit::Int(3)),
            ])
        );
        assert_eq!(parse("()").unwrap(), Lit::Tuple(vec![]));
        assert_eq!(parse(r"'\x41\u00e9\101\\\''").unwrap(), s("A\u{e9}A\\'"));
        for bad in [
            "[",
            "'a",
            "(1 2)",
            "[1,,]",
            "{'a' 1}",
            "nope",
            "'\\q'",
            "99999999999999999999",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(parse(&"[".repeat(40)).is_err());
    }

    #[test]
    fn repr_like_python() {
        assert_eq!(repr_str("a"), "'a'");
        assert_eq!(repr_str("it's"), "\"it's\"");
        assert_eq!(repr_str("'\""), "'\\'\"'");
        assert_eq!(repr_str("\u{e9}\\\n\x01"), "'\u{e9}\\\\\\n\\x01'");
        assert_eq!(repr_str("\u{a0}\u{2028}"), "'\\xa0\\u2028'");
        for x in ["a'b\"c", "\u{4e00}\t", "\u{1f600}"] {
            assert_eq!(parse(&repr_str(x)).unwrap(), s(x));
        }
    }
}
