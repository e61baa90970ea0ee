//! Readers of the scripts `sed` and `awk` take as words: where a script runs a
//! program or writes a file, which no option shows. Each reads conservatively:
//! what it cannot read for sure counts as a power, never as harmless.

/// A language whose script is read for powers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Lang {
    Sed,
    Awk,
}

/// What a piece of a script does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Found {
    /// Runs shell code (`sed`'s `e`, awk's `system()`).
    Runs,
    /// Runs through a pipe (awk's `print | "cmd"`, `"cmd" | getline`).
    Pipe,
    /// Writes a file (`sed`'s `w`, awk's `print > "f"`, `gawk -o`).
    Writes,
    /// Runs a script from a file the gate cannot see (`-f FILE`).
    ScriptFile,
    /// Something the reader cannot read for sure.
    Unknown,
}

/// The words after the program that give each power (indices into `words`).
pub(super) fn findings(lang: Lang, words: &[&str]) -> Vec<(usize, Found)> {
    match lang {
        Lang::Sed => sed(words),
        Lang::Awk => awk(words),
    }
}

/// How an option of a program takes its value.
#[derive(Clone, Copy, PartialEq)]
enum Takes {
    Nothing,
    /// The rest of the word, or else the next word.
    Value,
    /// Only the rest of the word (`-i.bak`, `--dump-variables=f`).
    Attached,
}

/// One option a reader knows: its short letter, its long name, what it takes
/// and what it does (None: its value, if any, is the script text).
struct Opt {
    short: char,
    long: &'static str,
    takes: Takes,
    does: Option<Found>,
    script: bool,
}

const fn opt(short: char, long: &'static str, takes: Takes, does: Option<Found>) -> Opt {
    Opt {
        short,
        long,
        takes,
        does,
        script: false,
    }
}

const fn text(short: char, long: &'static str) -> Opt {
    Opt {
        script: true,
        ..opt(short, long, Takes::Value, None)
    }
}

use Takes::{Attached, Nothing, Value};

/// GNU sed's options (`-i` is in the table of options already).
const SED: &[Opt] = &[
    text('e', "expression"),
    opt('f', "file", Value, Some(Found::ScriptFile)),
    opt('n', "quiet", Nothing, None),
    opt('\0', "silent", Nothing, None),
    opt('E', "regexp-extended", Nothing, None),
    opt('r', "", Nothing, None),
    opt('s', "separate", Nothing, None),
    opt('u', "unbuffered", Nothing, None),
    opt('z', "null-data", Nothing, None),
    opt('l', "line-length", Value, None),
    opt('i', "in-place", Attached, None),
    opt('b', "binary", Nothing, None),
    opt('\0', "follow-symlinks", Nothing, None),
    opt('\0', "posix", Nothing, None),
    opt('\0', "debug", Nothing, None),
    opt('\0', "sandbox", Nothing, None),
    opt('\0', "help", Nothing, None),
    opt('\0', "version", Nothing, None),
];

/// awk's options, gawk's included (mawk's `-W` is not read: it is unknown).
const AWK: &[Opt] = &[
    text('e', "source"),
    opt('f', "file", Value, Some(Found::ScriptFile)),
    opt('E', "exec", Value, Some(Found::ScriptFile)),
    opt('i', "include", Value, Some(Found::ScriptFile)),
    opt('l', "load", Value, Some(Found::Runs)),
    opt('d', "dump-variables", Attached, Some(Found::Writes)),
    opt('o', "pretty-print", Attached, Some(Found::Writes)),
    opt('p', "profile", Attached, Some(Found::Writes)),
    opt('F', "field-separator", Value, None),
    opt('v', "assign", Value, None),
    opt('b', "characters-as-bytes", Nothing, None),
    opt('c', "traditional", Nothing, None),
    opt('C', "copyright", Nothing, None),
    opt('g', "gen-pot", Nothing, None),
    opt('h', "help", Nothing, None),
    opt('M', "bignum", Nothing, None),
    opt('n', "non-decimal-data", Nothing, None),
    opt('N', "use-lc-numeric", Nothing, None),
    opt('O', "optimize", Nothing, None),
    opt('P', "posix", Nothing, None),
    opt('r', "re-interval", Nothing, None),
    opt('s', "no-optimize", Nothing, None),
    opt('S', "sandbox", Nothing, None),
    opt('t', "lint-old", Nothing, None),
    opt('V', "version", Nothing, None),
    opt('L', "lint", Attached, None),
];

