use super::*;
use crate::config::Perms;

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// The remote options `list` gives.
fn remote(list: &str) -> RemoteOptions {
    let mut r = RemoteOptions::default();
    apply_reading(&mut r, list).unwrap();
    r
}

/// The mount arguments `list` gives.
fn mount(list: &str) -> Result<MountArgs, String> {
    let mut m = MountArgs::default();
    split(list).try_for_each(|o| apply(&mut m, o, false))?;
    Ok(m)
}

/// `user=NAME` is Caterva2's user; fstab's `user` (no value) is ignored.
#[test]
fn user_with_a_value_is_the_caterva2_user() {
    let a = args(&[
        "-o",
        "user=alice,password_file=/pw",
        "caterva2://h/@public",
        "/mnt",
    ]);
    let m = parse(&a).unwrap().unwrap();
    assert_eq!(m.remote.user.as_deref(), Some("alice"));
    let a = args(&["-o", "ro,user,noauto", "caterva2://h/@public", "/mnt"]);
    let m = parse(&a).unwrap().unwrap();
    assert_eq!(m.remote.user, None);
    assert_eq!(m.flags, ["ro"]);
}

/// Every row's names are taken by the mount form, a value where the row
/// wants one; `cat` and `info` take exactly the rows marked for them.
#[test]
fn every_option_of_the_table_is_taken() {
    for o in OPTIONS {
        for k in o.names {
            let given = if o.value {
                let v = match *k {
                    "threads" | "retries" | "timeout" | "uid" | "gid" | "metadata_ttl" => "3",
                    "file_mode" | "dir_mode" => "0440",
                    "source_io" => "auto",
                    "endpoint" => "http://127.0.0.1:9000",
                    "region" => "eu-west-1",
                    "cache_size" | "readahead" | "decode_ahead" | "fetch_cache" | "max_read" => {
                        "1M"
                    }
                    _ => "x",
                };
                format!("{k}={v}")
            } else {
                k.to_string()
            };
            mount(&given).unwrap_or_else(|e| panic!("{given}: {e}"));
            let mut r = RemoteOptions::default();
            assert_eq!(apply_reading(&mut r, &given).is_ok(), o.reading, "{given}");
            // (`user` alone is fstab's.)
            if o.value && *k != "user" {
                let e = mount(k).unwrap_err();
                assert!(e.contains("needs a value"), "{k}: {e}");
            }
        }
    }
    assert!(mount("x-systemd.automount").is_ok());
    assert!(mount("bogus")
        .unwrap_err()
        .contains("unknown option 'bogus'"));
}

#[test]
fn max_read_is_whole_pages_from_4k_to_1m() {
    let got = |v: &str| mount(&format!("max_read={v}")).map(|m| m.max_read);
    assert_eq!(got("4K"), Ok(4096));
    assert_eq!(got("256K"), Ok(256 << 10));
    assert_eq!(got("1M"), Ok(1 << 20));
    for bad in ["0", "3000", "2M", "x"] {
        assert!(got(bad).is_err(), "{bad}");
    }
    assert_eq!(mount("ro").unwrap().max_read, 0);
}

/// `--help` shows every option that has help text, once.
#[test]
fn help_shows_each_documented_option_once() {
    let u = usage();
    for o in OPTIONS.iter().filter(|o| !o.help.is_empty()) {
        assert_eq!(u.matches(o.help).count(), 1, "{}", o.help);
        assert!(o.help.contains(o.names[0]), "{}", o.names[0]);
    }
}

#[test]
fn options_that_do_not_apply_to_a_source_are_refused() {
    let loc = |u: &str| Location::parse(u).unwrap().unwrap();
    let c2 = loc("caterva2://h:1/@public");
    let http = loc("http://h/d/");
    let s3 = loc("s3://b/p");
    let e = check_applies(Some(&c2), &remote("region=eu-west-1")).unwrap_err();
    assert_eq!(
        e,
        "option region (s3://) does not apply to caterva2://: remove it"
    );
    for o in ["endpoint=http://e", "anonymous", "region=r"] {
        assert!(check_applies(Some(&http), &remote(o)).is_err(), "{o}");
        assert!(check_applies(Some(&c2), &remote(o)).is_err(), "{o}");
        check_applies(Some(&s3), &remote(o)).unwrap();
    }
    let m = remote("manifest=m.txt");
    assert!(check_applies(Some(&s3), &m).is_err());
    assert!(check_applies(Some(&c2), &m).is_err());
    check_applies(Some(&http), &m).unwrap();
    for o in ["user=u", "password_file=/pw"] {
        assert!(check_applies(Some(&s3), &remote(o)).is_err(), "{o}");
        assert!(check_applies(Some(&http), &remote(o)).is_err(), "{o}");
        check_applies(Some(&c2), &remote(o)).unwrap();
    }
    let e = check_applies(None, &remote("timeout=3")).unwrap_err();
    assert!(
        e.contains("timeout (remote sources)") && e.contains("a local source"),
        "{e}"
    );
    let e = check_applies(None, &remote("timeout=3,anonymous")).unwrap_err();
    assert!(e.starts_with("options anonymous (s3://), timeout"), "{e}");
    check_applies(None, &RemoteOptions::default()).unwrap();
    check_applies(Some(&s3), &remote("timeout=3")).unwrap();
}

#[test]
fn an_unknown_option_is_named_only_if_it_looks_like_one() {
    assert_eq!(unknown_option("passwrd"), "unknown option 'passwrd'");
    assert_eq!(unknown_flag("--pass=S3cret"), "unknown option '--pass'");
    for k in ["S3cret", "a b", "x/y", &"x".repeat(33), "pässword"] {
        assert!(!unknown_option(k).contains(k), "{k}");
    }
}

#[test]
fn perms_take_numeric_ids_and_read_only_octal_modes() {
    let m = mount("uid=1000,gid=100,file_mode=0440,dir_mode=550").unwrap();
    let want = Perms {
        uid: Some(1000),
        gid: Some(100),
        file_mode: Some(0o440),
        dir_mode: Some(0o550),
    };
    assert_eq!(m.perms, want);
    assert!(m.perms.any());
    assert!(mount("file_mode=0644").unwrap_err().contains("write bits"));
    for bad in ["dir_mode=4555", "file_mode=9", "uid=alice", "uid"] {
        assert!(mount(bad).is_err(), "{bad}");
    }
}
