//! The table of programs whose options write, delete or run programs or code,
//! and how an option is read from a word.

use super::scripts::{Found, Lang, findings};

/// What a program does beyond reading its arguments, and the word that makes it
/// do so. This is the one table the gate knows programs by; README lists it.
pub(crate) struct Power {
    pub(crate) program: &'static str,
    /// The option that does it (`-delete`, `--output`, `-o`); empty: the program
    /// does it by itself (`tee`, `bash`).
    pub(crate) option: &'static str,
    pub(super) does: Does,
    /// Given by a piece of the script the program reads (`sed`'s `w`), not by
    /// an option: then `option` says what the piece is.
    pub(super) script: Option<(Lang, Found)>,
}

#[derive(Clone, Copy)]
pub(super) enum Does {
    /// Runs a string or a file as shell code: no rule allows it.
    Code,
    /// Reads or sets a variable by a name, whose array subscript (`a[$(…)]`) is
    /// evaluated as arithmetic, which runs code: no rule allows it.
    Names,
    /// Runs the command in the words after its own options; that command is
    /// judged as a command of its own.
    Runs(Wrap),
    /// Runs the command from the next word to `;` or `{} +` (`find -exec`),
    /// judged as a command of its own.
    RunsUntilSemicolon,
    /// Runs a program named in its value or in the settings it changes: asked
    /// unless a rule names it.
    RunsNamed,
    /// Writes files: asked unless a rule names it.
    Writes,
    /// Deletes files: asked unless a rule names it.
    Deletes,
    /// Runs a script from a file (`awk -f`), which can run programs and write
    /// files: asked unless a rule names it.
    RunsScript,
    /// A script the gate cannot read for sure: no rule allows it.
    Unread,
}

/// How a program that runs programs reads its own words before the command.
#[derive(Clone, Copy)]
pub(super) struct Wrap {
    /// Options whose value is the next word.
    pub(super) valued: &'static [&'static str],
    /// Options without a value.
    pub(super) flags: &'static [&'static str],
    /// Words between its options and the command (`timeout`'s duration).
    pub(super) operands: usize,
    /// It adds words read from its input to the command (`xargs`).
    pub(super) appends_input: bool,
    /// Options with which it only looks the command up (`command -v`).
    pub(super) looks_up: &'static [&'static str],
}

const fn power(program: &'static str, option: &'static str, does: Does) -> Power {
    Power {
        program,
        option,
        does,
        script: None,
    }
}

/// A power given by what a reader finds in the program's script.
const fn script(
    program: &'static str,
    what: &'static str,
    does: Does,
    lang: Lang,
    found: Found,
) -> Power {
    Power {
        script: Some((lang, found)),
        ..power(program, what, does)
    }
}

const fn code(program: &'static str) -> Power {
    power(program, "", Does::Code)
}

const fn runs(program: &'static str, wrap: Wrap) -> Power {
    power(program, "", Does::Runs(wrap))
}

const fn wrap(valued: &'static [&'static str], flags: &'static [&'static str]) -> Wrap {
    Wrap {
        valued,
        flags,
        operands: 0,
        appends_input: false,
        looks_up: &[],
    }
}

const fn wrap_then(valued: &'static [&'static str], flags: &'static [&'static str]) -> Wrap {
    Wrap {
        operands: 1,
        ..wrap(valued, flags)
    }
}

const PLAIN: Wrap = wrap(&[], &[]);

