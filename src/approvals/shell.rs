//! A Bash command read by a shell parser: its simple commands (nested ones and
//! those a program runs included), the words the shell would expand, the
//! constructs no rule can allow, and the bounds that keep the parser safe.

mod powers;
mod scripts;

use brush_parser::ast;
use brush_parser::word::{WordPiece, WordPieceWithSource};

use powers::{Does, POWERS, Wrap, table_name};
pub(super) use powers::{Power, gives};

/// The words of a command line as a shell reads them (quotes removed); plain
/// white space splits one that is not a single plain command.
pub(super) fn shell_words(text: &str) -> Vec<String> {
    prefix_words(text)
}

/// The words of a Bash rule's prefix, read like a command (so quotes work).
pub(super) fn prefix_words(prefix: &str) -> Vec<String> {
    let script = analyze(prefix);
    match script.commands.as_slice() {
        [command] if script.unprovable.is_empty() && command.words.iter().all(|w| w.literal) => {
            command.words.iter().map(|w| w.text.clone()).collect()
        }
        _ => prefix.split_whitespace().map(str::to_string).collect(),
    }
}

/// Substitutions and programs that run programs nested deeper than this are not
/// followed (the call is asked anyway).
const MAX_DEPTH: usize = 8;

/// Deeper nesting of any construct is not handed to the parser, whose recursion
/// could exhaust its stack (the call is asked anyway).
const MAX_NESTING: usize = 64;

/// Longer shell code is not parsed (the call is asked; deny rules still see the
/// raw text). With the stack below, this bound alone keeps the parser safe,
/// even from nesting the count above misses (a `]]` or `)` inside quotes): its
/// recursion needs at most about 4.7 KB of stack per byte of input (measured on
/// a debug build with `[[ ! ! … ]]`, the costliest construct; `$(` needs 4.2 KB),
/// so 16 KiB of code needs at most about 76 MB.
const MAX_CODE: usize = 16 * 1024;

/// The largest stack of the thread the parser runs on, whatever stack the
/// caller has (reserved address space; only what the parser touches is used).
const PARSE_STACK: usize = 256 * 1024 * 1024;

/// The stack for `len` bytes of code: the bound above, in proportion (16 KiB a
/// byte, over three times the 4.7 KB the costliest construct needs, so that
/// nested substitutions fit too), and at least 2 MiB. A short command gets a
/// small stack: making and freeing the whole 256 MiB cost the kernel about 2 ms
/// a call, most of a gate's time.
fn parse_stack(len: usize) -> usize {
    len.saturating_mul(16 * 1024)
        .saturating_add(2 * 1024 * 1024)
        .min(PARSE_STACK)
}

/// A command line read by the shell parser: its simple commands (those inside
/// substitutions, and those a program runs, too) and the constructs found that
/// no rule can allow.
#[derive(Debug, Default)]
pub(super) struct Script {
    pub(super) commands: Vec<Simple>,
    pub(super) unprovable: Vec<String>,
    /// Commands judged because a program runs them: each can hold more.
    wrapped_judged: usize,
    /// The code being parsed, innermost last: the parser's positions (in
    /// characters) index into it.
    code: Vec<String>,
}

/// One simple command: the words a program is started with, and what in them
/// an allow rule must name (`find -delete`, `tee`).
#[derive(Debug)]
pub(super) struct Simple {
    pub(super) words: Vec<Word>,
    pub(super) needs: Vec<&'static Power>,
}

/// A word after quote removal; `literal` is false when the shell would expand
/// it (`$VAR`, `~`, globs, braces), and then `text` is the word as written.
#[derive(Debug, Clone)]
pub(super) struct Word {
    pub(super) text: String,
    pub(super) literal: bool,
}

impl Word {
    /// The program's name without its folder.
    fn base(&self) -> &str {
        self.text.rsplit('/').next().unwrap_or_default()
    }

    /// An option, or a word whose value could be one.
    fn option_like(&self) -> bool {
        !self.literal || (self.text.len() > 1 && self.text.starts_with('-'))
    }
}

