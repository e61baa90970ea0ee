//! No cycles among the top-level modules of src/ (the same graph as tools/module-cycles.py).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// Cycles known and not yet broken, each as its sorted modules; empty today.
const KNOWN: &[&[&str]] = &[];

/// The text without `#[cfg(test)] mod … { … }` blocks (rustfmt closes them with `}`
/// in column 0): test code may reach across modules.
fn production(text: &str) -> String {
    let lines: Vec<&str> = text.split('\n').collect();
    let (mut kept, mut skipping) = (Vec::new(), false);
    for (i, line) in lines.iter().enumerate() {
        let next = lines.get(i + 1).copied().unwrap_or("");
        if skipping {
            skipping = *line != "}";
        } else if *line == "#[cfg(test)]" && next.starts_with("mod ") {
            skipping = next.ends_with('{');
        } else {
            kept.push(*line);
        }
    }
    kept.join("\n")
}

fn ident(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The top-level modules named as `crate::x` or inside `crate::{x, y::z}`.
fn references(text: &str) -> BTreeSet<String> {
    let mut refs = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            refs.extend(group.split(',').map(|p| ident(p.trim()).to_string()));
        } else {
            refs.insert(ident(rest).to_string());
        }
    }
    refs.retain(|r| !r.is_empty());
    refs
}

/// Adds one file, `rel` being its path under src/.
fn add_file(graph: &mut Graph, rel: &Path, text: &str) {
    let first = rel
        .components()
        .next()
        .expect("a file under src/ has a path")
        .as_os_str()
        .to_string_lossy();
    let owner = first.strip_suffix(".rs").unwrap_or(&first).to_string();
    let is_tests = rel.file_name().is_some_and(|n| n == "tests.rs");
    if owner == "main" || owner == "lib" || is_tests {
        return;
    }
    let refs = references(&production(text));
    let edges = graph.entry(owner.clone()).or_default();
    edges.extend(refs.into_iter().filter(|r| *r != owner));
}

fn walk(graph: &mut Graph, src: &Path, dir: &Path) {
    for entry in std::fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("src/ is readable").path();
        if path.is_dir() {
            walk(graph, src, &path);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("a source file is UTF-8");
            let rel = path.strip_prefix(src).expect("under src/");
            add_file(graph, rel, &text);
        }
    }
}

/// The strongly connected components with more than one module (Tarjan).
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'g>(w: &mut Walk<'g>, v: &'g str) {
        let n = w.index.len();
        w.index.insert(v, n);
        w.low.insert(v, n);
        w.stack.push(v);
        for next in w.graph.get(v).into_iter().flatten() {
            let next = next.as_str();
            if !w.index.contains_key(next) {
                visit(w, next);
                let low = w.low[v].min(w.low[next]);
                w.low.insert(v, low);
            } else if w.stack.contains(&next) {
                let low = w.low[v].min(w.index[next]);
                w.low.insert(v, low);
            }
        }
        if w.low[v] == w.index[v] {
            let at = w
                .stack
                .iter()
                .rposition(|m| *m == v)
                .expect("v is on the stack");
            let mut comp: Vec<String> = w.stack.drain(at..).map(String::from).collect();
            if comp.len() > 1 {
                comp.sort();
                w.found.push(comp);
            }
        }
    }
    let mut w = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !w.index.contains_key(v.as_str()) {
            visit(&mut w, v);
        }
    }
    w.found.sort();
    w.found
}

#[test]
fn no_new_module_cycles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = Graph::new();
    walk(&mut graph, &src, &src);
    assert!(graph.contains_key("config") && graph.contains_key("approvals"));
    // Display helpers stay a leaf: they import nothing of ours.
    assert!(graph["fmt"].is_empty(), "fmt imports {:?}", graph["fmt"]);
    let new: Vec<_> = cycles(&graph)
        .into_iter()
        .filter(|c| !KNOWN.iter().any(|k| k.iter().eq(c.iter())))
        .collect();
    assert!(new.is_empty(), "module cycles: {new:?}\ngraph: {graph:#?}");
}

#[test]
fn a_cycle_through_paths_and_groups_is_found() {
    let mut graph = Graph::new();
    let files = [
        ("config.rs", "use crate::{fmt, approvals::policy::Rule};"),
        ("approvals/mod.rs", "let d = crate::store::DIR;"),
        ("store/mod.rs", "fn f() -> crate::config::Config {}"),
        ("fmt.rs", "// a leaf; mycrate::config is not ours"),
        (
            "ui/mod.rs",
            "use crate::config;\n#[cfg(test)]\nmod tests {\n    use crate::plan;\n}\n",
        ),
        ("plan/mod.rs", "use crate::ui;"),
        ("config/tests.rs", "use crate::ui;"),
    ];
    for (rel, text) in files {
        add_file(&mut graph, Path::new(rel), text);
    }
    assert_eq!(cycles(&graph), [["approvals", "config", "store"]]);
    assert!(graph["fmt"].is_empty(), "{graph:?}");
}
