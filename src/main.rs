//! The `clowder` binary: everything lives in the library; see [`clowder::cli`].

fn main() {
    std::process::exit(clowder::cli::main());
}