/// The program's options read: the scripts given by option (index of the
/// word holding each), the powers found in options, and the operands.
#[derive(Default)]
struct Read {
    scripts: Vec<(usize, String)>,
    found: Vec<(usize, Found)>,
    operands: Vec<usize>,
    /// Options were given that replace the script operand (`-e`, `-f`).
    replaced: bool,
}

/// Reads options GNU-style: bundles of short ones, values attached or in the
/// next word, unique abbreviations of long ones; `stops`: options end at the
/// first operand (awk), or go on after it (sed, GNU getopt).
fn read_options(words: &[&str], table: &[Opt], stops: bool) -> Read {
    let mut read = Read::default();
    let mut at = 0;
    let mut ended = false;
    while at < words.len() {
        let word = words[at];
        if ended || word == "-" || !word.starts_with('-') {
            read.operands.push(at);
            ended |= stops;
        } else if word == "--" {
            ended = true;
        } else if let Some(long) = word.strip_prefix("--") {
            at = read.long(words, at, long, table);
        } else {
            at = read.short(words, at, table);
        }
        at += 1;
    }
    read
}

impl Read {
    /// One `--name[=value]`; returns the index of the last word it used.
    fn long(&mut self, words: &[&str], at: usize, long: &str, table: &[Opt]) -> usize {
        let (name, attached) = match long.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (long, None),
        };
        let matching: Vec<&Opt> = table
            .iter()
            .filter(|o| !o.long.is_empty() && o.long.starts_with(name))
            .collect();
        let opt = match (table.iter().find(|o| o.long == name), matching.as_slice()) {
            (Some(exact), _) => Some(exact),
            (None, [only]) => Some(*only),
            _ => None,
        };
        match (opt.map(|o| o.takes), attached) {
            (_, Some(value)) => self.took(at, opt, Some((at, value))),
            (Some(Value), None) => {
                let value = words.get(at + 1).map(|w| (at + 1, w.to_string()));
                self.took(at, opt, value);
                return at + 1;
            }
            _ => self.took(at, opt, None),
        }
        at
    }

    /// One bundle of short options; returns the index of the last word it used.
    fn short(&mut self, words: &[&str], at: usize, table: &[Opt]) -> usize {
        let letters: Vec<char> = words[at].chars().skip(1).collect();
        for (i, &letter) in letters.iter().enumerate() {
            let opt = table.iter().find(|o| o.short == letter);
            let rest: String = letters[i + 1..].iter().collect();
            match opt.map(|o| o.takes) {
                Some(Nothing) => {
                    self.took(at, opt, None);
                    continue;
                }
                Some(Attached) => self.took(at, opt, (!rest.is_empty()).then_some((at, rest))),
                Some(Value) if !rest.is_empty() => self.took(at, opt, Some((at, rest))),
                Some(Value) => {
                    let value = words.get(at + 1).map(|w| (at + 1, w.to_string()));
                    self.took(at, opt, value);
                    return at + 1;
                }
                None => self.took(at, None, None),
            }
            break;
        }
        at
    }

    /// An option at word `at`, with its value and the word holding it.
    fn took(&mut self, at: usize, opt: Option<&Opt>, value: Option<(usize, String)>) {
        let Some(opt) = opt else {
            self.found.push((at, Found::Unknown));
            return;
        };
        if let Some(does) = opt.does {
            self.found.push((at, does));
            if let Some((value_at, _)) = value.as_ref().filter(|(v, _)| *v != at) {
                self.found.push((*value_at, does));
            }
            self.replaced |= does == Found::ScriptFile;
        }
        if opt.script {
            self.replaced = true;
            self.scripts.push(value.unwrap_or((at, String::new())));
        }
    }
}