impl Simple {
    /// The words joined by spaces, a literal word holding a space, a quote or
    /// nothing quoted so that its boundaries show (`'echo /x'` is one word).
    pub(super) fn text(&self) -> String {
        let words: Vec<String> = self
            .words
            .iter()
            .map(|w| {
                let bare = !w.text.is_empty()
                    && !w
                        .text
                        .contains(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '\\'));
                if bare || !w.literal {
                    w.text.clone()
                } else {
                    shlex::try_quote(&w.text)
                        .map_or_else(|_| format!("{:?}", w.text), |q| q.into_owned())
                }
            })
            .collect();
        words.join(" ")
    }

    /// The words joined by single spaces as they are, for deny rules.
    pub(super) fn plain_text(&self) -> String {
        let words: Vec<&str> = self.words.iter().map(|w| w.text.as_str()).collect();
        words.join(" ")
    }

    /// The words quoted so that they read back the same, when all are literal.
    pub(super) fn quoted(&self) -> Option<String> {
        if !self.words.iter().all(|w| w.literal) {
            return None;
        }
        shlex::try_join(self.words.iter().map(|w| w.text.as_str())).ok()
    }
}

/// Parses a command line on a thread of its own, with a stack known to hold
/// the bounded input; never fails: what cannot be parsed, or what made the
/// parser fail, is recorded as a construct no rule can allow.
pub(super) fn analyze(command: &str) -> Script {
    let text = command.to_string();
    let parse = std::thread::Builder::new()
        .name("shell-parse".into())
        .stack_size(parse_stack(command.len()))
        .spawn(move || {
            let mut script = Script::default();
            script.source(&text, 0);
            script
        });
    let failed = |why: String| {
        let mut script = Script::default();
        script.flag(why);
        script
    };
    match parse {
        Ok(handle) => handle
            .join()
            .unwrap_or_else(|_| failed("a command the shell parser failed on".into())),
        Err(err) => failed(format!("a command that could not be analysed ({err})")),
    }
}

fn parser_options() -> brush_parser::ParserOptions {
    brush_parser::ParserOptions::default()
}

impl Script {
    fn flag(&mut self, why: impl Into<String>) {
        let why = why.into();
        if !self.unprovable.contains(&why) {
            self.unprovable.push(why);
        }
    }

    fn source(&mut self, text: &str, depth: usize) {
        if depth > MAX_DEPTH {
            self.flag("substitutions nested this deep");
            return;
        }
        if text.len() > MAX_CODE {
            self.flag(format!("shell code longer than {MAX_CODE} bytes"));
            return;
        }
        if nesting(text) > MAX_NESTING {
            self.flag(format!("more than {MAX_NESTING} levels of nesting"));
            return;
        }
        let mut parser = brush_parser::Parser::new(text.as_bytes(), &parser_options());
        match parser.parse_program() {
            Ok(program) => {
                self.code.push(text.to_string());
                for list in &program.complete_commands {
                    self.list(list, depth);
                }
                self.code.pop();
            }
            Err(err) => self.flag(format!("a command the shell parser cannot read ({err})")),
        }
    }

    /// What the parser read as `(( … ))`: arithmetic, or, where the two
    /// parentheses are apart (`( ( ls ) )`), two subshells, as Bash reads them.
    fn arithmetic(&mut self, command: &ast::ArithmeticCommand, depth: usize) {
        let at = command.loc.start.index;
        let adjacent = self
            .code
            .last()
            .is_some_and(|code| code.chars().skip(at).take(2).eq(['(', '(']));
        if adjacent {
            self.flag("arithmetic evaluation `(( … ))`");
        } else {
            self.source(&command.expr.value, depth);
        }
    }

