//! `clowder plan …`: the arguments and what is printed.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::file::{self, Plan};

/// Bad input: the plan file is refused.
const EXIT_USAGE: i32 = 2;

#[derive(Debug, Subcommand)]
pub enum PlanCommand {
    /// Check a plan file and print the order in which its steps can run
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The plan file, e.g. plan.toml
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

pub fn run(command: PlanCommand) -> i32 {
    match command {
        PlanCommand::Check(args) => check(&args),
    }
}

fn check(args: &CheckArgs) -> i32 {
    match file::load(&args.file) {
        Ok(plan) => {
            print_plan(&plan, "");
            0
        }
        Err(errors) => {
            for err in errors {
                eprintln!("clowder: error: {err}");
            }
            EXIT_USAGE
        }
    }
}

fn print_plan(plan: &Plan, indent: &str) {
    let base = plan.base.as_deref().unwrap_or("the current branch");
    let verify = if plan.verify.is_empty() {
        "no check".to_string()
    } else {
        format!("verify {:?}", plan.verify)
    };
    println!(
        "{indent}plan {} ({}): {} step{}, base {base}, autonomy {}, max_parallel {}, {verify}",
        plan.name,
        plan.file.display(),
        plan.steps.len(),
        if plan.steps.len() == 1 { "" } else { "s" },
        plan.autonomy,
        plan.max_parallel,
    );
    for (n, wave) in file::waves(plan).iter().enumerate() {
        println!("{indent}{}: {}", n + 1, wave.join(", "));
    }
    for sub in &plan.subplans {
        print_plan(sub, &format!("{indent}  "));
    }
}
