//! NumPy dtypes as writers store them, read and written back.
//!
//! A b2nd metalayer or Bloscpack's metadata holds a dtype as text: a type
//! string (`'<f8'`, `'?'`, `'|S5'`, `'<M8[ns]'`), the list form of a
//! structured dtype (`[('a', '<i4'), ('flag', '?')]`, nested, with subarray
//! fields `('x', '<f4', (2, 3))`), or the dict form NumPy prints for padded
//! and aligned ones (`{'names': [..], 'formats': [..], 'offsets': [..],
//! 'itemsize': 16}`). `Dtype::parse` reads it with the meaning
//! `numpy.dtype(text)`, else `numpy.dtype(ast.literal_eval(text))`, gives it
//! (what python-blosc2 and bloscpack do), and `Dtype::descr` writes the
//! `descr` that `numpy.save` puts in a `.npy` header for it
//! (`numpy.lib.format.dtype_to_descr`). Anything else is refused with the
//! reason: a dtype is never guessed.

//!
//! ```
//! use blosc_decode::dtype::Dtype;
//!
//! let d = Dtype::parse("[('a', '<i4'), ('flag', '?')]")?;
//! assert_eq!(d.itemsize(), 5);
//! assert_eq!(d.descr()?, "[('a', '<i4'), ('flag', '|b1')]");
//! # Ok::<(), String>(())
//! ```

use crate::format::pylit::{self, repr_str, Lit};

/// A NumPy dtype, as far as a `.npy` file can carry it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dtype {
    /// A plain type by its NumPy type string as `dtype.str` gives it
    /// (`'<i4'`, `'|b1'`, `'>U3'`, `'<M8[10ms]'`).
    Scalar {
        /// The type string.
        code: String,
        /// Bytes of one item.
        size: u64,
    },
    /// A fixed-shape subarray of `base` (only as a field's type).
    Sub {
        /// The type of one element.
        base: Box<Dtype>,
        /// The subarray's shape.
        shape: Vec<u64>,
    },
    /// A structured dtype: named fields at byte offsets, and the item size.
    Struct {
        /// The fields, in order.
        fields: Vec<Field>,
        /// Bytes of one item (padding included).
        itemsize: u64,
    },
}

/// One field of a structured dtype.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Its name.
    pub name: String,
    /// Its title (NumPy's second name for a field), if any.
    pub title: Option<String>,
    /// Its type.
    pub dtype: Dtype,
    /// Its byte offset in the item.
    pub offset: u64,
}

type Res<T> = Result<T, String>;

/// Items bigger than this are refused (b2nd chunks are at most 2 GiB).
pub const MAX_ITEMSIZE: u64 = 1 << 31;
/// Dimensions of a subarray field, at most (NumPy's own limit is 64).
const MAX_SUB_DIMS: usize = 64;

impl Dtype {
    /// The dtype a writer stored as `text`.
    pub fn parse(text: &str) -> Res<Dtype> {
        if let Ok(d) = scalar(text) {
            return Ok(d);
        }
        let lit = pylit::parse(text).map_err(|e| format!("dtype {text:?}: {e}"))?;
        let d = from_lit(&lit, 0).map_err(|e| format!("dtype {text:?}: {e}"))?;
        match d {
            Dtype::Sub { .. } => Err(format!("dtype {text:?}: a subarray dtype as a whole")),
            d => Ok(d),
        }
    }

    /// Bytes of one item.
    pub fn itemsize(&self) -> u64 {
        match self {
            Dtype::Scalar { size, .. } => *size,
            // Checked against overflow when made (`subarray`).
            Dtype::Sub { base, shape } => shape.iter().fold(base.itemsize(), |a, &d| a * d),
            Dtype::Struct { itemsize, .. } => *itemsize,
        }
    }

