//! The options known to be safe, for the programs people allow as read-only: a
//! prefix rule for one of these programs covers only these options (and those
//! the rule itself names), so an option nobody listed, a new one or one that
//! runs a program (`rg --pre`, `git fetch --upload-pack`), is asked. Listing
//! what is safe can be finished; listing what is dangerous cannot.

/// One program (or git or cargo subcommand) and what it may be given.
pub(super) struct Safe {
    /// The program's name, and for git and cargo the subcommand after it.
    pub(super) program: &'static str,
    pub(super) subcommand: Option<&'static str>,
    /// Options without a value (`-l`, `--all`), and long ones whose value may
    /// follow an `=` (`--color=never`).
    flags: &'static [&'static str],
    /// Options whose value is the next word, or follows `=` or the letter.
    valued: &'static [&'static str],
    /// `find`'s way: every option is one word of one dash (`-name`), never a
    /// bundle of letters.
    single_dash_words: bool,
    /// `head -20`, `tail -5`: a dash and digits is a count.
    counts: bool,
    /// `tar tf x.tar`: a first word without a dash is a bundle of letters.
    bundle_first: bool,
    /// Options followed by a command that ends at `;` or `{} +` (`find -exec`):
    /// the gate judges that command by its own rules, so its words are skipped.
    runs_until_semicolon: &'static [&'static str],
    /// How many operands (files, revisions) it may take: where one more is a
    /// file it writes (`uniq IN OUT`, `xxd IN OUT`), the bound says so.
    max_operands: Option<usize>,
    /// Operands that must be absent unless one of these options is given
    /// (`git branch NAME` makes a branch; `git branch --list NAME` lists).
    operands_only_with: &'static [&'static str],
    /// An operand holding this makes the program write (`git fetch origin
    /// main:main` moves the local branch).
    operand_never_holds: Option<char>,
}

const fn safe(
    program: &'static str,
    flags: &'static [&'static str],
    valued: &'static [&'static str],
) -> Safe {
    Safe {
        program,
        subcommand: None,
        flags,
        valued,
        single_dash_words: false,
        counts: false,
        bundle_first: false,
        runs_until_semicolon: &[],
        max_operands: None,
        operands_only_with: &[],
        operand_never_holds: None,
    }
}

const fn sub(
    program: &'static str,
    subcommand: &'static str,
    flags: &'static [&'static str],
    valued: &'static [&'static str],
) -> Safe {
    Safe {
        subcommand: Some(subcommand),
        ..safe(program, flags, valued)
    }
}

/// git's options that choose and format commits and diffs without running a
/// program (no `--ext-diff`, `--textconv`, `--output`).
#[rustfmt::skip]
const GIT_REVS: &[&str] = &["--all", "--branches", "--tags", "--remotes", "--oneline", "--graph", "--decorate", "--no-decorate", "--stat", "--shortstat", "--numstat", "--name-only", "--name-status", "--summary", "--patch", "-p", "-u", "--no-patch", "-s", "--raw", "--abbrev-commit", "--no-abbrev-commit", "--full-history", "--first-parent", "--merges", "--no-merges", "--reverse", "--date-order", "--topo-order", "--author-date-order", "--follow", "--left-right", "--cherry-pick", "--cherry-mark", "--boundary", "--walk-reflogs", "-g", "--reflog", "--source", "--full-diff", "--no-renames", "-M", "-C", "-w", "-b", "--ignore-all-space", "--ignore-space-change", "--ignore-blank-lines", "--word-diff", "--color-words", "--minimal", "--patience", "--histogram", "--cached", "--staged", "--merge-base", "-R", "--relative", "--no-relative", "--binary", "--full-index", "--exit-code", "--quiet", "-q", "--check", "-z", "--no-ext-diff", "--no-textconv", "--show-signature", "--notes", "--no-notes", "--pretty", "--format", "--date", "--diff-filter", "--abbrev", "--unified", "--stat-width", "--dirstat", "--find-renames", "--find-copies", "--ignore-submodules", "--submodule", "--word-diff-regex", "--color-moved", "--no-color-moved", "-i", "--regexp-ignore-case", "-E", "--extended-regexp", "-F", "--fixed-strings", "--all-match", "--invert-grep", "--ancestry-path", "--simplify-by-decoration", "--stdin"];