/// The scripts a program runs: those given by option, or else its first
/// operand (`with_first`: the first operand is read as well, when reading it
/// costs nothing but a needless question).
fn scripts(words: &[&str], read: &Read, with_first: bool) -> Vec<(usize, String)> {
    let mut scripts = read.scripts.clone();
    if let Some(&first) = read.operands.first()
        && (!read.replaced || with_first)
    {
        scripts.push((first, words[first].to_string()));
    }
    scripts
}

fn sed(words: &[&str]) -> Vec<(usize, Found)> {
    let read = read_options(words, SED, false);
    let mut found = read.found.clone();
    for (at, script) in scripts(words, &read, false) {
        found.extend(sed_script(&script).into_iter().map(|f| (at, f)));
    }
    found
}

fn awk(words: &[&str]) -> Vec<(usize, Found)> {
    let read = read_options(words, AWK, true);
    let mut found = read.found.clone();
    for (at, script) in scripts(words, &read, true) {
        found.extend(awk_program(&script).into_iter().map(|f| (at, f)));
    }
    found
}

/// What a GNU sed script does beyond reading and printing.
pub(super) fn sed_script(script: &str) -> Vec<Found> {
    let mut reader = SedReader {
        chars: script.chars().collect(),
        at: 0,
        found: Vec::new(),
    };
    if reader.commands().is_none() {
        reader.found.push(Found::Unknown);
    }
    reader.found
}

struct SedReader {
    chars: Vec<char>,
    at: usize,
    found: Vec<Found>,
}

impl SedReader {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek();
        self.at += 1;
        c
    }

    fn skip_blanks(&mut self) {
        while self.peek().is_some_and(|c| c == ' ' || c == '\t') {
            self.at += 1;
        }
    }

    /// The rest of the line (a file name, a label, text): it ends the command.
    fn rest_of_line(&mut self) {
        while self.next().is_some_and(|c| c != '\n') {}
    }

    /// To the next `;` or newline (labels, `q`'s exit code): GNU ends them
    /// there; reading on from a `;` only reads more.
    fn skip_label(&mut self) {
        while self.peek().is_some_and(|c| c != '\n' && c != ';') {
            self.at += 1;
        }
    }

    /// A delimited part (`/re/`, `s`'s replacement): to the unescaped `delim`.
    fn delimited(&mut self, delim: char) -> Option<()> {
        loop {
            match self.next()? {
                '\\' => {
                    self.next()?;
                }
                '\n' if delim != '\n' => return None,
                c if c == delim => return Some(()),
                _ => {}
            }
        }
    }

    fn address(&mut self) -> Option<()> {
        match self.peek() {
            Some('/') => {
                self.at += 1;
                self.delimited('/')?;
            }
            Some('\\') => {
                self.at += 1;
                let delim = self.next()?;
                self.delimited(delim)?;
            }
            Some(c) if c.is_ascii_digit() || c == '$' => {
                self.at += 1;
                while self.peek().is_some_and(|c| c.is_ascii_digit() || c == '~') {
                    self.at += 1;
                }
                return Some(());
            }
            _ => return Some(()),
        }
        while self.peek().is_some_and(|c| c == 'I' || c == 'M') {
            self.at += 1;
        }
        Some(())
    }

    fn commands(&mut self) -> Option<()> {
        loop {
            while self
                .peek()
                .is_some_and(|c| c.is_whitespace() || c == ';' || c == '}')
            {
                self.at += 1;
            }
            if self.peek().is_none() {
                return Some(());
            }
            self.address()?;
            self.skip_blanks();
            if self.peek() == Some(',') {
                self.at += 1;
                self.skip_blanks();
                if self.peek().is_some_and(|c| c == '+' || c == '~') {
                    self.at += 1;
                }
                self.address()?;
                self.skip_blanks();
            }
            while self
                .peek()
                .is_some_and(|c| c == '!' || c == ' ' || c == '\t')
            {
                self.at += 1;
            }
            self.command()?;
        }
    }

    fn command(&mut self) -> Option<()> {
        match self.next()? {
            '{' | '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x' | 'z'
            | 'F' => {}
            '#' | 'a' | 'i' | 'c' => self.text()?,
            'r' | 'R' => self.rest_of_line(),
            'w' | 'W' => {
                self.found.push(Found::Writes);
                self.rest_of_line();
            }
            'e' => {
                self.found.push(Found::Runs);
                self.rest_of_line();
            }
            ':' | 'b' | 't' | 'T' | 'l' | 'L' | 'q' | 'Q' | 'v' => self.skip_label(),
            's' => self.substitute()?,
            'y' => {
                let delim = self.next()?;
                self.delimited(delim)?;
                self.delimited(delim)?;
            }
            _ => return None,
        }
        Some(())
    }

    /// `a`, `i`, `c` text and comments: to the end of the line, and on over
    /// lines that end in a backslash.
    fn text(&mut self) -> Option<()> {
        let mut escaped = false;
        while let Some(c) = self.next() {
            if c == '\n' && !escaped {
                break;
            }
            escaped = c == '\\' && !escaped;
        }
        Some(())
    }

    fn substitute(&mut self) -> Option<()> {
        let delim = self.next()?;
        if delim == '\n' || delim == '\\' {
            return None;
        }
        self.delimited(delim)?;
        self.delimited(delim)?;
        loop {
            match self.peek() {
                Some('g' | 'p' | 'i' | 'I' | 'm' | 'M') => self.at += 1,
                Some(c) if c.is_ascii_digit() => self.at += 1,
                Some('e') => {
                    self.found.push(Found::Runs);
                    self.at += 1;
                }
                Some('w') => {
                    self.found.push(Found::Writes);
                    self.rest_of_line();
                    return Some(());
                }
                Some(' ' | '\t' | ';' | '\n' | '}') | None => return Some(()),
                Some(_) => return None,
            }
        }
    }
}

