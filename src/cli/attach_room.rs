//! `clowder attach [TARGET…]` and `clowder serve --http [TARGET…]`: which
//! hosts the room (or the web inbox) attaches to.

use crate::fleet::remote::Target;

/// Opens the room on the hosts named (the current folder by default).
pub fn run(targets: Vec<String>, via: Vec<String>) -> i32 {
    let parsed = match resolve(targets, via) {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    let hosts = parsed
        .into_iter()
        .map(|(name, target)| crate::ui::HostTarget { name, target })
        .collect();
    crate::ui::run_attached(hosts)
}

/// The hosts that `TARGET…` and `--via` name, else `[[hosts]]` of
/// harness.toml, else the current folder; `Err`: the exit code, the error
/// said. One folder alone with no host is said now, not as a page or a
/// room that waits.
pub fn resolve(
    targets: Vec<String>,
    via: Vec<String>,
) -> Result<Vec<(Option<String>, Target)>, i32> {
    let mut parsed: Vec<(Option<String>, Target)> = Vec::new();
    for text in &targets {
        let (name, text) = named(text);
        match Target::parse(text) {
            Ok(target) => parsed.push((name, target)),
            Err(err) => {
                eprintln!("clowder: error: {err}");
                return Err(super::EXIT_USAGE);
            }
        }
    }
    parsed.extend(via.into_iter().map(|command| (None, Target::Via(command))));
    if parsed.is_empty() {
        parsed = configured_hosts().map_err(|err| {
            eprintln!("clowder: error: {err}");
            super::EXIT_USAGE
        })?;
    }
    if parsed.is_empty() {
        parsed.push((None, Target::Folder(std::path::PathBuf::from("."))));
    }
    if let Err(err) = unique_names(&parsed) {
        eprintln!("clowder: error: {err}");
        return Err(super::EXIT_USAGE);
    }
    if let [(_, Target::Folder(folder))] = parsed.as_slice()
        && let Err(why) = crate::fleet::serve::check_served(folder)
    {
        eprintln!("clowder: error: {why}");
        return Err(1);
    }
    Ok(parsed)
}

/// Every key acts on the host its lane's name says: two hosts of one name
/// would let a key act on the wrong one.
fn unique_names(hosts: &[(Option<String>, Target)]) -> Result<(), String> {
    for (index, (name, _)) in hosts.iter().enumerate() {
        let Some(name) = name else { continue };
        if hosts[..index]
            .iter()
            .any(|(other, _)| other.as_ref() == Some(name))
        {
            return Err(format!(
                "two hosts are named {name:?}: each host needs a name of its own (NAME=TARGET, or `name` in [[hosts]])"
            ));
        }
    }
    Ok(())
}

/// `NAME=TARGET`: the name the room gives the host's lanes (`NAME/lane`).
fn named(text: &str) -> (Option<String>, &str) {
    let Some((name, target)) = text.split_once('=') else {
        return (None, text);
    };
    let is_name = crate::fleet::LaneName::parse(name).is_ok();
    if is_name && !target.is_empty() {
        (Some(name.to_string()), target)
    } else {
        (None, text)
    }
}

/// `[[hosts]]` of harness.toml here, if it has any.
fn configured_hosts() -> Result<Vec<(Option<String>, Target)>, String> {
    let file = crate::config::DEFAULT_CONFIG_FILE;
    let config = crate::config::Config::load(std::path::Path::new(file), false)
        .map_err(|err| err.to_string())?;
    let mut hosts = Vec::new();
    for (index, entry) in config.hosts.iter().enumerate() {
        let key = format!("{file}: key `hosts[{index}]`");
        crate::fleet::LaneName::parse(&entry.name).map_err(|err| format!("{key}.name: {err}"))?;
        if let Some(first) = config.hosts[..index]
            .iter()
            .position(|other| other.name == entry.name)
        {
            return Err(format!(
                "{key}.name: {:?} is already the name of hosts[{first}]; each host needs a name of its own",
                entry.name
            ));
        }
        let target = match (&entry.target, &entry.via) {
            (Some(target), None) => {
                Target::parse(target).map_err(|err| format!("{key}.target: {err}"))?
            }
            (None, Some(via)) => Target::Via(via.clone()),
            _ => return Err(format!("{key}: expected one of `target` or `via`")),
        };
        hosts.push((Some(entry.name.clone()), target));
    }
    Ok(hosts)
}