    fn list(&mut self, list: &ast::CompoundList, depth: usize) {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first, depth);
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(pipeline) | ast::AndOr::Or(pipeline) => {
                        self.pipeline(pipeline, depth)
                    }
                }
            }
        }
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline, depth: usize) {
        for command in &pipeline.seq {
            self.command(command, depth);
        }
    }

    fn command(&mut self, command: &ast::Command, depth: usize) {
        match command {
            ast::Command::Simple(simple) => self.simple(simple, depth),
            ast::Command::Compound(compound, redirects) => {
                self.compound(compound, depth);
                self.redirects(redirects.as_ref(), depth);
            }
            ast::Command::Function(function) => {
                self.flag("a function definition (it can redefine a command)");
                self.compound(&function.body.0, depth);
                self.redirects(function.body.1.as_ref(), depth);
            }
            ast::Command::ExtendedTest(test, redirects) => {
                // Its operands may be evaluated as arithmetic, which can run code.
                self.flag("a `[[ … ]]` test");
                self.test_words(&test.expr, depth);
                self.redirects(redirects.as_ref(), depth);
            }
        }
    }

    fn compound(&mut self, compound: &ast::CompoundCommand, depth: usize) {
        use ast::CompoundCommand as C;
        match compound {
            C::Arithmetic(command) => self.arithmetic(command, depth),
            C::ArithmeticForClause(clause) => {
                self.flag("arithmetic evaluation `(( … ))`");
                self.list(&clause.body.list, depth);
            }
            C::BraceGroup(group) => self.list(&group.list, depth),
            C::Subshell(subshell) => self.list(&subshell.list, depth),
            C::ForClause(clause) => {
                self.flag("a variable assignment (`for NAME in …`)");
                for value in clause.values.iter().flatten() {
                    self.word(value, depth);
                }
                self.list(&clause.body.list, depth);
            }
            C::CaseClause(clause) => {
                self.word(&clause.value, depth);
                for item in &clause.cases {
                    for pattern in &item.patterns {
                        self.word(pattern, depth);
                    }
                    if let Some(body) = &item.cmd {
                        self.list(body, depth);
                    }
                }
            }
            C::IfClause(clause) => {
                self.list(&clause.condition, depth);
                self.list(&clause.then, depth);
                for other in clause.elses.iter().flatten() {
                    if let Some(condition) = &other.condition {
                        self.list(condition, depth);
                    }
                    self.list(&other.body, depth);
                }
            }
            C::WhileClause(clause) | C::UntilClause(clause) => {
                self.list(&clause.0, depth);
                self.list(&clause.1.list, depth);
            }
            C::Coprocess(coprocess) => self.command(&coprocess.body, depth),
        }
    }

    fn test_words(&mut self, expr: &ast::ExtendedTestExpr, depth: usize) {
        use ast::ExtendedTestExpr as T;
        match expr {
            T::And(a, b) | T::Or(a, b) => {
                self.test_words(a, depth);
                self.test_words(b, depth);
            }
            T::Not(a) | T::Parenthesized(a) => self.test_words(a, depth),
            T::UnaryTest(_, word) => {
                self.word(word, depth);
            }
            T::BinaryTest(_, left, right) => {
                self.word(left, depth);
                self.word(right, depth);
            }
        }
    }

    fn simple(&mut self, simple: &ast::SimpleCommand, depth: usize) {
        let mut words = Vec::new();
        for item in simple.prefix.iter().flat_map(|p| &p.0) {
            if let ast::CommandPrefixOrSuffixItem::AssignmentWord(_, word) = item {
                self.flag("a variable assignment before or instead of a command (`NAME=value`)");
                self.word(word, depth);
            } else {
                self.item(item, &mut words, depth);
            }
        }
        if let Some(name) = &simple.word_or_name {
            words.push(self.word(name, depth));
        }
        for item in simple.suffix.iter().flat_map(|s| &s.0) {
            self.item(item, &mut words, depth);
        }
        if !words.is_empty() {
            self.judge(words, depth, None);
        }
    }

    fn item(&mut self, item: &ast::CommandPrefixOrSuffixItem, words: &mut Vec<Word>, depth: usize) {
        use ast::CommandPrefixOrSuffixItem as I;
        match item {
            I::IoRedirect(redirect) => self.redirect(redirect, depth),
            I::Word(word) | I::AssignmentWord(_, word) => words.push(self.word(word, depth)),
            I::ProcessSubstitution(_, subshell) => {
                self.flag("process substitution `<(…)` / `>(…)`");
                self.list(&subshell.list, depth + 1);
            }
        }
    }

    /// One command as a program starts with it: what in it no rule can allow,
    /// what a rule must name, and the commands it runs, each judged as a
    /// command of its own (`behind`: the program that runs this one).
    fn judge(&mut self, words: Vec<Word>, depth: usize, behind: Option<Behind>) {
        if let Some(Behind { runner, .. }) = behind {
            for word in words[1..].iter().filter(|w| !w.literal) {
                self.flag(format!(
                    "`{}` in a command that `{runner}` runs: its value could change what runs (a `;` ends `find -exec`, a word can become an option)",
                    word.text
                ));
            }
        }
        let powers: Vec<&'static Power> = if words[0].literal {
            let name = table_name(words[0].base());
            POWERS.iter().filter(|p| p.program == name).collect()
        } else {
            self.flag(format!(
                "a command whose name is not plain text (`{}`)",
                words[0].text
            ));
            Vec::new()
        };
        if powers.is_empty() || depth > MAX_DEPTH {
            if !powers.is_empty() {
                self.flag("programs that run programs nested this deep");
            }
            self.commands.push(Simple {
                words,
                needs: Vec::new(),
            });
            return;
        }
        let (needs, wrapped) = self.powers(&powers, &words, depth, behind);
        self.commands.push(Simple { words, needs });
        for (words, behind) in wrapped {
            if self.wrapped_judged >= MAX_WRAPPED {
                self.flag("more commands run by other programs than the gate follows");
                return;
            }
            self.wrapped_judged += 1;
            self.judge(words, depth + 1, Some(behind));
        }
    }

    /// What the table says of one program's words: flags what no rule allows,
    /// returns what a rule must name and the commands the program runs.
    fn powers(
        &mut self,
        powers: &[&'static Power],
        words: &[Word],
        depth: usize,
        behind: Option<Behind>,
    ) -> (Vec<&'static Power>, Vec<(Vec<Word>, Behind)>) {
        let name = words[0].base();
        if let Some(Behind {
            runner,
            appends_input: true,
        }) = behind
        {
            self.flag(format!(
                "`{name}` behind `{runner}`: words read from its input could be options that run programs, write or delete"
            ));
        }
        let (own, runs) = own_words(powers, words);
        for word in own.iter().map(|&at| &words[at]).filter(|w| !w.literal) {
            self.flag(format!(
                "`{name}` with a word that is not plain text (`{}`): it could be an option that runs programs, writes or deletes",
                word.text
            ));
        }
        let mut needs = Vec::new();
        let own_text: Vec<&str> = own.iter().map(|&at| words[at].text.as_str()).collect();
        for &power in powers {
            if !power.given_by(&own_text) {
                continue;
            }
            match power.does {
                Does::Code | Does::Names | Does::Unread => {
                    self.flag(format!("{}, which {}", power.named(), power.effect()));
                    if !power.in_script() {
                        self.code_strings(words, depth);
                    }
                }
                Does::RunsNamed | Does::Writes | Does::Deletes | Does::RunsScript => {
                    needs.push(power)
                }
                Does::Runs(_) | Does::RunsUntilSemicolon => {}
            }
        }
        if runs.iter().any(|run| run.starts.len() > 1) {
            // Deny rules still see the readings (the first MAX_STARTS).
            self.flag(format!(
                "`{name}` with an option the gate does not know: which word starts the command it runs is unclear"
            ));
        }
        if runs.iter().any(|run| run.assignments) {
            self.flag("a variable assignment before or instead of a command (`NAME=value`)");
        }
        let wrapped = runs
            .iter()
            .flat_map(|run| {
                run.starts
                    .iter()
                    .take(MAX_STARTS)
                    .filter(|(start, end)| start < end)
                    .map(|&(start, end)| (words[start..end].to_vec(), run.behind))
            })
            .collect();
        (needs, wrapped)
    }

    /// Reads the code in `-c STRING` and the words from the program's name on
    /// as `eval` would, only so that deny rules see the commands it would run.
    fn code_strings(&mut self, words: &[Word], depth: usize) {
        let rest: Vec<&str> = words[1..].iter().map(|w| w.text.as_str()).collect();
        self.source(&rest.join(" "), depth + 1);
        for (at, word) in words.iter().enumerate().skip(1) {
            let option_c = word.text.starts_with('-') && word.text.contains('c');
            if option_c && let Some(code) = words.get(at + 1) {
                self.source(&code.text, depth + 1);
            }
        }
    }

    fn redirects(&mut self, redirects: Option<&ast::RedirectList>, depth: usize) {
        for redirect in redirects.iter().flat_map(|r| &r.0) {
            self.redirect(redirect, depth);
        }
    }

    fn redirect(&mut self, redirect: &ast::IoRedirect, depth: usize) {
        use ast::IoFileRedirectKind as K;
        use ast::IoFileRedirectTarget as T;
        match redirect {
            ast::IoRedirect::File(_, kind, target) => match target {
                T::Fd(_) => {}
                T::ProcessSubstitution(_, subshell) => {
                    self.flag("process substitution `<(…)` / `>(…)`");
                    self.list(&subshell.list, depth + 1);
                }
                T::Duplicate(word) => {
                    let word = self.word(word, depth);
                    self.duplicate(&word);
                }
                T::Filename(word) => {
                    let word = self.word(word, depth);
                    match kind {
                        K::Read => self.read_from(&word),
                        K::DuplicateInput | K::DuplicateOutput => self.duplicate(&word),
                        _ => self.write_to(&word),
                    }
                }
            },
            ast::IoRedirect::HereDocument(_, here) => self.here_document(here, depth),
            ast::IoRedirect::HereString(_, word) => {
                self.flag("a here-string (`<<<`)");
                self.word(word, depth);
            }
            ast::IoRedirect::OutputAndError(word, _) => {
                let word = self.word(word, depth);
                self.write_to(&word);
            }
        }
    }

    /// A here-document is the command's input. Quoted (`<<'EOF'`), or with
    /// nothing to expand, it is plain data, like a file read with `<`; one that
    /// expands is asked, and its substitutions are read so that deny rules see
    /// what they run.
    fn here_document(&mut self, here: &ast::IoHereDocument, depth: usize) {
        if !here.requires_expansion {
            return;
        }
        let Ok(pieces) = brush_parser::word::parse_heredoc(&here.doc.value, &parser_options())
        else {
            self.flag("a here-document (`<<`) the shell parser cannot read");
            return;
        };
        let (mut text, mut literal) = (String::new(), true);
        self.pieces(
            &here.doc.value,
            &pieces,
            &mut text,
            &mut literal,
            true,
            depth,
        );
        if !literal {
            self.flag("a here-document (`<<`) that expands `$…` or `` `…` ``");
        }
    }

    /// `>&2`, `2>&1`, `<&-` only move descriptors; `>&FILE` writes a file.
    fn duplicate(&mut self, word: &Word) {
        let fd = word.literal
            && (word.text == "-"
                || (!word.text.is_empty() && word.text.chars().all(|c| c.is_ascii_digit())));
        if !fd {
            self.write_to(word);
        }
    }

    fn write_to(&mut self, word: &Word) {
        if !(word.literal && word.text == "/dev/null") {
            self.flag(format!("output redirected to a file (`{}`)", word.text));
        }
    }

    fn read_from(&mut self, word: &Word) {
        if !word.literal || word.text.starts_with("/dev/tcp/") || word.text.starts_with("/dev/udp/")
        {
            self.flag(format!("input redirected from `{}`", word.text));
        }
    }

    /// Quote removal, recording every expansion and following substitutions.
    fn word(&mut self, word: &ast::Word, depth: usize) -> Word {
        let (mut text, mut literal) = (String::new(), true);
        match brush_parser::word::parse(&word.value, &parser_options()) {
            Ok(pieces) => self.pieces(&word.value, &pieces, &mut text, &mut literal, false, depth),
            Err(err) => {
                self.flag(format!("a word the shell parser cannot read ({err})"));
                literal = false;
            }
        }
        // `{a,b}` and `{1..3}` expand, quotes or not between their parts; `{}` does not.
        let braces = word.value.contains('{')
            && word.value.contains('}')
            && (word.value.contains(',') || word.value.contains(".."));
        if !literal || braces {
            text = word.value.clone();
        }
        Word {
            text,
            literal: literal && !braces,
        }
    }

    fn pieces(
        &mut self,
        source: &str,
        pieces: &[WordPieceWithSource],
        text: &mut String,
        literal: &mut bool,
        quoted: bool,
        depth: usize,
    ) {
        for piece in pieces {
            match &piece.piece {
                WordPiece::Text(t) => {
                    *literal &= quoted || !t.contains(['*', '?', '[', '(']);
                    text.push_str(t);
                }
                WordPiece::SingleQuotedText(t) => text.push_str(t),
                WordPiece::EscapeSequence(t) => text.push_str(&unescape(t, quoted)),
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(source, inner, text, literal, true, depth)
                }
                WordPiece::AnsiCQuotedText(_) | WordPiece::TildeExpansion(_) => *literal = false,
                WordPiece::ParameterExpansion(expr) => {
                    *literal = false;
                    if !plain_parameter(expr) {
                        let written = source
                            .get(piece.start_index..piece.end_index)
                            .unwrap_or(source);
                        self.flag(format!(
                            "a parameter expansion other than a plain `$NAME` (`{written}`)"
                        ));
                    }
                }
                WordPiece::CommandSubstitution(inner) => {
                    *literal = false;
                    self.flag("command substitution `$(…)`");
                    self.source(inner, depth + 1);
                }
                WordPiece::BackquotedCommandSubstitution(inner) => {
                    *literal = false;
                    self.flag("backquotes `…`");
                    self.source(inner, depth + 1);
                }
                WordPiece::ArithmeticExpression(_) => {
                    *literal = false;
                    self.flag("arithmetic expansion `$(( … ))`");
                }
            }
        }
    }
}