    /// The `descr` of a `.npy` header for this dtype, as Python text:
    /// `repr(numpy.lib.format.dtype_to_descr(dtype))`. An error for dtypes
    /// `numpy.save` cannot write (overlapping or out-of-order fields) and
    /// for those whose header would not load back as the same dtype.
    pub fn descr(&self) -> Res<String> {
        match self {
            Dtype::Scalar { code, .. } => Ok(repr_str(code)),
            Dtype::Sub { base, shape } => Ok(format!("({}, {})", base.descr()?, tuple(shape))),
            Dtype::Struct { fields, itemsize } => {
                let mut out = Vec::with_capacity(fields.len());
                let mut offset = 0u64;
                for f in fields {
                    if f.offset < offset {
                        return Err(format!(
                            "field {:?} overlaps another or is out of order (numpy.save cannot write it)",
                            f.name
                        ));
                    }
                    if f.offset > offset {
                        out.push(format!("('', '|V{}')", f.offset - offset));
                    }
                    if f.name.is_empty() {
                        // It would load back as padding.
                        return Err("a field with an empty name".into());
                    }
                    let name = match &f.title {
                        Some(t) => format!("({}, {})", repr_str(t), repr_str(&f.name)),
                        None => repr_str(&f.name),
                    };
                    out.push(match &f.dtype {
                        Dtype::Sub { base, shape } => {
                            format!("({name}, {}, {})", base.descr()?, tuple(shape))
                        }
                        d => format!("({name}, {})", d.descr()?),
                    });
                    offset = f.offset + f.dtype.itemsize();
                }
                if *itemsize > offset {
                    out.push(format!("('', '|V{}')", itemsize - offset));
                }
                Ok(format!("[{}]", out.join(", ")))
            }
        }
    }
}

/// A Python tuple of integers: `(2,)`, `(2, 3)`.
fn tuple(shape: &[u64]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn scalar_of(order: char, kind: &str, size: u64) -> Dtype {
    Dtype::Scalar {
        code: format!("{order}{kind}"),
        size,
    }
}

/// A type string as `numpy.dtype(str)` reads it on a little-endian machine:
/// optional byte order, then a one-letter code or kind and size, or a type
/// name (`'float64'`).
fn scalar(s: &str) -> Res<Dtype> {
    if let Some(d) = type_name(s) {
        return scalar(d);
    }
    let (order, body) = match s.chars().next() {
        Some(c @ ('<' | '>' | '=' | '|')) => (c, &s[1..]),
        _ => ('=', s),
    };
    // Multi-byte types take '<' or '>'; '=' and '|' mean this machine's.
    let ord = if order == '>' { '>' } else { '<' };
    let Some(kind) = body.chars().next().filter(char::is_ascii) else {
        return Err("empty type string".into());
    };
    let rest = &body[1..];
    if rest.is_empty() {
        return one_letter(kind, ord);
    }
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (num, unit) = rest.split_at(digits);
    if num.is_empty() || num.len() > 12 || (num.starts_with('0') && num != "0") {
        return Err(format!("type string {s:?} not understood"));
    }
    let n: u64 = num.parse().map_err(|_| format!("bad size in {s:?}"))?;
    // Only datetimes (`M8`, `m8`) take a unit.
    let unit_ok = unit.is_empty() || (num == "8" && "Mm".contains(kind));
    if !unit_ok {
        return Err(format!("type string {s:?} not understood"));
    }
    let fixed = |ok: &[u64]| {
        if ok.contains(&n) {
            Ok(n)
        } else {
            Err(format!("type string {s:?}: no such size"))
        }
    };
    Ok(match kind {
        'b' => scalar_of('|', "b1", fixed(&[1])?),
        'i' | 'u' if n == 1 => scalar_of('|', &format!("{kind}1"), 1),
        'i' | 'u' => scalar_of(ord, &format!("{kind}{n}"), fixed(&[2, 4, 8])?),
        'f' => scalar_of(ord, &format!("f{n}"), fixed(&[2, 4, 8, 16])?),
        'c' => scalar_of(ord, &format!("c{n}"), fixed(&[8, 16, 32])?),
        'S' | 'a' => scalar_of('|', &format!("S{n}"), n),
        'V' => scalar_of('|', &format!("V{n}"), n),
        'U' => {
            let size = n.checked_mul(4).ok_or("size overflows")?;
            scalar_of(ord, &format!("U{n}"), size)
        }
        'M' | 'm' => {
            let unit = datetime_unit(unit).ok_or_else(|| format!("bad datetime unit in {s:?}"))?;
            scalar_of(ord, &format!("{kind}8{unit}"), fixed(&[8])?)
        }
        _ => return Err(format!("type string {s:?} not supported")),
    })
    .and_then(|d| match d.itemsize() {
        n if n <= MAX_ITEMSIZE => Ok(d),
        n => Err(format!("item size {n} too large")),
    })
}

/// A one-letter type code (`'?'`, `'i'`, `'d'`...), `ord` its byte order.
fn one_letter(kind: char, ord: char) -> Res<Dtype> {
    Ok(match kind {
        '?' => scalar_of('|', "b1", 1),
        'b' => scalar_of('|', "i1", 1),
        'B' => scalar_of('|', "u1", 1),
        'c' => scalar_of('|', "S1", 1),
        'h' | 'H' | 'i' | 'I' | 'l' | 'L' | 'q' | 'Q' | 'p' | 'P' | 'n' | 'N' => {
            let size = if "hH".contains(kind) {
                2
            } else if "iI".contains(kind) {
                4
            } else {
                8
            };
            let k = if kind.is_ascii_lowercase() { 'i' } else { 'u' };
            scalar_of(ord, &format!("{k}{size}"), size)
        }
        'e' => scalar_of(ord, "f2", 2),
        'f' => scalar_of(ord, "f4", 4),
        'd' => scalar_of(ord, "f8", 8),
        'g' => scalar_of(ord, "f16", 16),
        'F' => scalar_of(ord, "c8", 8),
        'D' => scalar_of(ord, "c16", 16),
        'G' => scalar_of(ord, "c32", 32),
        'M' | 'm' => scalar_of(ord, &format!("{kind}8"), 8),
        // Unsized: empty items (only usable as fields).
        'S' | 'a' => scalar_of('|', "S0", 0),
        'U' => scalar_of(ord, "U0", 0),
        'V' => scalar_of('|', "V0", 0),
        _ => return Err(format!("type code {kind:?} not supported")),
    })
}

/// NumPy's spelling of a datetime unit suffix (`[1ms]` is `[ms]`, `[generic]`
/// is none); `None` for one it would refuse or we do not know.
fn datetime_unit(u: &str) -> Option<String> {
    if u.is_empty() {
        return Some(String::new());
    }
    let inner = u.strip_prefix('[')?.strip_suffix(']')?;
    if inner == "generic" {
        return Some(String::new());
    }
    let digits = inner.bytes().take_while(u8::is_ascii_digit).count();
    let (num, unit) = inner.split_at(digits);
    let unit = if unit == "\u{3bc}s" { "us" } else { unit };
    const UNITS: [&str; 13] = [
        "Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps", "fs", "as",
    ];
    if !UNITS.contains(&unit) || num.len() > 9 {
        return None;
    }
    let count: u32 = if num.is_empty() { 1 } else { num.parse().ok()? };
    match count {
        0 => None,
        1 => Some(format!("[{unit}]")),
        c => Some(format!("[{c}{unit}]")),
    }
}

/// The type string of a NumPy type name (`'float64'` -> `'f8'`).
fn type_name(s: &str) -> Option<&'static str> {
    Some(match s {
        "bool" | "bool_" => "?",
        "int8" => "i1",
        "int16" => "i2",
        "int32" => "i4",
        "int64" | "int" => "i8",
        "uint8" => "u1",
        "uint16" => "u2",
        "uint32" => "u4",
        "uint64" => "u8",
        "float16" | "half" => "f2",
        "float32" | "single" => "f4",
        "float64" | "float" | "double" => "f8",
        "longdouble" => "f16",
        "complex64" => "c8",
        "complex128" | "complex" => "c16",
        _ => return None,
    })
}