/// What the token before a `/` says about it.
#[derive(Clone, Copy, PartialEq)]
enum Before {
    /// An operand is wanted: `/` starts a regex.
    Operator,
    /// An operand ended: `/` divides.
    Operand,
    /// Either (`i++ /`, `getline /`): not read.
    Unsure,
}

/// What an awk program does beyond reading and printing to its output: a
/// `|` that is not `||` (a pipe, gawk's `|&`), `system(`, gawk's `@` (indirect
/// calls, `@load`, `@include`), and `>` inside a `print`/`printf` statement
/// (a write, or a comparison the gate does not tell apart).
pub(super) fn awk_program(program: &str) -> Vec<Found> {
    let chars: Vec<char> = program.chars().collect();
    let mut found = Vec::new();
    let mut before = Before::Operator;
    let mut printing = false;
    let mut at = 0;
    while let Some(&c) = chars.get(at) {
        at += 1;
        match c {
            ' ' | '\t' | '\r' => {}
            '\\' if chars.get(at) == Some(&'\n') => at += 1,
            '#' => {
                while chars.get(at).is_some_and(|&c| c != '\n') {
                    at += 1;
                }
            }
            '"' => {
                if !skip_to(&chars, &mut at, '"') {
                    found.push(Found::Unknown);
                    break;
                }
                before = Before::Operand;
            }
            '/' if before == Before::Operator => {
                if !skip_to(&chars, &mut at, '/') {
                    found.push(Found::Unknown);
                    break;
                }
                before = Before::Operand;
            }
            '/' if before == Before::Unsure => {
                found.push(Found::Unknown);
                break;
            }
            '|' if chars.get(at) == Some(&'|') => {
                at += 1;
                before = Before::Operator;
            }
            '|' => {
                found.push(Found::Pipe);
                before = Before::Operator;
            }
            '@' => {
                found.push(Found::Runs);
                before = Before::Operator;
            }
            '>' if printing => {
                if chars.get(at) == Some(&'>') {
                    at += 1;
                }
                found.push(Found::Writes);
                before = Before::Operator;
            }
            // A newline after `,`, `&&`, `||` … goes on with the statement.
            '\n' if before == Before::Operator => {}
            '\n' | ';' | '{' | '}' => {
                printing = false;
                before = Before::Operator;
            }
            '+' | '-' if chars.get(at) == Some(&c) => {
                at += 1;
                before = Before::Unsure;
            }
            ')' | ']' => before = Before::Operand,
            c if is_name(c) => {
                let start = at - 1;
                while chars.get(at).is_some_and(|&c| is_name(c)) {
                    at += 1;
                }
                let word: String = chars[start..at].iter().collect();
                before = awk_word(&word, &mut found, &mut printing);
            }
            _ => before = Before::Operator,
        }
    }
    found
}