pub(super) const POWERS: &[Power] = &[
    // Shells and the builtins that run a string or a file as code.
    code("sh"),
    code("bash"),
    code("dash"),
    code("zsh"),
    code("ksh"),
    code("mksh"),
    code("oksh"),
    code("pdksh"),
    code("ash"),
    code("yash"),
    code("posh"),
    code("rbash"),
    code("busybox"),
    code("fish"),
    code("csh"),
    code("tcsh"),
    code("pwsh"),
    code("eval"),
    code("source"),
    code("."),
    code("trap"),
    code("su"),
    code("runuser"),
    code("watch"),
    code("parallel"),
    code("script"),
    power("env", "-S", Does::Code),
    power("env", "--split-string", Does::Code),
    power("sudo", "-s", Does::Code),
    power("sudo", "--shell", Does::Code),
    power("sudo", "-i", Does::Code),
    power("sudo", "--login", Does::Code),
    power("doas", "-s", Does::Code),
    power("flock", "-c", Does::Code),
    power("flock", "--command", Does::Code),
    // Builtins that take variable names.
    power("let", "", Does::Names),
    power("declare", "", Does::Names),
    power("typeset", "", Does::Names),
    power("local", "", Does::Names),
    power("export", "", Does::Names),
    power("readonly", "", Does::Names),
    power("unset", "", Does::Names),
    power("read", "", Does::Names),
    power("mapfile", "", Does::Names),
    power("readarray", "", Does::Names),
    power("getopts", "", Does::Names),
    power("printf", "-v", Does::Names),
    power("test", "-v", Does::Names),
    power("[", "-v", Does::Names),
    // Programs that run the program named by the words after their options.
    runs(
        "env",
        wrap(
            &["-u", "--unset", "-C", "--chdir"],
            &[
                "-i",
                "--ignore-environment",
                "-0",
                "--null",
                "-v",
                "--debug",
            ],
        ),
    ),
    runs("exec", wrap(&["-a"], &["-c", "-l"])),
    runs(
        "command",
        Wrap {
            looks_up: &["-v", "-V"],
            ..wrap(&[], &["-p", "-v", "-V"])
        },
    ),
    runs("builtin", PLAIN),
    runs("nohup", PLAIN),
    runs("nice", wrap(&["-n", "--adjustment"], &[])),
    runs(
        "ionice",
        wrap(
            &[
                "-c",
                "--class",
                "-n",
                "--classdata",
                "-p",
                "--pid",
                "-P",
                "--pgid",
                "-u",
                "--uid",
            ],
            &["-t", "--ignore"],
        ),
    ),
    runs(
        "timeout",
        wrap_then(
            &["-s", "--signal", "-k", "--kill-after"],
            &["--foreground", "--preserve-status", "-v", "--verbose"],
        ),
    ),
    runs(
        "time",
        wrap(
            &["-f", "--format", "-o", "--output"],
            &[
                "-a",
                "--append",
                "-p",
                "--portability",
                "-v",
                "--verbose",
                "-q",
                "--quiet",
            ],
        ),
    ),
    runs(
        "stdbuf",
        wrap(&["-i", "-o", "-e", "--input", "--output", "--error"], &[]),
    ),
    runs(
        "setsid",
        wrap(&[], &["-c", "--ctty", "-f", "--fork", "-w", "--wait"]),
    ),
    runs(
        "sudo",
        wrap(
            &[
                "-u",
                "--user",
                "-g",
                "--group",
                "-C",
                "--close-from",
                "-D",
                "--chdir",
                "-h",
                "--host",
                "-p",
                "--prompt",
                "-r",
                "--role",
                "-t",
                "--type",
                "-T",
                "--command-timeout",
                "-U",
                "--other-user",
            ],
            &[
                "-A",
                "--askpass",
                "-b",
                "--background",
                "-E",
                "--preserve-env",
                "-H",
                "--set-home",
                "-k",
                "--reset-timestamp",
                "-n",
                "--non-interactive",
                "-P",
                "--preserve-groups",
                "-S",
                "--stdin",
                "-s",
                "--shell",
                "-i",
                "--login",
            ],
        ),
    ),
    runs("doas", wrap(&["-u", "-C"], &["-n", "-L", "-s"])),
    runs(
        "xargs",
        Wrap {
            appends_input: true,
            ..wrap(
                &[
                    "-a",
                    "--arg-file",
                    "-d",
                    "--delimiter",
                    "-E",
                    "-I",
                    "-L",
                    "-n",
                    "--max-args",
                    "-P",
                    "--max-procs",
                    "-s",
                    "--max-chars",
                    "--process-slot-var",
                ],
                &[
                    "-0",
                    "--null",
                    "-o",
                    "--open-tty",
                    "-p",
                    "--interactive",
                    "-r",
                    "--no-run-if-empty",
                    "-t",
                    "--verbose",
                    "-x",
                    "--exit",
                    "-e",
                    "--eof",
                    "-i",
                    "--replace",
                    "-l",
                    "--max-lines",
                ],
            )
        },
    ),
    runs(
        "flock",
        wrap_then(
            &["-w", "--timeout", "-E", "--conflict-exit-code"],
            &[
                "-s",
                "--shared",
                "-x",
                "-e",
                "--exclusive",
                "-u",
                "--unlock",
                "-n",
                "--nb",
                "--nonblock",
                "-o",
                "--close",
                "-F",
                "--no-fork",
                "--verbose",
            ],
        ),
    ),
    runs("strace", PLAIN),
    runs("ltrace", PLAIN),
    runs(
        "taskset",
        wrap_then(&[], &["-a", "--all-tasks", "-c", "--cpu-list"]),
    ),
    runs("chrt", wrap_then(&[], &[])),
    runs("unbuffer", wrap(&[], &["-p"])),
    runs("chroot", wrap_then(&[], &["--skip-chdir"])),
    runs("nsenter", PLAIN),
    runs("unshare", PLAIN),
    runs("fakeroot", PLAIN),
    runs("systemd-run", PLAIN),
    power("find", "-exec", Does::RunsUntilSemicolon),
    power("find", "-execdir", Does::RunsUntilSemicolon),
    power("find", "-ok", Does::RunsUntilSemicolon),
    power("find", "-okdir", Does::RunsUntilSemicolon),
    // Options that run a program they name.
    power("git", "-c", Does::RunsNamed),
    power("git", "--config-env", Does::RunsNamed),
    power("git", "--exec-path", Does::RunsNamed),
    power("git", "-O", Does::RunsNamed),
    power("git", "--open-files-in-pager", Does::RunsNamed),
    power("sort", "--compress-program", Does::RunsNamed),
    power("rsync", "-e", Does::RunsNamed),
    power("rsync", "--rsh", Does::RunsNamed),
    power("rsync", "--rsync-path", Does::RunsNamed),
    power("tar", "-I", Does::RunsNamed),
    power("tar", "--use-compress-program", Does::RunsNamed),
    power("tar", "--to-command", Does::RunsNamed),
    power("tar", "--checkpoint-action", Does::RunsNamed),
    power("tar", "-F", Does::RunsNamed),
    power("tar", "--info-script", Does::RunsNamed),
    power("tar", "--new-volume-script", Does::RunsNamed),
    // Options and programs that write or delete files.
    power("find", "-delete", Does::Deletes),
    power("find", "-fprint", Does::Writes),
    power("find", "-fprint0", Does::Writes),
    power("find", "-fprintf", Does::Writes),
    power("find", "-fls", Does::Writes),
    power("git", "--output", Does::Writes),
    power("git", "-o", Does::Writes),
    power("sort", "-o", Does::Writes),
    power("sort", "--output", Does::Writes),
    power("tee", "", Does::Writes),
    power("sed", "-i", Does::Writes),
    power("sed", "--in-place", Does::Writes),
    power("time", "-o", Does::Writes),
    power("time", "--output", Does::Writes),
    power("strace", "-o", Does::Writes),
    power("ltrace", "-o", Does::Writes),
    power("curl", "-o", Does::Writes),
    power("curl", "--output", Does::Writes),
    power("curl", "-O", Does::Writes),
    power("curl", "--remote-name", Does::Writes),
    power("curl", "-D", Does::Writes),
    power("curl", "--dump-header", Does::Writes),
    power("curl", "-c", Does::Writes),
    power("curl", "--cookie-jar", Does::Writes),
    power("wget", "", Does::Writes),
    power("dd", "of", Does::Writes),
    power("perl", "-i", Does::Writes),
    power("ruby", "-i", Does::Writes),
    // What a script does, found by reading it (gawk, mawk, nawk read as awk).
    script("sed", "`e` command", Does::Code, Lang::Sed, Found::Runs),
    script("sed", "`w` command", Does::Writes, Lang::Sed, Found::Writes),
    script(
        "sed",
        "script file (`-f`)",
        Does::RunsScript,
        Lang::Sed,
        Found::ScriptFile,
    ),
    script("sed", "script", Does::Unread, Lang::Sed, Found::Unknown),
    script("awk", "`system()`", Does::Code, Lang::Awk, Found::Runs),
    script("awk", "pipe `|`", Does::Code, Lang::Awk, Found::Pipe),
    script("awk", "`print >`", Does::Writes, Lang::Awk, Found::Writes),
    script(
        "awk",
        "program file (`-f`)",
        Does::RunsScript,
        Lang::Awk,
        Found::ScriptFile,
    ),
    script("awk", "program", Does::Unread, Lang::Awk, Found::Unknown),
];