/// The dtype `numpy.dtype(lit)` makes of a literal.
fn from_lit(lit: &Lit, depth: usize) -> Res<Dtype> {
    if depth > pylit::MAX_DEPTH {
        return Err("nested too deeply".into());
    }
    match lit {
        Lit::Str(s) => scalar(s),
        Lit::List(items) => list_form(items, depth),
        Lit::Dict(kv) => dict_form(kv, depth),
        Lit::Tuple(t) if t.len() == 2 => subarray(from_lit(&t[0], depth + 1)?, &t[1]),
        other => Err(format!("{other:?} is not a dtype")),
    }
}

/// `base` with a subarray shape (an int or a tuple; `()` is `base` itself).
fn subarray(base: Dtype, shape: &Lit) -> Res<Dtype> {
    let shape: Vec<u64> = match shape {
        // An int n means (n,); NumPy 1 read 1 (and 0) otherwise: refused.
        Lit::Int(n) if *n >= 2 => vec![*n as u64],
        Lit::Tuple(v) | Lit::List(v) if v.len() <= MAX_SUB_DIMS => v
            .iter()
            .map(|x| match x {
                Lit::Int(n) if *n >= 0 => Ok(*n as u64),
                _ => Err(format!("bad subarray shape {shape:?}")),
            })
            .collect::<Res<_>>()?,
        _ => return Err(format!("bad subarray shape {shape:?}")),
    };
    if shape.is_empty() {
        return Ok(base);
    }
    shape
        .iter()
        .try_fold(base.itemsize(), |a, &d| a.checked_mul(d))
        .filter(|&s| s <= MAX_ITEMSIZE)
        .ok_or("subarray too large")?;
    Ok(Dtype::Sub {
        base: Box::new(base),
        shape,
    })
}

