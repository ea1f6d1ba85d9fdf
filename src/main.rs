use bloscfs::{cli, mount};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("cat") => cli::cmd_cat(&args[1..]),
        Some("info") => cli::cmd_info(&args[1..]),
        None => {
            eprint!("{}", mount::USAGE);
            std::process::exit(2);
        }
        _ => std::process::exit(mount::main(&args)),
    };
    if let Err(msg) = result {
        eprintln!("bloscfs: {msg}");
        std::process::exit(1);
    }
}
