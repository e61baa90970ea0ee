//! Codex's `apply_patch` format read without applying it: which files a patch
//! adds, changes, moves and deletes, so that the gate can show them and path
//! rules can judge each one.
//!
//! The reading is strict: anything it does not understand is an error, and an
//! unreadable patch is asked of a human, never allowed by a rule. Any line that
//! looks like a header once trimmed must be a known one, so that a path Codex
//! would act on cannot hide from the rules.

/// What a patch does to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Add,
    Update,
    /// The new name of a file an `Update File` section moves.
    MoveTo,
    Delete,
}

impl Op {
    pub fn word(self) -> &'static str {
        match self {
            Op::Add => "add",
            Op::Update => "update",
            Op::MoveTo => "move to",
            Op::Delete => "delete",
        }
    }
}

/// One file a patch touches, as written in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Touched {
    pub op: Op,
    pub path: String,
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const END_OF_FILE: &str = "*** End of File";
const HEREDOC: &[&str] = &["<<EOF", "<<'EOF'", "<<\"EOF\""];
const HEADERS: &[(&str, Op)] = &[
    ("*** Add File:", Op::Add),
    ("*** Update File:", Op::Update),
    ("*** Move to:", Op::MoveTo),
    ("*** Delete File:", Op::Delete),
];

/// What the section being read allows on its lines.
#[derive(Clone, Copy, PartialEq)]
enum Section {
    None,
    Add,
    /// An `Update File` header was just read: a `Move to` may follow.
    UpdateHead,
    Update,
    Delete,
}

/// The files `patch` touches, in order, or why it cannot be read.
pub fn touched(patch: &str) -> Result<Vec<Touched>, String> {
    let lines: Vec<&str> = patch.lines().collect();
    let first = lines.iter().position(|l| !l.trim().is_empty());
    let last = lines.iter().rposition(|l| !l.trim().is_empty());
    let (Some(mut first), Some(mut last)) = (first, last) else {
        return Err("the patch is empty".into());
    };
    // Codex also applies a patch wrapped as a here-document (`<<'EOF'` … `EOF`).
    if last > first + 1 && HEREDOC.contains(&lines[first].trim()) && lines[last].trim() == "EOF" {
        first += 1;
        last -= 1;
    }
    if lines[first].trim() != BEGIN {
        return Err(format!("it does not start with `{BEGIN}`"));
    }
    if last == first || lines[last].trim() != END {
        return Err(format!("it does not end with `{END}`"));
    }
    let mut files = Vec::new();
    let mut section = Section::None;
    for (index, line) in lines[first + 1..last].iter().enumerate() {
        let at = first + index + 2;
        let trimmed = line.trim();
        if let Some((op, path)) = header(trimmed) {
            let path = path.map_err(|why| format!("line {at}: {why}"))?;
            section = match (op, section) {
                (Op::MoveTo, Section::UpdateHead) => Section::Update,
                (Op::MoveTo, _) => {
                    return Err(format!(
                        "line {at}: `*** Move to:` must follow an `*** Update File:` line"
                    ));
                }
                (Op::Add, _) => Section::Add,
                (Op::Update, _) => Section::UpdateHead,
                (Op::Delete, _) => Section::Delete,
            };
            files.push(Touched { op, path });
            continue;
        }
        if trimmed == END_OF_FILE && is_update(section) {
            continue;
        }
        if trimmed.starts_with("***") {
            return Err(format!(
                "line {at}: `{}` is not a patch header",
                clip(trimmed)
            ));
        }
        section = body_line(line, section).map_err(|why| format!("line {at}: {why}"))?;
    }
    if files.is_empty() {
        return Err("it touches no file".into());
    }
    Ok(files)
}

fn is_update(section: Section) -> bool {
    matches!(section, Section::Update | Section::UpdateHead)
}

/// A header line: its operation and its path (or why the path is not one).
fn header(trimmed: &str) -> Option<(Op, Result<String, String>)> {
    HEADERS.iter().find_map(|(marker, op)| {
        let rest = trimmed.strip_prefix(marker)?;
        let path = rest.trim();
        let checked = if path.is_empty() {
            Err(format!("`{marker}` names no file"))
        } else if path.contains('\0') {
            Err(format!("`{marker}` names a file with a NUL byte"))
        } else {
            Ok(path.to_string())
        };
        Some((*op, checked))
    })
}