#[rustfmt::skip]
const GIT_REVS_VALUED: &[&str] = &["-n", "--max-count", "--skip", "--since", "--after", "--until", "--before", "--author", "--committer", "--grep", "-S", "-G", "-L", "-U", "--min-parents", "--max-parents", "-O", "--anchored", "--diff-algorithm", "--inter-hunk-context", "--src-prefix", "--dst-prefix", "--line-prefix", "-l"];

/// The table. A program not here keeps a prefix rule's plain meaning: the
/// words after the prefix are trusted (`docs/approvals.md` says so).
#[rustfmt::skip]
pub(super) const SAFE: &[Safe] = &[
    safe("ls", &["-a", "-A", "-l", "-h", "-R", "-t", "-S", "-r", "-1", "-d", "-F", "-i", "-n", "-s", "-G", "-g", "-o", "-p", "-u", "-c", "-U", "-X", "-v", "-x", "-C", "-m", "-L", "-H", "-k", "-N", "-Q", "-q", "-Z", "--all", "--almost-all", "--human-readable", "--recursive", "--reverse", "--directory", "--classify", "--inode", "--numeric-uid-gid", "--size", "--dereference", "--group-directories-first", "--full-time", "--time-style", "--sort", "--time", "--format", "--indicator-style", "--quoting-style", "--literal", "--escape", "--context", "--author", "--si", "--color", "--hyperlink", "--help", "--version"], &["-I", "-w", "-T", "--ignore", "--hide", "--width", "--tabsize", "--block-size"]),
    safe("cat", &["-A", "-b", "-e", "-E", "-n", "-s", "-t", "-T", "-u", "-v", "--show-all", "--number-nonblank", "--show-ends", "--number", "--squeeze-blank", "--show-tabs", "--show-nonprinting", "--help", "--version"], &[]),
    Safe { counts: true, ..safe("head", &["-q", "-v", "-z", "--quiet", "--silent", "--verbose", "--zero-terminated", "--help", "--version"], &["-n", "-c", "--lines", "--bytes"]) },
    Safe { counts: true, ..safe("tail", &["-f", "-F", "-q", "-v", "-z", "-r", "--follow", "--retry", "--quiet", "--silent", "--verbose", "--zero-terminated", "--help", "--version"], &["-n", "-c", "-s", "--lines", "--bytes", "--pid", "--sleep-interval", "--max-unchanged-stats"]) },
    safe("wc", &["-c", "-m", "-l", "-L", "-w", "--bytes", "--chars", "--lines", "--max-line-length", "--words", "--total", "--files0-from", "--help", "--version"], &[]),
    safe("grep", &["-E", "-F", "-G", "-P", "-i", "-y", "-v", "-w", "-x", "-c", "-L", "-l", "-o", "-q", "-s", "-b", "-H", "-h", "-n", "-T", "-Z", "-z", "-a", "-I", "-r", "-R", "-U", "--extended-regexp", "--fixed-strings", "--basic-regexp", "--perl-regexp", "--ignore-case", "--no-ignore-case", "--invert-match", "--word-regexp", "--line-regexp", "--count", "--color", "--colour", "--files-without-match", "--files-with-matches", "--only-matching", "--quiet", "--silent", "--no-messages", "--byte-offset", "--with-filename", "--no-filename", "--line-number", "--initial-tab", "--null", "--null-data", "--text", "--recursive", "--dereference-recursive", "--binary", "--line-buffered", "--label", "--binary-files", "--devices", "--directories", "--help", "--version"], &["-e", "-f", "-m", "-A", "-B", "-C", "-d", "-D", "--regexp", "--file", "--max-count", "--after-context", "--before-context", "--context", "--include", "--exclude", "--exclude-from", "--exclude-dir", "--group-separator"]),
    // No `--pre`, `--hostname-bin` (they run a program) or `-z` (it runs decompressors).
    safe("rg", &["-i", "-s", "-S", "-w", "-x", "-v", "-c", "-l", "-o", "-q", "-n", "-N", "-H", "-I", "-F", "-P", "-U", "-a", "-L", "-u", "-uu", "-uuu", "-p", "-0", "--ignore-case", "--case-sensitive", "--smart-case", "--word-regexp", "--line-regexp", "--invert-match", "--count", "--count-matches", "--files-with-matches", "--files-without-match", "--files", "--only-matching", "--quiet", "--line-number", "--no-line-number", "--with-filename", "--no-filename", "--no-heading", "--heading", "--fixed-strings", "--pcre2", "--multiline", "--multiline-dotall", "--text", "--follow", "--hidden", "--no-ignore", "--no-ignore-vcs", "--no-ignore-dot", "--no-ignore-global", "--no-ignore-parent", "--no-config", "--unrestricted", "--pretty", "--vimgrep", "--json", "--stats", "--column", "--null", "--sort", "--sortr", "--trim", "--color", "--colors", "--type-list", "--no-messages", "--one-file-system", "--byte-offset", "--crlf", "--passthru", "--help", "--version"], &["-e", "-f", "-g", "-t", "-T", "-m", "-A", "-B", "-C", "-r", "-d", "-j", "-M", "-E", "--regexp", "--file", "--glob", "--iglob", "--type", "--type-not", "--max-count", "--after-context", "--before-context", "--context", "--replace", "--max-depth", "--maxdepth", "--threads", "--max-columns", "--max-filesize", "--encoding", "--ignore-file", "--context-separator", "--field-match-separator", "--path-separator", "--type-add"]),
    Safe { single_dash_words: true, runs_until_semicolon: &["-exec", "-execdir", "-ok", "-okdir"], ..safe("find", &["-print", "-print0", "-ls", "-prune", "-empty", "-readable", "-writable", "-executable", "-nouser", "-nogroup", "-true", "-false", "-not", "-a", "-and", "-o", "-or", "-depth", "-xdev", "-mount", "-follow", "-noleaf", "-L", "-H", "-P", "-quit", "-daystart", "-help", "--help", "--version"], &["-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex", "-type", "-xtype", "-maxdepth", "-mindepth", "-newer", "-anewer", "-cnewer", "-mtime", "-mmin", "-atime", "-amin", "-ctime", "-cmin", "-size", "-user", "-group", "-uid", "-gid", "-perm", "-links", "-inum", "-samefile", "-regextype", "-lname", "-ilname"]) },
    // No `-x`, `--exec`, `-X`, `--exec-batch`.
    safe("fd", &["-H", "-I", "-u", "-s", "-i", "-g", "-F", "-a", "-l", "-L", "-p", "-0", "-1", "-q", "--hidden", "--no-ignore", "--no-ignore-vcs", "--unrestricted", "--case-sensitive", "--ignore-case", "--glob", "--regex", "--fixed-strings", "--absolute-path", "--list-details", "--follow", "--full-path", "--print0", "--quiet", "--show-errors", "--prune", "--one-file-system", "--color", "--help", "--version"], &["-d", "-t", "-e", "-E", "-S", "-j", "-c", "--max-depth", "--min-depth", "--exact-depth", "--type", "--extension", "--exclude", "--size", "--changed-within", "--changed-before", "--owner", "--threads", "--max-results", "--base-directory", "--search-path", "--ignore-file"]),
    // No `-o` (it writes a file).
    safe("tree", &["-a", "-d", "-l", "-f", "-x", "-q", "-N", "-Q", "-p", "-u", "-g", "-s", "-h", "-D", "-F", "-v", "-t", "-c", "-U", "-r", "-i", "-A", "-S", "-n", "-C", "-J", "-X", "--dirsfirst", "--filesfirst", "--noreport", "--prune", "--du", "--si", "--inodes", "--device", "--gitignore", "--matchdirs", "--ignore-case", "--help", "--version"], &["-L", "-P", "-I", "--filelimit", "--sort", "--charset", "--timefmt"]),
    // No `-C` (it writes a compiled magic file).
    safe("file", &["-b", "-i", "-L", "-h", "-N", "-k", "-r", "-s", "-z", "-Z", "-0", "--brief", "--mime", "--mime-type", "--mime-encoding", "--dereference", "--no-dereference", "--no-pad", "--keep-going", "--raw", "--special-files", "--uncompress", "--print0", "--extension", "--apple", "--help", "--version"], &["-f", "-F", "-m", "-e", "-P", "--files-from", "--separator", "--magic-file", "--exclude", "--parameter"]),
    safe("stat", &["-L", "-f", "-t", "--dereference", "--file-system", "--terse", "--cached", "--help", "--version"], &["-c", "--format", "--printf"]),
    safe("du", &["-a", "-b", "-c", "-D", "-h", "-H", "-k", "-l", "-L", "-m", "-P", "-S", "-s", "-x", "-0", "--all", "--apparent-size", "--bytes", "--total", "--human-readable", "--si", "--summarize", "--separate-dirs", "--one-file-system", "--dereference", "--count-links", "--inodes", "--null", "--time", "--files0-from", "--help", "--version"], &["-d", "-B", "-t", "--max-depth", "--block-size", "--threshold", "--exclude", "--exclude-from", "--time-style"]),
    safe("df", &["-a", "-h", "-H", "-i", "-k", "-l", "-P", "-T", "--all", "--human-readable", "--si", "--inodes", "--local", "--portability", "--print-type", "--total", "--sync", "--no-sync", "--output", "--help", "--version"], &["-B", "-t", "-x", "--block-size", "--type", "--exclude-type"]),
    safe("diff", &["-i", "-E", "-Z", "-b", "-w", "-B", "-a", "-c", "-u", "-e", "-n", "-y", "-l", "-p", "-q", "-s", "-r", "-N", "-t", "-T", "-d", "--ignore-case", "--ignore-tab-expansion", "--ignore-trailing-space", "--ignore-space-change", "--ignore-all-space", "--ignore-blank-lines", "--text", "--brief", "--report-identical-files", "--recursive", "--new-file", "--unidirectional-new-file", "--side-by-side", "--left-column", "--suppress-common-lines", "--show-c-function", "--expand-tabs", "--initial-tab", "--minimal", "--speed-large-files", "--strip-trailing-cr", "--normal", "--ed", "--rcs", "--color", "--no-dereference", "--help", "--version"], &["-C", "-U", "-W", "-x", "-X", "-I", "-F", "-S", "--context", "--unified", "--width", "--exclude", "--exclude-from", "--ignore-matching-lines", "--show-function-line", "--starting-file", "--label", "--from-file", "--to-file", "--tabsize", "--line-format", "--old-line-format", "--new-line-format", "--unchanged-line-format", "--old-group-format", "--new-group-format", "--changed-group-format", "--unchanged-group-format", "--horizon-lines", "--palette"]),
    safe("cmp", &["-b", "-l", "-s", "--print-bytes", "--verbose", "--quiet", "--silent", "--help", "--version"], &["-i", "-n", "--ignore-initial", "--bytes"]),
    // No `-o`/`--output` (it writes a file) or `--compress-program` (it runs one).
    safe("sort", &["-b", "-d", "-f", "-g", "-i", "-M", "-h", "-n", "-R", "-r", "-V", "-c", "-C", "-m", "-s", "-u", "-z", "--ignore-leading-blanks", "--dictionary-order", "--ignore-case", "--general-numeric-sort", "--ignore-nonprinting", "--month-sort", "--human-numeric-sort", "--numeric-sort", "--random-sort", "--reverse", "--version-sort", "--check", "--merge", "--stable", "--unique", "--zero-terminated", "--debug", "--help", "--version"], &["-k", "-t", "-S", "--key", "--field-separator", "--buffer-size", "--sort", "--parallel", "--batch-size"]),
    // A second operand is the file it writes.
    Safe { max_operands: Some(1), ..safe("uniq", &["-c", "-d", "-D", "-i", "-u", "-z", "--count", "--repeated", "--all-repeated", "--group", "--ignore-case", "--unique", "--zero-terminated", "--help", "--version"], &["-f", "-s", "-w", "--skip-fields", "--skip-chars", "--check-chars"]) },
    safe("cut", &["-n", "-s", "-z", "--complement", "--only-delimited", "--zero-terminated", "--help", "--version"], &["-b", "-c", "-d", "-f", "--bytes", "--characters", "--delimiter", "--fields", "--output-delimiter"]),
    safe("tr", &["-c", "-C", "-d", "-s", "-t", "--complement", "--delete", "--squeeze-repeats", "--truncate-set1", "--help", "--version"], &[]),
    // No `-r` (with a second operand it writes any bytes to any file); a second operand is written.
    Safe { max_operands: Some(1), single_dash_words: true, ..safe("xxd", &["-a", "-b", "-C", "-e", "-E", "-i", "-p", "-ps", "-u", "-d", "-h", "-v", "-autoskip", "-bits", "-capitalize", "-EBCDIC", "-include", "-postscript", "-plain", "-uppercase", "-version", "-help"], &["-c", "-g", "-l", "-n", "-o", "-s", "-cols", "-groupsize", "-len", "-name", "-seek"]) },
    safe("od", &["-b", "-c", "-d", "-f", "-i", "-l", "-o", "-s", "-x", "-v", "--output-duplicates", "--traditional", "--help", "--version"], &["-A", "-j", "-N", "-S", "-t", "-w", "--address-radix", "--endian", "--skip-bytes", "--read-bytes", "--strings", "--format", "--width"]),
    safe("jq", &["-n", "-r", "-j", "-a", "-s", "-c", "-C", "-M", "-S", "-e", "-R", "--null-input", "--raw-input", "--slurp", "--compact-output", "--raw-output", "--join-output", "--raw-output0", "--ascii-output", "--sort-keys", "--color-output", "--monochrome-output", "--tab", "--exit-status", "--seq", "--stream", "--stream-errors", "--unbuffered", "--help", "--version"], &["-f", "-L", "--from-file", "--indent", "--arg", "--argjson", "--slurpfile", "--rawfile", "--args", "--jsonargs"]),
    // No `-o`/`--log-file` (writes a file) or `-k` (reads key bindings that run commands).
    safe("less", &["-N", "-S", "-R", "-r", "-F", "-X", "-i", "-I", "-M", "-m", "-n", "-Q", "-s", "-w", "-e", "-E", "-f", "-g", "-G", "-J", "--LINE-NUMBERS", "--chop-long-lines", "--RAW-CONTROL-CHARS", "--quit-if-one-screen", "--no-init", "--ignore-case", "--IGNORE-CASE", "--help", "--version"], &["-p", "-x", "-y", "-z", "-b", "-h", "-j", "--pattern", "--tabs"]),
    safe("more", &["-d", "-l", "-f", "-p", "-c", "-s", "-u", "--silent", "--logical", "--no-pause", "--print-over", "--clean-print", "--squeeze", "--plain", "--help", "--version"], &["-n", "--lines"]),
    // No `-P`/`--pager`, `-H`/`--html` or `-l` with a pager: those run programs.
    safe("man", &["-a", "-f", "-k", "-w", "-W", "-d", "-D", "--all", "--whatis", "--apropos", "--where", "--path", "--where-cat", "--location", "--location-cat", "--debug", "--default", "--regex", "--wildcard", "--names-only", "--help", "--version"], &["-S", "-s", "-L", "-M", "-m", "--sections", "--locale", "--manpath", "--systems"]),
    // Only what lists an archive: no `--to-command`, `--rsh-command`, `--index-file`, `--volno-file`, `-x`.
    Safe { bundle_first: true, ..safe("tar", &["-t", "-v", "-z", "-j", "-J", "-a", "-Z", "-O", "-w", "--list", "--verbose", "--gzip", "--bzip2", "--xz", "--lzma", "--lzip", "--zstd", "--auto-compress", "--compress", "--full-time", "--numeric-owner", "--wildcards", "--no-wildcards", "--anchored", "--no-anchored", "--ignore-case", "--utc", "--quoting-style", "--help", "--version"], &["-f", "--file", "--exclude", "--exclude-from", "-T", "--files-from", "--strip-components", "--occurrence", "--blocking-factor", "-b", "--record-size"]) },
    sub("git", "status", &["-s", "--short", "-b", "--branch", "--show-stash", "--porcelain", "--long", "-v", "--verbose", "-u", "--untracked-files", "--ignored", "--ignore-submodules", "-z", "--column", "--no-column", "--ahead-behind", "--no-ahead-behind", "--renames", "--no-renames", "--find-renames", "--help"], &[]),
    sub("git", "diff", GIT_REVS, GIT_REVS_VALUED),
    Safe { counts: true, ..sub("git", "log", GIT_REVS, GIT_REVS_VALUED) },
    Safe { counts: true, ..sub("git", "show", GIT_REVS, GIT_REVS_VALUED) },
    sub("git", "ls-files", &["-c", "-d", "-m", "-o", "-i", "-s", "-u", "-k", "-t", "-v", "-f", "-z", "--cached", "--deleted", "--modified", "--others", "--ignored", "--stage", "--unmerged", "--killed", "--directory", "--no-empty-directory", "--exclude-standard", "--error-unmatch", "--full-name", "--recurse-submodules", "--eol", "--deduplicate", "--sparse", "--debug", "--abbrev", "--format", "--help"], &["-x", "-X", "--exclude", "--exclude-from", "--exclude-per-directory", "--with-tree"]),
    // No `--upload-pack` (it runs a program, on this machine for a local or ext:: remote).
    sub("git", "ls-remote", &["-h", "-t", "-b", "-q", "--heads", "--tags", "--branches", "--refs", "--quiet", "--exit-code", "--get-url", "--symref", "--sort", "--help"], &["-o", "--server-option"]),
    Safe { operand_never_holds: Some(':'), ..sub("git", "fetch", &["-q", "-v", "--quiet", "--verbose", "--all", "--tags", "--no-tags", "--dry-run", "--progress", "--no-progress", "--multiple", "--no-write-fetch-head", "--porcelain", "--help"], &["-j", "--jobs"]) },
    sub("git", "rev-parse", &["--verify", "-q", "--quiet", "--short", "--abbrev-ref", "--symbolic", "--symbolic-full-name", "--all", "--branches", "--tags", "--remotes", "--show-toplevel", "--show-cdup", "--show-prefix", "--show-superproject-working-tree", "--git-dir", "--git-common-dir", "--absolute-git-dir", "--is-inside-git-dir", "--is-inside-work-tree", "--is-bare-repository", "--is-shallow-repository", "--show-object-format", "--show-ref-format", "--local-env-vars", "--sq", "--not", "--revs-only", "--no-revs", "--flags", "--no-flags", "--default", "--path-format", "--git-path", "--help"], &[]),
    // Listing only: an operand without `--list` names a branch to make.
    Safe { operands_only_with: &["-l", "--list", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at"], ..sub("git", "branch", &["-a", "-r", "-l", "-v", "-vv", "-i", "--all", "--remotes", "--list", "--verbose", "--show-current", "--ignore-case", "--omit-empty", "--color", "--no-color", "--column", "--no-column", "--abbrev", "--no-abbrev", "--help"], &["--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "--sort", "--format"]) },
    sub("git", "blame", &["-b", "-c", "-e", "-f", "-l", "-n", "-p", "-s", "-t", "-w", "-M", "-C", "--root", "--show-stats", "--incremental", "--porcelain", "--line-porcelain", "--show-name", "--show-number", "--show-email", "--abbrev", "--color-lines", "--color-by-age", "--progress", "--no-progress", "--help"], &["-L", "-S", "--since", "--contents", "--ignore-rev", "--ignore-revs-file", "--date"]),
    // No `-O`/`--open-files-in-pager` (it runs a program).
    sub("git", "grep", &["-a", "-i", "-I", "-w", "-v", "-h", "-H", "-E", "-G", "-F", "-P", "-n", "-l", "-L", "-c", "-o", "-p", "-W", "-q", "-z", "--cached", "--untracked", "--no-index", "--no-exclude-standard", "--exclude-standard", "--recurse-submodules", "--text", "--ignore-case", "--word-regexp", "--invert-match", "--full-name", "--extended-regexp", "--basic-regexp", "--fixed-strings", "--perl-regexp", "--line-number", "--column", "--files-with-matches", "--name-only", "--files-without-match", "--count", "--color", "--no-color", "--break", "--heading", "--show-function", "--function-context", "--only-matching", "--quiet", "--null", "--all-match", "--and", "--or", "--not", "--help"], &["-e", "-f", "-A", "-B", "-C", "-m", "--max-depth", "--threads", "--after-context", "--before-context", "--context", "--max-count"]),
    // No `--config` or `-Z` (settings can name a program to run).
    sub("cargo", "metadata", &["--no-deps", "--all-features", "--no-default-features", "--offline", "--frozen", "--locked", "-q", "--quiet", "-v", "--verbose", "--color", "--help"], &["--format-version", "--features", "-F", "--filter-platform", "--manifest-path"]),
    sub("cargo", "tree", &["-i", "-d", "-e", "--invert", "--duplicates", "--no-dedupe", "--all-features", "--no-default-features", "--workspace", "--all-targets", "--offline", "--frozen", "--locked", "-q", "--quiet", "-v", "--verbose", "--color", "--help"], &["-p", "--package", "--exclude", "--edges", "--depth", "--prefix", "--charset", "-f", "--format", "--target", "--features", "-F", "--prune", "--manifest-path"]),
];

