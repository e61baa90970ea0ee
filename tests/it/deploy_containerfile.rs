//! Lints assets/deploy/Containerfile without building it: its instructions parse, its
//! final stage copies the `clowder` binary built with `--locked`, runs as a non-root
//! user with `clowder --headless` as its command, and it installs the agent versions
//! tests/agents/real pins, under a Node version they accept.

use std::path::Path;

/// One instruction: its keyword in upper case and the rest, continuation lines joined.
#[derive(Debug, Clone)]
struct Instruction {
    line: usize,
    keyword: String,
    args: String,
}

const KEYWORDS: &[&str] = &[
    "ADD",
    "ARG",
    "CMD",
    "COPY",
    "ENTRYPOINT",
    "ENV",
    "EXPOSE",
    "FROM",
    "HEALTHCHECK",
    "LABEL",
    "ONBUILD",
    "RUN",
    "SHELL",
    "STOPSIGNAL",
    "USER",
    "VOLUME",
    "WORKDIR",
];

/// The instructions of a Containerfile, or `file:line: why` for the first bad one.
fn parse(text: &str) -> Result<Vec<Instruction>, String> {
    let mut out = Vec::new();
    let mut pending: Option<Instruction> = None;
    for (i, raw) in text.lines().enumerate() {
        let trimmed = raw.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && pending.is_none()) {
            continue;
        }
        let (body, continues) = match trimmed.strip_suffix('\\') {
            Some(body) => (body.trim_end(), true),
            None => (trimmed, false),
        };
        let mut current = match pending.take() {
            Some(mut open) => {
                open.args = format!("{} {body}", open.args).trim().to_string();
                open
            }
            None => {
                let (keyword, args) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
                let keyword = keyword.to_ascii_uppercase();
                if !KEYWORDS.contains(&keyword.as_str()) {
                    return Err(format!(
                        "Containerfile:{}: unknown instruction {keyword}",
                        i + 1
                    ));
                }
                Instruction {
                    line: i + 1,
                    keyword,
                    args: args.trim().to_string(),
                }
            }
        };
        if continues {
            pending = Some(current);
        } else {
            current.args = current.args.trim().to_string();
            out.push(current);
        }
    }
    match pending {
        Some(open) => Err(format!(
            "Containerfile:{}: continues past the end",
            open.line
        )),
        None => Ok(out),
    }
}

/// The instructions of each stage (from one `FROM` to the next).
fn stages(instructions: &[Instruction]) -> Vec<Vec<Instruction>> {
    let mut stages: Vec<Vec<Instruction>> = Vec::new();
    for ins in instructions {
        if ins.keyword == "FROM" {
            stages.push(Vec::new());
        }
        if let Some(stage) = stages.last_mut() {
            stage.push(ins.clone());
        }
    }
    stages
}

fn find<'a>(stage: &'a [Instruction], keyword: &str) -> Vec<&'a Instruction> {
    stage.iter().filter(|i| i.keyword == keyword).collect()
}

/// A JSON-form (exec form) argument list, e.g. CMD ["clowder", "--headless"].
fn exec_form(ins: &Instruction) -> Option<Vec<String>> {
    serde_json::from_str(&ins.args).ok()
}