/// A line inside a file's section: content of an added file, or a hunk line.
fn body_line(line: &str, section: Section) -> Result<Section, String> {
    match section {
        Section::None => Err("text before the first file header".into()),
        Section::Delete => Err("a deleted file's section holds text".into()),
        Section::Add if line.starts_with('+') => Ok(Section::Add),
        Section::Add => Err("an added file's lines must start with `+`".into()),
        Section::UpdateHead | Section::Update => {
            let hunk = line.is_empty() || line.starts_with(['@', ' ', '-', '+']);
            if hunk {
                Ok(Section::Update)
            } else {
                Err(format!("`{}` is not a hunk line", clip(line)))
            }
        }
    }
}

fn clip(text: &str) -> String {
    crate::fmt::head_and_tail(text, 60)
}

/// `add a.txt, update src/lib.rs → src/main.rs, delete old.txt`: what a patch
/// does, in one line; or why it cannot be read.
pub fn summary(patch: &str) -> String {
    match touched(patch) {
        Ok(files) => {
            let mut parts: Vec<String> = Vec::new();
            for file in &files {
                match file.op {
                    Op::MoveTo => match parts.last_mut() {
                        Some(last) => last.push_str(&format!(" → {}", file.path)),
                        None => parts.push(format!("move to {}", file.path)),
                    },
                    op => parts.push(format!("{} {}", op.word(), file.path)),
                }
            }
            parts.join(", ")
        }
        Err(why) => format!("unreadable patch ({why})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(patch: &str) -> Vec<(Op, String)> {
        touched(patch)
            .expect("readable")
            .into_iter()
            .map(|t| (t.op, t.path))
            .collect()
    }

    const FULL: &str = "*** Begin Patch\n*** Add File: hello.txt\n+Hello world\n*** Update File: src/app.py\n*** Move to: src/main.py\n@@ def greet():\n-print(\"Hi\")\n+print(\"Hello, world!\")\n*** End of File\n*** Delete File: obsolete.txt\n*** End Patch\n";

    #[test]
    fn every_operation_is_read_in_order() {
        assert_eq!(
            ops(FULL),
            vec![
                (Op::Add, "hello.txt".into()),
                (Op::Update, "src/app.py".into()),
                (Op::MoveTo, "src/main.py".into()),
                (Op::Delete, "obsolete.txt".into()),
            ]
        );
        assert_eq!(
            summary(FULL),
            "add hello.txt, update src/app.py → src/main.py, delete obsolete.txt"
        );
    }

    #[test]
    fn headers_are_read_trimmed_as_codex_reads_them() {
        let patch =
            "  *** Begin Patch\r\n   *** Update File:   /etc/passwd  \r\n@@\n-a\n+b\n*** End Patch";
        assert_eq!(ops(patch), vec![(Op::Update, "/etc/passwd".into())]);
    }

    #[test]
    fn a_here_document_around_the_patch_is_read_through() {
        let wrapped = format!("<<'EOF'\n{FULL}EOF\n");
        assert_eq!(touched(&wrapped), touched(FULL));
        assert!(touched("<<'EOF'\nEOF").is_err());
        assert!(touched(&format!("<<'EOF'\n{FULL}")).is_err());
    }

    #[test]
    fn what_is_not_understood_is_an_error() {
        for bad in [
            "",
            "   \n",
            "*** Begin Patch\n*** End Patch",
            "*** Begin Patch\n*** Add File: a\n+x\n",
            "*** Add File: a\n+x\n*** End Patch",
            "*** Begin Patch\n*** Rename File: a\n*** End Patch",
            "*** Begin Patch\n*** Add File: \n*** End Patch",
            "*** Begin Patch\n*** Move to: b\n*** End Patch",
            "*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch",
            "*** Begin Patch\n*** Delete File: a\n+x\n*** End Patch",
            "*** Begin Patch\nstray\n*** Add File: a\n*** End Patch",
            "*** Begin Patch\n*** Update File: a\n@@\n*** End Patch extra\n*** End Patch",
            "*** Begin Patch\n*** Add File: a\n*** End of File\n*** End Patch",
            "*** Begin Patch",
        ] {
            assert!(touched(bad).is_err(), "{bad:?} was read");
            assert!(summary(bad).starts_with("unreadable patch ("), "{bad:?}");
        }
    }

    #[test]
    fn arbitrary_input_never_panics() {
        let pieces = [
            "*** Begin Patch",
            "*** End Patch",
            "*** Add File: a",
            "*** Update File: é",
            "*** Move to: b",
            "*** Delete File: c",
            "*** End of File",
            "+x",
            "@@",
            "",
            "\u{0}",
            "***",
        ];
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    let text = format!("{a}\n{b}\n{c}");
                    let _ = touched(&text);
                    let _ = summary(&text);
                }
            }
        }
    }
}