/// A word of the command as the check sees it: its text, and whether the
/// shell would expand it (then it could become any option).
pub(super) struct Arg<'a> {
    pub(super) text: &'a str,
    pub(super) literal: bool,
}

/// The entry for a command whose words start `words`, when the rule's prefix
/// (`named` words long) reaches it: a prefix of only `git` trusts every git
/// command, as before; `git log` reaches the `git log` entry.
fn entry(words: &[Arg], named: usize) -> Option<&'static Safe> {
    let program = words
        .first()
        .filter(|w| w.literal)?
        .text
        .rsplit('/')
        .next()?;
    SAFE.iter().find(|safe| {
        safe.program == program
            && match safe.subcommand {
                None => named >= 1,
                Some(sub) => named >= 2 && words.get(1).is_some_and(|w| w.literal && w.text == sub),
            }
    })
}

/// Whether every option of the command is known to be safe for its program,
/// or is one of the first `named` words, which the rule itself wrote. A
/// command whose program is not in the table is not judged here.
pub(super) fn covers(words: &[Arg], named: usize) -> bool {
    let Some(safe) = entry(words, named) else {
        return true;
    };
    let start = if safe.subcommand.is_some() { 2 } else { 1 };
    let mut reading = Reading::default();
    let mut at = start;
    while at < words.len() {
        let Some(next) = safe.read(words, at, named, &mut reading) else {
            return false;
        };
        at = next;
    }
    safe.operands_allowed(&reading)
}