/// A letter of a name or a number.
fn is_name(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

/// A name or number in an awk program, and what it says about a `/` after it.
fn awk_word(word: &str, found: &mut Vec<Found>, printing: &mut bool) -> Before {
    match word {
        "print" | "printf" => {
            *printing = true;
            Before::Operator
        }
        "system" => {
            found.push(Found::Runs);
            Before::Operator
        }
        "getline" => Before::Unsure,
        "return" | "in" | "case" | "do" | "else" | "delete" | "exit" => Before::Operator,
        _ => Before::Operand,
    }
}

/// Past the unescaped `end` of a string or regex; false when there is none
/// before the line ends.
fn skip_to(chars: &[char], at: &mut usize, end: char) -> bool {
    while let Some(&c) = chars.get(*at) {
        *at += 1;
        match c {
            '\\' => *at += 1,
            '\n' => return false,
            c if c == end => return true,
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sed_words(words: &[&str]) -> Vec<Found> {
        sed(words).into_iter().map(|(_, f)| f).collect()
    }

    fn awk_words(words: &[&str]) -> Vec<Found> {
        awk(words).into_iter().map(|(_, f)| f).collect()
    }

    #[test]
    fn sed_scripts_that_only_read_and_print_find_nothing() {
        for script in [
            "1,5p",
            "s/a/b/g",
            "s|/usr|/opt|2p",
            "/^#/d; s/x/y/w",
            "$!N;P;D",
            "/start/,/end/{s/a/b/;p}",
            "y/abc/xyz/",
            "1~2d",
            "0,/re/I s/x/y/",
            "/x/a\\\nappended text w /etc/x",
            ":a;N;$!ba;s/\\n/ /g",
            "\\,x,p",
            "l 40",
            "r /etc/hosts",
            "# comment with w and e\np",
        ] {
            let found = sed_script(script);
            let expected: &[Found] = if script.contains("s/x/y/w") {
                &[Found::Writes]
            } else {
                &[]
            };
            assert_eq!(found, expected, "{script:?}");
        }
        assert!(sed_words(&["-n", "1,5p", "f"]).is_empty());
        assert!(sed_words(&["-n", "-e", "p", "-e", "s/a/b/", "f"]).is_empty());
        assert!(sed_words(&["--quiet", "--expression=1p", "w"]).is_empty());
        assert!(sed_words(&["-E", "s/(a)/\\1/", "--", "-x"]).is_empty());
    }

    #[test]
    fn sed_commands_and_flags_that_write_or_run_are_found() {
        assert_eq!(sed_script("1w /tmp/x"), [Found::Writes]);
        assert_eq!(sed_script("/x/W out"), [Found::Writes]);
        assert_eq!(sed_script("s/a/b/w out"), [Found::Writes]);
        assert_eq!(sed_script("s/a/b/gw out"), [Found::Writes]);
        assert_eq!(sed_script("1e id"), [Found::Runs]);
        assert_eq!(sed_script("e"), [Found::Runs]);
        assert_eq!(sed_script("s/.*/id/e"), [Found::Runs]);
        assert_eq!(sed_script("p;{x;w out\n}"), [Found::Writes]);
        assert_eq!(sed_script("1!e id"), [Found::Runs]);
        assert_eq!(sed_script("1 , 3 e id"), [Found::Runs]);
        // What the reader does not know is not taken as harmless.
        assert_eq!(sed_script("k"), [Found::Unknown]);
        assert_eq!(sed_script("s/a/b"), [Found::Unknown]);
        assert_eq!(sed_script("s/a/b/X"), [Found::Unknown]);
        // Where the script is: `-e`, bundled, attached, long, or the operand.
        assert_eq!(sed_words(&["-n", "1w /tmp/x", "f"]), [Found::Writes]);
        assert_eq!(sed_words(&["-ne", "1e id", "f"]), [Found::Runs]);
        assert_eq!(sed_words(&["-e1e id", "f"]), [Found::Runs]);
        assert_eq!(sed_words(&["--expr=1e id", "f"]), [Found::Runs]);
        assert_eq!(sed_words(&["--expression", "1w x", "f"]), [Found::Writes]);
        assert_eq!(sed_words(&["f", "-e", "1w x"]), [Found::Writes]);
        assert_eq!(
            sed_words(&["-f", "x.sed", "f"]),
            [Found::ScriptFile, Found::ScriptFile]
        );
        assert_eq!(sed_words(&["-nf", "x.sed"])[0], Found::ScriptFile);
        assert_eq!(sed_words(&["--frobnicate", "p"]), [Found::Unknown]);
        assert_eq!(sed_words(&["-k", "p"]), [Found::Unknown]);
    }

    #[test]
    fn awk_programs_that_only_read_and_print_find_nothing() {
        for program in [
            "{print $1}",
            "$1 > 5",
            "$1 > 5 { print $2 }",
            "NR > 1 && $3 >= 10 || $4 < 2",
            "/a|b/ { n++ } END { print n }",
            "{ print \"a|b > c\" }",
            "{ x = $1 / 2; print x }",
            "BEGIN { FS = \",\" } { s += $2 } END { printf \"%d\\n\", s }",
            "{ while ((getline line < \"f\") > 0) n++ }",
            "# system(\"id\") in a comment\n{ print }",
            "$0 ~ /x>y/",
        ] {
            assert_eq!(awk_program(program), [], "{program:?}");
        }
        assert!(awk_words(&["-F,", "-v", "n=1", "{print $n}", "f"]).is_empty());
        assert!(awk_words(&["--field-separator=:", "{print $1}"]).is_empty());
    }

    #[test]
    fn awk_programs_that_write_or_run_are_found() {
        assert_eq!(awk_program("BEGIN{system(\"id\")}"), [Found::Runs]);
        assert_eq!(awk_program("{ system (\"id\") }"), [Found::Runs]);
        assert_eq!(awk_program("{print > \"out\"}"), [Found::Writes]);
        assert_eq!(awk_program("{print $1 >> \"out\"}"), [Found::Writes]);
        assert_eq!(awk_program("{printf \"%s\", $1 > $2}"), [Found::Writes]);
        assert_eq!(awk_program("{print | \"sh\"}"), [Found::Pipe]);
        assert_eq!(awk_program("BEGIN{\"id\" | getline x}"), [Found::Pipe]);
        assert_eq!(awk_program("{print |& \"cmd\"}"), [Found::Pipe]);
        assert_eq!(
            awk_program("BEGIN{f=\"system\"; @f(\"id\")}"),
            [Found::Runs]
        );
        assert_eq!(awk_program("@load \"x\""), [Found::Runs]);
        // A `/` after `getline` or `++` may start a regex or divide: not read.
        assert_eq!(awk_program("{ n++ / 2 }"), [Found::Unknown]);
        assert_eq!(awk_program("{ print \"x }"), [Found::Unknown]);
        // A `"` inside a regex does not start a string hiding what follows.
        assert_eq!(awk_program("/\"/ { system(\"id\") }"), [Found::Runs]);
        assert_eq!(
            awk_words(&["-f", "x.awk", "f"]),
            [Found::ScriptFile, Found::ScriptFile]
        );
        assert_eq!(awk_words(&["-l", "ext"])[0], Found::Runs);
        assert_eq!(awk_words(&["-o", "{print}"])[0], Found::Writes);
        assert_eq!(awk_words(&["-W", "exec", "x"]), [Found::Unknown]);
        assert_eq!(awk_words(&["-e", "BEGIN{system(\"id\")}"]), [Found::Runs]);
        assert_eq!(
            awk_words(&["--source=BEGIN{system(\"id\")}"]),
            [Found::Runs]
        );
    }
}
