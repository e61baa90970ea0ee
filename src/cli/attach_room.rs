//! `clowder attach [TARGET…]`: which host the room attaches to.

use crate::fleet::remote::Target;

/// Opens the room on the one host named (the current folder by default).
pub fn run(targets: Vec<String>, via: Vec<String>) -> i32 {
    let mut parsed: Vec<Target> = Vec::new();
    for text in &targets {
        match Target::parse(text) {
            Ok(target) => parsed.push(target),
            Err(err) => {
                eprintln!("clowder: error: {err}");
                return super::EXIT_USAGE;
            }
        }
    }
    parsed.extend(via.into_iter().map(Target::Via));
    if parsed.is_empty() {
        parsed.push(Target::Folder(std::path::PathBuf::from(".")));
    }
    if parsed.len() > 1 {
        eprintln!(
            "clowder: error: one host at a time: {} targets given; attach to each in its own terminal",
            parsed.len()
        );
        return super::EXIT_USAGE;
    }
    if let Target::Folder(folder) = &parsed[0]
        && let Err(why) = crate::fleet::serve::check_served(folder)
    {
        eprintln!("clowder: error: {why}");
        return 1;
    }
    crate::ui::run_attached(parsed.remove(0))
}