/// `[(name, format[, shape]), ...]`: fields packed in order; an empty name
/// is `f<index>`.
fn list_form(items: &[Lit], depth: usize) -> Res<Dtype> {
    let mut fields: Vec<Field> = Vec::with_capacity(items.len());
    let mut offset = 0u64;
    for (i, item) in items.iter().enumerate() {
        let Lit::Tuple(t) = item else {
            return Err("a field is not a tuple".into());
        };
        if !(2..=3).contains(&t.len()) {
            return Err("a field tuple has not 2 or 3 items".into());
        }
        let (name, title) = match &t[0] {
            Lit::Str(n) if n.is_empty() => (format!("f{i}"), None),
            Lit::Str(n) => (n.clone(), None),
            Lit::Tuple(nt) => match &nt[..] {
                [Lit::Str(title), Lit::Str(n)] => (n.clone(), Some(title.clone())),
                _ => return Err("a field's (title, name) is not two strings".into()),
            },
            _ => return Err("a field name is not a string".into()),
        };
        let base = from_lit(&t[1], depth + 1)?;
        let dtype = match t.get(2) {
            Some(shape) => subarray(base, shape)?,
            None => base,
        };
        let size = dtype.itemsize();
        fields.push(Field {
            name,
            title,
            dtype,
            offset,
        });
        offset = offset.checked_add(size).ok_or("item size overflows")?;
    }
    make_struct(fields, offset)
}

/// `{'names': [..], 'formats': [..], 'offsets': [..], 'titles': [..],
/// 'itemsize': n, 'aligned': bool}`.
fn dict_form(kv: &[(Lit, Lit)], depth: usize) -> Res<Dtype> {
    let mut names = None;
    let mut formats = None;
    let mut offsets = None;
    let mut titles = None;
    let mut itemsize = None;
    let mut aligned = false;
    for (k, v) in kv {
        let Lit::Str(k) = k else {
            return Err("a dict key is not a string".into());
        };
        match (k.as_str(), v) {
            ("names", Lit::List(l) | Lit::Tuple(l)) => names = Some(l),
            ("formats", Lit::List(l) | Lit::Tuple(l)) => formats = Some(l),
            ("offsets", Lit::List(l) | Lit::Tuple(l)) => offsets = Some(l),
            ("titles", Lit::List(l) | Lit::Tuple(l)) => titles = Some(l),
            ("itemsize", Lit::Int(n)) if *n >= 0 => itemsize = Some(*n as u64),
            ("aligned", Lit::Bool(b)) => aligned = *b,
            _ => return Err(format!("dict entry {k:?} not supported")),
        }
    }
    let (Some(names), Some(formats)) = (names, formats) else {
        return Err("dict form without names and formats".into());
    };
    let n = names.len();
    if formats.len() != n
        || offsets.is_some_and(|o| o.len() != n)
        || titles.is_some_and(|t| t.len() != n)
    {
        return Err("dict form lists of different lengths".into());
    }
    if aligned && (offsets.is_none() || itemsize.is_none()) {
        // The aligned layout NumPy would compute is not reproduced here.
        return Err("aligned dict form without offsets and itemsize".into());
    }
    let lists = DictLists {
        names,
        formats,
        offsets: offsets.map(Vec::as_slice),
        titles: titles.map(Vec::as_slice),
    };
    let mut fields = Vec::with_capacity(n);
    let mut end = 0u64;
    for i in 0..n {
        let packed = fields
            .last()
            .map_or(0, |f: &Field| f.offset + f.dtype.itemsize());
        let f = lists.field(i, packed, depth)?;
        end = end.max(f.offset + f.dtype.itemsize());
        fields.push(f);
    }
    let itemsize = match itemsize {
        Some(s) if s < end => return Err(format!("itemsize {s} smaller than its fields")),
        Some(s) => s,
        None => end,
    };
    make_struct(fields, itemsize)
}

/// The lists of a dict form, all of one length.
struct DictLists<'a> {
    names: &'a [Lit],
    formats: &'a [Lit],
    offsets: Option<&'a [Lit]>,
    titles: Option<&'a [Lit]>,
}

