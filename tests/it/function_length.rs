//! No function in src/supervisor/ is longer than a screen: `LIMIT` lines from
//! its `fn` line to its closing brace. Test code (`#[cfg(test)]` items, files
//! named tests.rs and files under a tests/ folder) is not measured.

use std::path::Path;

use syn::visit::Visit;

use crate::source;
use source::{is_test_only, rust_files};

/// A screen.
const LIMIT: usize = 60;

/// Collects the functions of one file that are too long, as `file:line name (N lines)`.
struct Lengths<'f> {
    file: &'f str,
    /// The enclosing `impl` or `trait`, to name methods `Type::method`.
    owner: Option<String>,
    too_long: Vec<String>,
}

impl Lengths<'_> {
    fn measure(&mut self, name: &syn::Ident, fn_token: &syn::token::Fn, body: &syn::Block) {
        let first = fn_token.span.start().line;
        let last = body.brace_token.span.close().end().line;
        let lines = last + 1 - first;
        if lines > LIMIT {
            let name = match &self.owner {
                Some(owner) => format!("{owner}::{name}"),
                None => name.to_string(),
            };
            self.too_long
                .push(format!("{}:{first} {name} ({lines} lines)", self.file));
        }
    }

    fn within<T>(&mut self, owner: String, visit: impl FnOnce(&mut Self) -> T) -> T {
        let outer = self.owner.replace(owner);
        let result = visit(self);
        self.owner = outer;
        result
    }
}

impl<'ast> Visit<'ast> for Lengths<'_> {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if !is_test_only(&item.attrs) {
            syn::visit::visit_item_mod(self, item);
        }
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        if is_test_only(&item.attrs) {
            return;
        }
        let ty = &item.self_ty;
        let owner = quote_type(ty);
        self.within(owner, |me| syn::visit::visit_item_impl(me, item));
    }

    fn visit_item_trait(&mut self, item: &'ast syn::ItemTrait) {
        if is_test_only(&item.attrs) {
            return;
        }
        let owner = item.ident.to_string();
        self.within(owner, |me| syn::visit::visit_item_trait(me, item));
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        if is_test_only(&item.attrs) {
            return;
        }
        self.measure(&item.sig.ident, &item.sig.fn_token, &item.block);
        syn::visit::visit_item_fn(self, item);
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        if is_test_only(&item.attrs) {
            return;
        }
        self.measure(&item.sig.ident, &item.sig.fn_token, &item.block);
        syn::visit::visit_impl_item_fn(self, item);
    }

    fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
        if is_test_only(&item.attrs) {
            return;
        }
        if let Some(body) = &item.default {
            self.measure(&item.sig.ident, &item.sig.fn_token, body);
        }
        syn::visit::visit_trait_item_fn(self, item);
    }
}

/// The last path segment of an `impl`'s type, enough to find the method.
fn quote_type(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(path) => path
            .path
            .segments
            .last()
            .map_or_else(|| "?".to_string(), |s| s.ident.to_string()),
        _ => "impl".to_string(),
    }
}

#[test]
fn no_supervisor_function_is_longer_than_a_screen() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let supervisor = root.join("src/supervisor");
    // Files named tests.rs and those under a tests/ folder are test code.
    let mut files: Vec<_> = rust_files(&supervisor)
        .into_iter()
        .filter(|path| {
            let rel = path.strip_prefix(&supervisor).unwrap_or(path);
            !rel.components()
                .any(|c| c.as_os_str() == "tests" || c.as_os_str() == "tests.rs")
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no files found under src/supervisor");
    let mut too_long = Vec::new();
    for path in &files {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let rel = path
            .strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string();
        let mut lengths = Lengths {
            file: &rel,
            owner: None,
            too_long: Vec::new(),
        };
        lengths.visit_file(&ast);
        too_long.append(&mut lengths.too_long);
    }
    assert!(
        too_long.is_empty(),
        "functions longer than {LIMIT} lines (split them by concern):\n{}",
        too_long.join("\n")
    );
}