/// Whether an expanded word can only become words that are not options: it
/// starts with a plain character that is not a dash (`src/*.rs`, `~/notes`), and
/// holds no `$` or backquote, whose value could split into more words (`*` alone
/// could expand to a file named `--pre=./x.sh`).
fn fixed_start(text: &str) -> bool {
    text.starts_with(|c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '_' | '~'))
        && !text.contains(['$', '`'])
}

/// What the words held, for the checks on operands.
#[derive(Default)]
struct Reading {
    operands: usize,
    /// An operand that is expanded: it may be several words.
    expanded_operand: bool,
    options: Vec<String>,
    held: bool,
    done_with_options: bool,
}

impl Safe {
    /// Reads the word at `at`; the index of the next word to read, or `None`
    /// when the word is an option not known to be safe.
    fn read(&self, words: &[Arg], at: usize, named: usize, reading: &mut Reading) -> Option<usize> {
        let word = &words[at];
        let is_named = at < named;
        let option_like = word.text.len() > 1 && word.text.starts_with('-');
        let bundle = self.bundle_first && at == 1 && !word.text.starts_with('-');
        if reading.done_with_options || !(option_like || bundle) {
            if !word.literal && !reading.done_with_options && !is_named && !fixed_start(word.text) {
                return None;
            }
            self.operand(word, reading);
            return Some(at + 1);
        }
        if word.text == "--" {
            reading.done_with_options = true;
            return Some(at + 1);
        }
        if self.counts && word.text[1..].chars().all(|c| c.is_ascii_digit()) {
            return Some(at + 1);
        }
        if self.runs_until_semicolon.contains(&word.text) {
            let end = (at + 1..words.len()).find(|&i| {
                words[i].text == ";" || (words[i].text == "+" && words[i - 1].text == "{}")
            })?;
            return Some(end + 1);
        }
        let text = if bundle {
            format!("-{}", word.text)
        } else {
            word.text.to_string()
        };
        let takes_next = self.option(&text, is_named, reading)?;
        Some(if takes_next { at + 2 } else { at + 1 })
    }

