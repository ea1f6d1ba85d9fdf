use bloscfs::cli;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("cat") => cli::cmd_cat(&args[1..]),
        Some("info") => cli::cmd_info(&args[1..]),
        Some("--version") | Some("-V") => {
            println!("bloscfs {}", cli::VERSION);
            Ok(())
        }
        _ => Err("usage: bloscfs cat|info ...".to_string()),
    };
    if let Err(msg) = result {
        eprintln!("bloscfs: {msg}");
        std::process::exit(1);
    }
}