/// `$NAME` or `${NAME}` of an ordinary variable, or a number the shell keeps
/// (`$?`, `$$`, `$!`, `$#`): the only expansions whose value is plain data. Any
/// other form can run code or read state a rule cannot see: transformations
/// (`${x@P}` expands a prompt string, `$(…)` included), indirection (`${!x}`),
/// offsets and subscripts (arithmetic, which reads variables as code), defaults
/// (a word of their own), and `$_` (the last word of the previous command).
fn plain_parameter(expr: &brush_parser::word::ParameterExpr) -> bool {
    use brush_parser::word::{Parameter, ParameterExpr, SpecialParameter as S};
    match expr {
        ParameterExpr::Parameter {
            parameter,
            indirect: false,
        } => match parameter {
            Parameter::Named(name) => name != "_",
            Parameter::Special(special) => matches!(
                special,
                S::LastExitStatus
                    | S::ProcessId
                    | S::LastBackgroundProcessId
                    | S::PositionalParameterCount
            ),
            _ => false,
        },
        _ => false,
    }
}

/// Where a program that runs programs has the command it runs: its possible
/// first and last words (more than one reading when an option the table does
/// not know might take a value: the call is then asked, and deny rules see
/// each reading).
struct Run {
    starts: Vec<(usize, usize)>,
    behind: Behind,
    assignments: bool,
}