impl DictLists<'_> {
    /// Field `i`, at `packed` when the form gives no offsets.
    fn field(&self, i: usize, packed: u64, depth: usize) -> Res<Field> {
        let Lit::Str(name) = &self.names[i] else {
            return Err("a field name is not a string".into());
        };
        let title = match self.titles.map(|t| &t[i]) {
            None | Some(Lit::None) => None,
            Some(Lit::Str(t)) => Some(t.clone()),
            Some(_) => return Err("a title is not a string".into()),
        };
        let dtype = from_lit(&self.formats[i], depth + 1)?;
        let offset = match self.offsets.map(|o| &o[i]) {
            None => packed,
            Some(Lit::Int(o)) if *o >= 0 => *o as u64,
            Some(_) => return Err("bad field offset".into()),
        };
        // Offsets are at most i64::MAX, sizes at most MAX_ITEMSIZE: no
        // overflow in `offset + size`, and the struct's size check refuses
        // what ends beyond it.
        if offset > i64::MAX as u64 {
            return Err("field offset overflows".into());
        }
        Ok(Field {
            name: name.clone(),
            title,
            dtype,
            offset,
        })
    }
}

/// Check names (and titles) are unique and the size is bounded.
fn make_struct(fields: Vec<Field>, itemsize: u64) -> Res<Dtype> {
    if itemsize > MAX_ITEMSIZE {
        return Err(format!("item size {itemsize} too large"));
    }
    let mut seen = std::collections::HashSet::new();
    for f in &fields {
        for key in std::iter::once(&f.name).chain(f.title.as_ref()) {
            if !seen.insert(key.as_str()) {
                return Err(format!("field name or title {key:?} occurs twice"));
            }
        }
    }
    Ok(Dtype::Struct { fields, itemsize })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn descr(s: &str) -> String {
        Dtype::parse(s).unwrap().descr().unwrap()
    }

    #[test]
    fn type_strings() {
        for (s, d, n) in [
            ("?", "'|b1'", 1),
            ("b", "'|i1'", 1),
            ("B", "'|u1'", 1),
            ("<i4", "'<i4'", 4),
            ("|S5", "'|S5'", 5),
            ("<U3", "'<U3'", 12),
            ("<M8[ns]", "'<M8[ns]'", 8),
            ("M8[1ms]", "'<M8[ms]'", 8),
            ("<m8[s]", "'<m8[s]'", 8),
            ("M8[generic]", "'<M8'", 8),
            (">c16", "'>c16'", 16),
            ("|V8", "'|V8'", 8),
            (">i1", "'|i1'", 1),
            ("|i4", "'<i4'", 4),
            ("float64", "'<f8'", 8),
            ("g", "'<f16'", 16),
        ] {
            let t = Dtype::parse(s).unwrap();
            assert_eq!((t.descr().unwrap().as_str(), t.itemsize()), (d, n), "{s}");
        }
        for bad in [
            "O", "i3", "b2", "f12", "M[ns]", "M8[0ms]", "i4,f8", " i4", "", "x",
        ] {
            assert!(Dtype::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn structured_forms() {
        assert_eq!(
            descr("[('a', '<i4'), ('flag', '?')]"),
            "[('a', '<i4'), ('flag', '|b1')]"
        );
        assert_eq!(
            descr("{'names': ['a', 'b'], 'formats': ['u1', '<f8'], 'offsets': [0, 8], 'itemsize': 16, 'aligned': True}"),
            "[('a', '|u1'), ('', '|V7'), ('b', '<f8')]"
        );
        assert_eq!(
            descr("[('a', ('<i4', (2,)), (3,)), ('n', [('p', 'S3')], (2,))]"),
            "[('a', ('<i4', (2,)), (3,)), ('n', [('p', '|S3')], (2,))]"
        );
        assert_eq!(
            descr("{'names': ['a'], 'formats': ['<i4'], 'offsets': [4], 'titles': ['T'], 'itemsize': 12}"),
            "[('', '|V4'), (('T', 'a'), '<i4'), ('', '|V4')]"
        );
        assert_eq!(
            descr("[('', '<i4'), ('', 'd')]"),
            "[('f0', '<i4'), ('f1', '<f8')]"
        );
        assert_eq!(
            Dtype::parse("[('x', '<f4', (2, 3))]").unwrap().itemsize(),
            24
        );
        let ooo =
            "{'names': ['a', 'b'], 'formats': ['<i4', '<f8'], 'offsets': [8, 0], 'itemsize': 16}";
        assert!(Dtype::parse(ooo).unwrap().descr().is_err());
        for bad in [
            "[('a', '<i4'), ('a', '<f8')]",
            "[('a', '<i4', 1)]",
            "[('a', '<i4', (-1,))]",
            "{'names': ['a'], 'formats': ['<i4'], 'itemsize': 2}",
            "{'names': ['a'], 'formats': ['<i4'], 'aligned': True}",
            "('<f4', (2, 3))",
            "[('a', 'V2147483647', (4,))]",
        ] {
            assert!(Dtype::parse(bad).is_err(), "{bad}");
        }
    }
}