/// What is wrong with the image the Containerfile `text` builds (empty: nothing).
fn problems(text: &str) -> Vec<String> {
    let instructions = match parse(text) {
        Ok(instructions) => instructions,
        Err(why) => return vec![why],
    };
    let stages = stages(&instructions);
    let (Some(builder), Some(last)) = (stages.first(), stages.last()) else {
        return vec!["no FROM".into()];
    };
    let mut problems = Vec::new();
    let mut check = |ok: bool, why: &str| {
        if !ok {
            problems.push(why.to_string());
        }
    };
    let from = &builder[0].args;
    check(
        from.contains("bookworm") && from.ends_with(" AS builder"),
        "the first stage is not `… bookworm AS builder`",
    );
    check(
        find(builder, "RUN")
            .iter()
            .any(|r| r.args.contains("cargo build --release --locked")),
        "the builder does not run `cargo build --release --locked`",
    );
    check(
        last[0].args.starts_with("debian:bookworm"),
        "the final stage is not Debian bookworm",
    );
    check(
        find(last, "COPY").iter().any(|c| {
            c.args.starts_with("--from=builder ") && c.args.ends_with("/usr/local/bin/clowder")
        }),
        "the final stage does not copy clowder from the builder to /usr/local/bin/clowder",
    );
    let user = find(last, "USER")
        .last()
        .map(|u| u.args.clone())
        .unwrap_or_default();
    let name = user.split(':').next().unwrap_or("");
    check(
        !name.is_empty() && name != "root" && name != "0",
        "the final stage's USER is not a non-root user",
    );
    check(
        name == "1000" || name == "clowder",
        "the final stage's USER is not clowder (uid 1000)",
    );
    let workdir = find(last, "WORKDIR").last().map(|w| w.args.clone());
    check(
        workdir.as_deref() == Some("/work"),
        "the final stage's WORKDIR is not /work",
    );
    let cmd = find(last, "CMD").last().and_then(|c| exec_form(c));
    check(
        cmd == Some(vec!["clowder".into(), "--headless".into(), "--stay".into()]),
        "CMD is not [\"clowder\", \"--headless\", \"--stay\"]",
    );
    let entrypoint = find(last, "ENTRYPOINT").last().and_then(|e| exec_form(e));
    let tini = entrypoint
        .as_ref()
        .and_then(|e| e.first())
        .is_some_and(|p| p.ends_with("/tini"));
    check(tini, "ENTRYPOINT does not start tini");
    problems
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn containerfile() -> String {
    std::fs::read_to_string(repo().join("assets/deploy/Containerfile"))
        .expect("assets/deploy/Containerfile is readable")
}

#[test]
fn the_final_stage_runs_clowder_headless_as_a_non_root_user() {
    assert_eq!(problems(&containerfile()), Vec::<String>::new());
}

#[test]
fn the_lint_refuses_an_image_that_runs_as_root_or_runs_something_else() {
    let text = containerfile();
    let as_root = text.replace("USER 1000:1000", "USER root");
    assert!(
        problems(&as_root).iter().any(|p| p.contains("non-root")),
        "{:?}",
        problems(&as_root)
    );
    let no_user = text.replace("USER 1000:1000\n", "");
    assert!(!problems(&no_user).is_empty());
    let other_cmd = text.replace(
        r#"CMD ["clowder", "--headless", "--stay"]"#,
        r#"CMD ["clowder"]"#,
    );
    assert!(problems(&other_cmd).iter().any(|p| p.contains("CMD")));
    let no_copy = text.replace("COPY --from=builder /clowder /usr/local/bin/clowder\n", "");
    assert!(
        problems(&no_copy)
            .iter()
            .any(|p| p.contains("copy clowder"))
    );
    let typo = text.replace("WORKDIR /work\n", "WORKDRI /work\n");
    assert!(
        problems(&typo)
            .iter()
            .any(|p| p.contains("unknown instruction WORKDRI"))
    );
}

/// The default of `ARG NAME=VALUE` in the Containerfile.
fn arg_default(text: &str, name: &str) -> String {
    let instructions = parse(text).unwrap_or_else(|why| panic!("{why}"));
    instructions
        .iter()
        .filter(|i| i.keyword == "ARG")
        .find_map(|i| i.args.strip_prefix(&format!("{name}=")).map(str::to_string))
        .unwrap_or_else(|| panic!("Containerfile: no `ARG {name}=…`"))
}

fn read_json(relative: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(repo().join(relative)).expect("a readable file");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

#[test]
fn the_image_installs_the_agent_versions_the_tests_pin() {
    let text = containerfile();
    let pinned = read_json("tests/agents/real/package.json");
    for (dependency, arg, package) in [
        (
            "claude-code-current",
            "CLAUDE_CODE_VERSION",
            "@anthropic-ai/claude-code",
        ),
        ("codex-current", "CODEX_VERSION", "@openai/codex"),
    ] {
        let spec = pinned["dependencies"][dependency].as_str().unwrap_or("");
        let version = arg_default(&text, arg);
        assert_eq!(
            spec,
            format!("npm:{package}@{version}"),
            "{arg} against package.json's {dependency}"
        );
        assert!(
            text.contains(&format!("\"{package}@${{{arg}}}\"")),
            "{package} is not installed at ${arg}"
        );
    }
}

#[test]
fn the_image_has_a_node_the_pinned_claude_code_accepts() {
    let lock = read_json("tests/agents/real/package-lock.json");
    let engines = lock["packages"]["node_modules/claude-code-current"]["engines"]["node"]
        .as_str()
        .unwrap_or_else(|| panic!("package-lock.json: no engines.node for claude-code-current"));
    let minimum: u32 = engines
        .strip_prefix(">=")
        .and_then(|v| v.split('.').next())
        .and_then(|major| major.parse().ok())
        .unwrap_or_else(|| panic!("engines.node {engines:?} is not `>=MAJOR…`"));
    let major: u32 = arg_default(&containerfile(), "NODE_MAJOR")
        .parse()
        .expect("NODE_MAJOR is a number");
    assert!(
        major >= minimum,
        "NODE_MAJOR={major}, Claude Code wants node {engines}"
    );
}
