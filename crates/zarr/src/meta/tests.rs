use super::*;

fn v2(doc: &str) -> Result<ArrayMeta> {
    ArrayMeta::parse(doc.as_bytes(), true)
}

fn v3(doc: &str) -> Result<ArrayMeta> {
    ArrayMeta::parse(doc.as_bytes(), false)
}

/// Each document of `cases` refused by `parse` with an error naming its word.
fn refused(parse: fn(&str) -> Result<ArrayMeta>, cases: &[(String, &str)]) {
    for (doc, word) in cases {
        let Err(e) = parse(doc) else {
            panic!("{word}: accepted");
        };
        assert!(e.reason.contains(word), "{word}: {e}");
    }
}

const V2: &str = r#"{"zarr_format": 2, "shape": [10, 7], "chunks": [4, 3],
  "dtype": "<i4", "order": "C", "fill_value": -1, "filters": null,
  "compressor": {"id": "blosc", "cname": "lz4"}}"#;

#[test]
fn v2_array() {
    let m = v2(V2).unwrap();
    assert_eq!(m.shape, [10, 7]);
    assert_eq!(m.chunk_bytes(), 48);
    assert_eq!(m.fill, (-1i32).to_le_bytes());
    assert_eq!(m.codecs, [Codec::Blosc]);
    assert_eq!(m.dtype.typestr(), "<i4");
}

#[test]
fn v2_refusals_name_what_they_refuse() {
    let cases = [
        (
            V2.replace("\"filters\": null", "\"filters\": [{\"id\": \"delta\"}]"),
            "delta",
        ),
        (V2.replace("\"blosc\"", "\"bz2\""), "bz2"),
        (V2.replace("\"C\"", "\"K\""), "order"),
        (V2.replace("<i4", "|O"), "object"),
        (V2.replace("<i4", "<i3"), "<i3"),
        (
            V2.replace("\"<i4\"", "[[\"a\", \"<i4\", [-1]]]"),
            "field shape",
        ),
    ];
    refused(v2, &cases);
}

#[test]
fn sizes_that_overflow_are_refused() {
    let huge = V2.replace("[4, 3]", "[4294967296, 4294967296]");
    assert!(v2(&huge).is_err());
    let big = V2.replace("[10, 7]", "[18446744073709551615, 7]");
    assert!(v2(&big).is_err());
    assert!(v2(&V2.replace("[4, 3]", "[4, 0]")).is_err());
    assert!(v2(&V2.replace("[4, 3]", "[4]")).is_err());
    assert!(v2("[]").is_err());
    assert!(v2("{").is_err());
}

const V3: &str = r#"{"zarr_format": 3, "node_type": "array", "shape": [9, 8],
  "data_type": "float64", "chunk_grid": {"name": "regular",
  "configuration": {"chunk_shape": [4, 4]}}, "chunk_key_encoding":
  {"name": "default", "configuration": {"separator": "/"}},
  "fill_value": "NaN", "codecs": [{"name": "bytes", "configuration":
  {"endian": "big"}}, {"name": "zstd"}, {"name": "crc32c"}]}"#;

#[test]
fn v3_array() {
    let m = v3(V3).unwrap();
    assert!(m.swap);
    assert_eq!(m.codecs, [Codec::Zstd, Codec::Crc32c]);
    assert!(f64::from_le_bytes(m.fill.clone().try_into().unwrap()).is_nan());
    assert!(m.keys.prefix);
    let hex = V3.replace("\"NaN\"", "\"0x7ff8000000000001\"");
    assert_eq!(
        v3(&hex).unwrap().fill,
        0x7ff8_0000_0000_0001u64.to_le_bytes()
    );
}

/// [`V3`] with `f` before its `bytes` codec.
fn with_filter(f: &str) -> String {
    V3.replace("\"codecs\": [", &format!("\"codecs\": [{f}, "))
}

#[test]
fn v3_filters_and_types() {
    let m = v3(&with_filter(
        r#"{"name": "numcodecs.astype", "configuration": {"encode_dtype": "f4", "decode_dtype": "f8"}}"#,
    ))
    .unwrap();
    assert_eq!(m.stored.typestr(), "<f4");
    assert_eq!(m.stored_bytes(), 64);
    let dt = V3.replace(
        "\"float64\"",
        r#"{"name": "numpy.datetime64", "configuration": {"unit": "ms", "scale_factor": 10}}"#,
    );
    let m = v3(&dt.replace("\"NaN\"", "-5")).unwrap();
    assert_eq!(m.dtype.typestr(), "<M8[10ms]");
    assert_eq!(m.fill, (-5i64).to_le_bytes());
}

