//! The layers of src/ hold: an import only goes down the floors named in
//! `FLOORS` (DESIGN.md's "Layers", in the same order), and no files import each
//! other in a circle. Test code (`#[cfg(test)]` modules and the files they name) may
//! reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use syn::visit::Visit;

use crate::source;
use source::{is_test_only, rust_files};

/// The floors, low to high. A module may import its own floor's modules and
/// any lower floor's, never a higher one's.
const FLOORS: &[&[&str]] = &[
    &["fmt", "wake", "escape", "proc_stat", "detach", "llm"],
    &["protocol", "lane_status"],
    &["agent"],
    &["store"],
    &["config"],
    &["approvals"],
    &["supervisor", "worker"],
    &["console"],
    &["fleet"],
    &["plan"],
    &["ui", "web"],
    &["cli"],
];

/// A module path, `["fleet", "host"]` for src/fleet/host.rs.
type ModPath = Vec<String>;

/// Every production file of src/ as its module path, with the module paths it
/// names (`crate::…`, `super::…`, `self::…`, in `use` and in code alike).
struct Tree {
    files: BTreeMap<ModPath, BTreeSet<ModPath>>,
}

fn module_of(rel: &Path) -> ModPath {
    let mut parts: ModPath = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.strip_suffix(".rs").unwrap_or(&last).to_string();
        if stem != "mod" {
            parts.push(stem);
        }
    }
    parts
}

/// Collects the paths one file names, skipping its test modules.
struct Names<'m> {
    module: &'m ModPath,
    found: BTreeSet<ModPath>,
    /// Child modules declared `#[cfg(test)] mod x;`: their files are tests.
    test_children: Vec<String>,
}

