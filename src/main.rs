use bloscfs::{cli, mount};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("cat") => {
            output_to_a_pipe();
            bloscfs::logging::init_cli_logging();
            cli::cmd_cat(&args[1..])
        }
        Some("info") => {
            output_to_a_pipe();
            bloscfs::logging::init_cli_logging();
            cli::cmd_info(&args[1..])
        }
        None => {
            eprint!("{}", bloscfs::options::usage());
            std::process::exit(2);
        }
        _ => std::process::exit(mount::main(&args)),
    };
    if let Err(msg) = result {
        eprintln!("bloscfs: {msg}");
        std::process::exit(1);
    }
}

/// `cat` and `info` write to standard output, often a pipe (`| head`): when
/// its reader goes, end quietly as other tools do (`SIGPIPE`), not with a
/// panic or an error. (Rust ignores `SIGPIPE`; the daemon keeps it so.)
fn output_to_a_pipe() {
    // SAFETY: restoring a signal's default action has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}