/// The program that runs a command, for the command's own judgement.
#[derive(Clone, Copy)]
struct Behind {
    runner: &'static str,
    /// It adds words read from its input to the command (`xargs`).
    appends_input: bool,
}

/// The indices of the words that are the program's own (its options and
/// operands), and the commands it runs.
fn own_words(powers: &[&'static Power], words: &[Word]) -> (Vec<usize>, Vec<Run>) {
    let mut runs = Vec::new();
    let mut theirs = vec![false; words.len()];
    for power in powers {
        match power.does {
            Does::Runs(wrap) => {
                let (mut starts, assignments) = command_starts(wrap, words);
                let first = starts.first().copied().unwrap_or(words.len());
                if words[1..first]
                    .iter()
                    .any(|w| wrap.looks_up.contains(&w.text.as_str()))
                {
                    starts.clear();
                }
                for &start in &starts {
                    theirs[start..].iter_mut().for_each(|t| *t = true);
                }
                runs.push(Run {
                    starts: starts.into_iter().map(|s| (s, words.len())).collect(),
                    behind: Behind {
                        runner: power.program,
                        appends_input: wrap.appends_input,
                    },
                    assignments,
                });
            }
            Does::RunsUntilSemicolon => {
                let mut spans = Vec::new();
                let mut at = 1;
                while at < words.len() {
                    if words[at].text == power.option {
                        let end = (at + 1..words.len())
                            .find(|&i| {
                                words[i].text == ";"
                                    || (words[i].text == "+" && words[i - 1].text == "{}")
                            })
                            .unwrap_or(words.len());
                        theirs[at + 1..end].iter_mut().for_each(|t| *t = true);
                        spans.push((at + 1, end));
                        at = end;
                    }
                    at += 1;
                }
                runs.push(Run {
                    starts: spans,
                    behind: Behind {
                        runner: power.program,
                        appends_input: false,
                    },
                    assignments: false,
                });
            }
            _ => {}
        }
    }
    let own = (1..words.len()).filter(|&at| !theirs[at]).collect();
    (own, runs)
}

/// Where the command may start after a wrapper's options, operands and
/// `NAME=value` words; an option the table does not know may take the next
/// word as its value, so both readings are followed.
fn command_starts(wrap: Wrap, words: &[Word]) -> (Vec<usize>, bool) {
    let mut starts = std::collections::BTreeSet::new();
    let mut seen = std::collections::HashSet::new();
    let mut assignments = false;
    // (index, operands still to skip, options ended)
    let mut todo = vec![(1usize, wrap.operands, false)];
    while let Some(state) = todo.pop() {
        if !seen.insert(state) {
            continue;
        }
        let (at, left, ended) = state;
        let Some(word) = words.get(at) else {
            continue;
        };
        let text = word.text.as_str();
        if !ended && word.literal && text == "--" {
            todo.push((at + 1, left, true));
        } else if !ended && word.option_like() {
            let attached = text.starts_with("--") && text.contains('=')
                || wrap.valued.iter().any(|v| {
                    v.len() == 2 && text.len() > 2 && text.starts_with(v) && !text.starts_with("--")
                });
            let number = text
                .strip_prefix('-')
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
            if wrap.valued.contains(&text) {
                todo.push((at + 2, left, false));
            } else if attached || number || wrap.flags.contains(&text) {
                todo.push((at + 1, left, false));
            } else {
                todo.push((at + 1, left, false));
                todo.push((at + 2, left, false));
            }
        } else if left == wrap.operands && word.literal && is_assignment(text) {
            assignments = true;
            todo.push((at + 1, left, ended));
        } else if left > 0 {
            todo.push((at + 1, left - 1, true));
        } else {
            starts.insert(at);
        }
    }
    (starts.into_iter().collect(), assignments)
}

/// Deny rules see at most this many readings of where a wrapped command starts.
const MAX_STARTS: usize = 8;

/// Commands run by other programs are judged up to this many in one call (the
/// call is asked past it): readings of unknown options multiply at each level.
const MAX_WRAPPED: usize = 256;

/// `NAME=value`, as `env` and `sudo` read it.
fn is_assignment(text: &str) -> bool {
    text.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// How deep the parser could recurse, counted without regard to quoting (an
/// overestimate only makes the call asked): brackets of every kind (`(`, `$(`,
/// `((`, `{`, `${`, `[`, `[[`), compound commands, backquotes, and inside
/// `[[ … ]]` every `!`, `&&` and `||` (each is one more level there).
fn nesting(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut tests: Vec<usize> = Vec::new();
    let mut backquoted = false;
    let mut escaped = false;
    for token in text.split(|c: char| c.is_whitespace() || c == ';') {
        if token.contains("[[") {
            tests.push(depth);
        }
        for c in token.chars() {
            match c {
                '(' | '{' | '[' => depth += 1,
                ')' | '}' | ']' => depth = depth.saturating_sub(1),
                '`' if escaped => depth += 1,
                '`' if backquoted => depth = depth.saturating_sub(1),
                '`' => depth += 1,
                '!' if !tests.is_empty() => depth += 1,
                _ => {}
            }
            if c == '`' && !escaped {
                backquoted = !backquoted;
            }
            escaped = c == '\\' && !escaped;
            deepest = deepest.max(depth);
        }
        if !tests.is_empty() {
            depth += token.matches("&&").count() + token.matches("||").count();
        }
        match token {
            "if" | "while" | "until" | "for" | "case" | "select" | "coproc" | "function" => {
                depth += 1
            }
            "fi" | "done" | "esac" => depth = depth.saturating_sub(1),
            _ => {}
        }
        deepest = deepest.max(depth);
        if token.contains("]]")
            && let Some(before) = tests.pop()
        {
            depth = before;
        }
    }
    deepest
}

/// `\x` is `x` outside quotes; inside double quotes only `$`, `` ` ``, `"`, `\`
/// and a newline lose their backslash.
fn unescape(sequence: &str, quoted: bool) -> String {
    let rest = sequence.strip_prefix('\\').unwrap_or(sequence);
    match rest {
        "\n" => String::new(),
        "$" | "`" | "\"" | "\\" => rest.to_string(),
        _ if quoted => sequence.to_string(),
        _ => rest.to_string(),
    }
}