#[test]
fn v3_refusals_name_what_they_refuse() {
    let cases = [
        (
            V3.replace("{\"name\": \"zstd\"}", "{\"name\": \"bz9\"}"),
            "bz9",
        ),
        (
            V3.replace("\"bytes\"", "\"sharding_indexed\""),
            "sharding_indexed",
        ),
        (V3.replace("float64", "string"), "string"),
        (V3.replace("\"regular\"", "\"rectilinear\""), "rectilinear"),
        (V3.replace("\"array\"", "\"group\""), "group"),
        (V3.replace("\"float64\"", "\"string\""), "variable-length"),
        (
            with_filter(r#"{"name": "transpose", "configuration": {"order": [0, 0]}}"#),
            "transpose",
        ),
        (
            with_filter(r#"{"name": "transpose", "configuration": {"order": [0]}}"#),
            "transpose",
        ),
        (
            with_filter(r#"{"name": "numcodecs.delta", "configuration": {"dtype": "i4"}}"#),
            "delta of <i4 on values of <f8",
        ),
        (
            with_filter(
                r#"{"name": "numcodecs.fixedscaleoffset", "configuration": {"dtype": "f8", "astype": "U2", "offset": 0, "scale": 1}}"#,
            ),
            "fixedscaleoffset to <U2",
        ),
        (with_filter(r#"{"name": "numcodecs.pcodec"}"#), "pcodec"),
    ];
    refused(v3, &cases);
}

const SHARDED: &str = r#"{"zarr_format": 3, "node_type": "array", "shape": [9, 8],
  "data_type": "int32", "chunk_grid": {"name": "regular",
  "configuration": {"chunk_shape": [4, 8]}}, "chunk_key_encoding":
  {"name": "default"}, "fill_value": 0, "codecs": [{"name": "sharding_indexed",
  "configuration": {"chunk_shape": [2, 4], "codecs": [{"name": "bytes",
  "configuration": {"endian": "little"}}, {"name": "zstd"}], "index_codecs":
  [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
  "index_location": "end"}}]}"#;

#[test]
fn v3_sharding() {
    let m = v3(SHARDED).unwrap();
    assert_eq!(
        (m.chunks.clone(), m.codecs.clone()),
        (vec![2, 4], vec![Codec::Zstd])
    );
    let s = m.shard.unwrap();
    assert_eq!((s.shape.clone(), s.per.clone()), (vec![4, 8], vec![2, 2]));
    assert_eq!((s.index_bytes(), s.location()), (68, "end"));
    let start = SHARDED.replace("\"end\"", "\"start\"");
    assert!(v3(&start).unwrap().shard.unwrap().index_at_start);
    let cases = [
        (SHARDED.replace("[2, 4]", "[3, 4]"), "multiple"),
        (
            SHARDED.replace("{\"name\": \"zstd\"}", "{\"name\": \"sharding_indexed\"}"),
            "sharding_indexed among other codecs",
        ),
        (SHARDED.replace("\"end\"", "\"middle\""), "index_location"),
        (SHARDED.replace("\"crc32c\"", "\"gzip\""), "index codecs"),
        (
            SHARDED.replace(
                "{\"name\": \"crc32c\"}]",
                "{\"name\": \"crc32c\"}, {\"name\": \"crc32c\"}]",
            ),
            "index codecs",
        ),
        (
            SHARDED
                .replace("[4, 8]", "[2048, 1024]")
                .replace("[2, 4]", "[1, 1]"),
            "shard index",
        ),
    ];
    refused(v3, &cases);
}

/// `SHARDED` with its inner codecs replaced by `levels` more levels of
/// shards, each halving the chunk shape's last dimension.
fn nested(levels: u32) -> String {
    let mut codecs =
        r#"[{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd"}]"#
            .to_string();
    for l in (0..levels).rev() {
        codecs = format!(
            r#"[{{"name": "sharding_indexed", "configuration": {{"chunk_shape": [2, {}],
            "codecs": {codecs}, "index_codecs": [{{"name": "bytes",
            "configuration": {{"endian": "little"}}}}]}}}}]"#,
            4 >> (l + 1).min(2)
        );
    }
    SHARDED.replace(
        r#"[{"name": "bytes",
  "configuration": {"endian": "little"}}, {"name": "zstd"}]"#,
        &codecs,
    )
}

#[test]
fn v3_nested_sharding() {
    let m = v3(&nested(1)).unwrap();
    assert_eq!(m.chunks, vec![2, 2]);
    let s = m.shard.unwrap();
    let shapes: Vec<_> = s
        .levels()
        .map(|l| (l.shape.clone(), l.per.clone()))
        .collect();
    assert_eq!(
        shapes,
        vec![(vec![4, 8], vec![2, 2]), (vec![2, 4], vec![1, 2])]
    );
    assert_eq!(s.innermost_per(), vec![2, 4]);
    assert_eq!(v3(&nested(2)).unwrap().shard.unwrap().levels().count(), 3);
    refused(v3, &[(nested(4), "levels deep")]);
}