/// The name the table knows a program by: awk's variants read as awk.
pub(super) fn table_name(program: &str) -> &str {
    match program {
        "gawk" | "mawk" | "nawk" | "original-awk" => "awk",
        other => other,
    }
}

impl Power {
    /// `` `find -delete` ``, `` `tee` `` for what the program does by itself,
    /// `` sed's `w` command `` for a piece of its script.
    pub(crate) fn named(&self) -> String {
        if self.script.is_some() {
            format!("{}'s {}", self.program, self.option)
        } else if self.option.is_empty() {
            format!("`{}`", self.program)
        } else if self.option == "of" {
            format!("`{} {}=`", self.program, self.option)
        } else {
            format!("`{} {}`", self.program, self.option)
        }
    }

    /// What it does, for messages.
    pub(crate) fn effect(&self) -> &'static str {
        match self.does {
            Does::Code => "runs a string or file as shell code",
            Does::Names => "evaluates the array subscript of a variable name, which can run code",
            Does::Runs(_) | Does::RunsUntilSemicolon => "runs a program",
            Does::RunsNamed => "runs a program it names",
            Does::Writes => "writes files",
            Does::Deletes => "deletes files",
            Does::RunsScript => "runs a script from a file, which can run programs and write files",
            Does::Unread => "the gate cannot read for sure (it could run programs or write files)",
        }
    }

    /// Whether `words` (the program's own words after its name) give this power.
    pub(super) fn given_by(&self, words: &[&str]) -> bool {
        match self.script {
            Some(_) => !self.giving(words).is_empty(),
            None => self.option.is_empty() || words.iter().any(|word| gives(word, self.option)),
        }
    }

    /// Which of `words` (the program's words after its name) give this power,
    /// when a piece of its script does.
    pub(crate) fn giving(&self, words: &[&str]) -> Vec<usize> {
        let Some((lang, found)) = self.script else {
            return Vec::new();
        };
        findings(lang, words)
            .into_iter()
            .filter(|&(_, f)| f == found)
            .map(|(at, _)| at)
            .collect()
    }

    /// Given by a piece of its script rather than by an option.
    pub(crate) fn in_script(&self) -> bool {
        self.script.is_some()
    }
}

/// Whether `word` gives `option`: exactly or with `=VALUE`; a long `--option`
/// by any abbreviation (GNU and git accept unique ones); a one-letter `-o`
/// anywhere in a bundle of short options (`-uo`, `-ofile`).
pub(crate) fn gives(word: &str, option: &str) -> bool {
    if let Some(long) = option.strip_prefix("--") {
        return word
            .strip_prefix("--")
            .map(|rest| rest.split('=').next().unwrap_or(rest))
            .is_some_and(|name| !name.is_empty() && long.starts_with(name));
    }
    let mut letters = option.chars().skip(1);
    if let (true, Some(letter), None) = (option.starts_with('-'), letters.next(), letters.next()) {
        return word.len() > 1
            && word.starts_with('-')
            && !word.starts_with("--")
            && word[1..].contains(letter);
    }
    word == option
        || word
            .strip_prefix(option)
            .is_some_and(|rest| rest.starts_with('='))
}

impl std::fmt::Debug for Power {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.named())
    }
}