    fn operand(&self, word: &Arg, reading: &mut Reading) {
        reading.operands += 1;
        reading.expanded_operand |= !word.literal;
        reading.held |= self
            .operand_never_holds
            .is_some_and(|c| word.text.contains(c));
    }

    /// Checks one option word; whether its value is the next word.
    fn option(&self, text: &str, is_named: bool, reading: &mut Reading) -> Option<bool> {
        if text.starts_with("--") || self.single_dash_words {
            let (name, value) = match text.split_once('=') {
                Some((name, _)) => (name, true),
                None => (text, false),
            };
            reading.options.push(name.to_string());
            if self.valued.contains(&name) {
                return Some(!value);
            }
            return (is_named || self.flags.contains(&name)).then_some(false);
        }
        self.letters(text, is_named, reading)
    }

    /// `-la`, `-n5`, `-tf`: letters, each a flag, until one whose value is the
    /// rest of the word or, when nothing is left, the next word.
    fn letters(&self, text: &str, is_named: bool, reading: &mut Reading) -> Option<bool> {
        for (at, letter) in text.char_indices().skip(1) {
            let option = format!("-{letter}");
            reading.options.push(option.clone());
            if self.valued.contains(&option.as_str()) {
                return Some(at + letter.len_utf8() == text.len());
            }
            if !is_named && !self.flags.contains(&option.as_str()) {
                return None;
            }
        }
        Some(false)
    }

    fn operands_allowed(&self, reading: &Reading) -> bool {
        let within_bound = self
            .max_operands
            .is_none_or(|max| reading.operands <= max && !reading.expanded_operand);
        let listing = reading.operands == 0
            || self.operands_only_with.is_empty()
            || reading
                .options
                .iter()
                .any(|o| self.operands_only_with.contains(&o.as_str()));
        within_bound && listing && !reading.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(command: &str, named: usize) -> bool {
        let words: Vec<Arg> = command
            .split(' ')
            .map(|text| Arg {
                text,
                literal: !text.contains(['$', '*']),
            })
            .collect();
        covers(&words, named)
    }

    #[test]
    fn find_skips_the_command_it_runs() {
        assert!(check("find src -exec grep -n todo {} +", 1));
        assert!(check("find src -name x -execdir grep -n todo {} ;", 1));
        assert!(!check("find src -exec grep -n todo {}", 1));
        assert!(!check("find src -delete", 1));
    }
}