impl Names<'_> {
    fn absolute(&self, segments: &[String]) -> Option<ModPath> {
        let first = segments.first()?;
        let mut base = match first.as_str() {
            "crate" => Vec::new(),
            "self" => self.module.clone(),
            "super" => {
                let mut base = self.module.clone();
                base.pop();
                base
            }
            _ => return None,
        };
        let mut rest = &segments[1..];
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn note(&mut self, segments: &[String]) {
        if let Some(path) = self.absolute(segments) {
            self.found.insert(path);
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                prefix.push(name.ident.to_string());
                self.note(prefix);
                prefix.pop();
            }
            syn::UseTree::Rename(rename) => {
                prefix.push(rename.ident.to_string());
                self.note(prefix);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.note(prefix),
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Names<'_> {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if is_test_only(&item.attrs) {
            if item.content.is_none() {
                self.test_children.push(item.ident.to_string());
            }
            return;
        }
        syn::visit::visit_item_mod(self, item);
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        if !is_test_only(&item.attrs) {
            syn::visit::visit_item_fn(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        if !is_test_only(&item.attrs) {
            self.use_tree(&mut Vec::new(), &item.tree);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.note(&segments);
        syn::visit::visit_path(self, path);
    }
}

impl Tree {
    fn read(src: &Path) -> Tree {
        let paths = rust_files(src);
        let mut files = BTreeMap::new();
        let mut test_modules: BTreeSet<ModPath> = BTreeSet::new();
        for path in paths {
            let rel = path.strip_prefix(src).expect("under src/");
            let module = module_of(rel);
            if matches!(module.as_slice(), [m] if m == "main" || m == "lib") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a source file is UTF-8");
            let file =
                syn::parse_file(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
            let mut names = Names {
                module: &module,
                found: BTreeSet::new(),
                test_children: Vec::new(),
            };
            names.visit_file(&file);
            for child in &names.test_children {
                let mut test = module.clone();
                test.push(child.clone());
                test_modules.insert(test);
            }
            files.insert(module.clone(), names.found);
        }
        files.retain(|module, _| !test_modules.iter().any(|t| module.starts_with(t)));
        Tree { files }
    }

    /// The file a named path lives in: its longest prefix that is a file.
    fn file_of(&self, path: &ModPath) -> Option<ModPath> {
        (1..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|prefix| self.files.contains_key(prefix))
    }

    /// File → files it imports, leaving out its own ancestors and descendants
    /// (a folder's `mod.rs` declares and re-exports its children).
    fn edges(&self) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
        let mut edges = BTreeMap::new();
        for (module, names) in &self.files {
            let targets: BTreeSet<ModPath> = names
                .iter()
                .filter_map(|name| self.file_of(name))
                .filter(|target| !target.starts_with(module) && !module.starts_with(target))
                .collect();
            edges.insert(module.clone(), targets);
        }
        edges
    }
}

fn floor_of(module: &ModPath) -> Option<usize> {
    let top = module.first()?;
    FLOORS
        .iter()
        .position(|floor| floor.contains(&top.as_str()))
}

fn show(module: &ModPath) -> String {
    module.join("::")
}

/// The strongly connected components with more than one file (Tarjan).
fn circles(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<String>> {
    struct Walk<'g> {
        edges: &'g BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'g ModPath, usize>,
        low: BTreeMap<&'g ModPath, usize>,
        stack: Vec<&'g ModPath>,
        found: Vec<Vec<String>>,
    }
    fn visit<'g>(w: &mut Walk<'g>, v: &'g ModPath) {
        let n = w.index.len();
        w.index.insert(v, n);
        w.low.insert(v, n);
        w.stack.push(v);
        for next in w.edges.get(v).into_iter().flatten() {
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
            let at = w.stack.iter().rposition(|m| *m == v).expect("on the stack");
            let mut circle: Vec<String> = w.stack.drain(at..).map(show).collect();
            if circle.len() > 1 {
                circle.sort();
                w.found.push(circle);
            }
        }
    }
    let mut w = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !w.index.contains_key(v) {
            visit(&mut w, v);
        }
    }
    w.found.sort();
    w.found
}

fn tree() -> Tree {
    Tree::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

#[test]
fn every_top_module_has_a_floor() {
    let tree = tree();
    let homeless: BTreeSet<String> = tree
        .files
        .keys()
        .filter(|m| floor_of(m).is_none())
        .map(|m| m[0].clone())
        .collect();
    assert!(
        homeless.is_empty(),
        "modules on no floor: {homeless:?}; add them to FLOORS"
    );
}

#[test]
fn display_helpers_are_a_leaf() {
    let tree = tree();
    let fmt = tree
        .edges()
        .remove(&vec!["fmt".to_string()])
        .unwrap_or_default();
    assert!(fmt.is_empty(), "fmt imports {fmt:?}");
}

#[test]
fn imports_only_go_down() {
    let tree = tree();
    let mut upward = Vec::new();
    for (from, targets) in tree.edges() {
        for to in targets {
            if let (Some(low), Some(high)) = (floor_of(&from), floor_of(&to))
                && high > low
            {
                upward.push(format!("{} → {}", show(&from), show(&to)));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports up the floors:\n{}",
        upward.join("\n")
    );
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    let edges = tree().edges();
    let found = circles(&edges);
    let mut why = Vec::new();
    for circle in &found {
        for (from, targets) in &edges {
            for to in targets.iter().filter(|to| circle.contains(&show(to))) {
                if circle.contains(&show(from)) {
                    why.push(format!("{} → {}", show(from), show(to)));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "circles of files: {found:?}\n{}",
        why.join("\n")
    );
}

#[test]
fn the_reader_resolves_paths_and_skips_tests() {
    let module = vec!["fleet".to_string(), "host".to_string()];
    let text = "use super::{link::HostMsg, plans};\n\
                use crate::store::{self, lock::Lock};\n\
                fn f() { crate::ui::run(); }\n\
                #[cfg(test)]\nmod tests { use crate::cli::x; }\n\
                #[cfg(test)]\nmod more;\n";
    let file = syn::parse_file(text).expect("valid Rust");
    let mut names = Names {
        module: &module,
        found: BTreeSet::new(),
        test_children: Vec::new(),
    };
    names.visit_file(&file);
    let found: BTreeSet<String> = names.found.iter().map(show).collect();
    for expected in [
        "fleet::link::HostMsg",
        "fleet::plans",
        "store::lock::Lock",
        "ui::run",
    ] {
        assert!(found.contains(expected), "{expected} not in {found:?}");
    }
    assert!(!found.iter().any(|f| f.starts_with("cli")), "{found:?}");
    assert_eq!(names.test_children, ["more"]);
}
