//! ARCHITECTURE.md lists the child's stages once; this checks the list matches `Stage`'s order,
//! and that the child's code runs them in that order: `setup()` names every stage up to the start
//! as it runs it, `enter()` the spawn, `program()` the exec. Then the house's rules, read from the
//! source of the three crates (the library `crates/stockade/`, the engine `crates/engine/`, the
//! binary `src/`): no file over 650 lines (but the policy schema), no function over 120, no
//! import circle between files, `unsafe` only in the library's `sys/` and each with its SAFETY
//! line, ARCHITECTURE.md's layout naming every source file, tests/README.md every test file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use stockade::Stage;
use syn::visit::Visit;

#[test]
fn architecture_md_lists_the_stages_in_code_order() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/ARCHITECTURE.md")).expect("read");
    let begin = doc.find("<!-- stages: begin -->").expect("begin marker");
    let end = doc.find("<!-- stages: end -->").expect("end marker");
    let listed: Vec<(u32, String)> = doc[begin..end]
        .lines()
        .filter_map(|l| {
            let (num, rest) = l.split_once(". **")?;
            let name = rest.split("**").next()?;
            Some((num.trim().parse().ok()?, name.to_string()))
        })
        .collect();
    let code: Vec<(u32, String)> = Stage::ALL.iter().map(|s| (*s as u32, s.name().to_string())).collect();
    assert_eq!(listed, code);
}

/// The `Stage::X` names a function of crates/stockade/src/child.rs mentions, in the order written.
fn stages_in(function: &str) -> Vec<String> {
    let code =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/crates/stockade/src/child.rs")).expect("read");
    let start = code.find(&format!("\nfn {function}(")).or_else(|| code.find(&format!("\npub fn {function}(")));
    let body = &code[start.expect("the function")..];
    let body = &body[..body.find("\n}\n").expect("its end")];
    body.split("Stage::").skip(1).map(|rest| rest.chars().take_while(|c| c.is_alphanumeric()).collect()).collect()
}

#[test]
fn the_child_runs_the_stages_in_the_listed_order() {
    let names: Vec<String> = Stage::ALL.iter().map(|s| format!("{s:?}")).collect();
    let (setup, rest) = names.split_at(names.iter().position(|n| n == "Spawn").expect("Spawn"));
    assert_eq!(stages_in("setup"), setup, "setup() does not run the stages in Stage::ALL's order");
    assert!(stages_in("enter").contains(&rest[0]), "enter() does not start the program at Stage::Spawn");
    assert_eq!(stages_in("program"), &rest[1..], "program() does not exec at Stage::Exec");
}

// ---- The house's rules, read from the source (syn parses it; nothing is compiled or run) ----

/// No file of a crate's `src/` (the library's, the engine's, the binary's, xtask's) is longer than this, but
/// the documented policy schema.
const FILE_MAX_LINES: usize = 650;
/// Named here, each with why; the list only shrinks (a file named that is back under the limit
/// fails the test, so that its name is taken off).
const LONG_FILES: [&str; 1] = [
    "crates/stockade/src/policy/file.rs", // the documented policy schema: one struct per section, every key's doc
];
/// No function is longer than this, but data tables (a function that is one literal table).
const FN_MAX_LINES: usize = 120;
/// Named here; the list only shrinks, as above.
const TABLES: [(&str, &str); 0] = [];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A crate of the workspace: where its root file is, and the directory its modules live in.
struct Krate {
    root: &'static str,
    dir: &'static str,
}

/// The crates whose source the rules hold: the jail library, the engine, and the binary.
const CRATES: [Krate; 3] = [
    Krate { root: "crates/stockade/src/lib.rs", dir: "crates/stockade/src" },
    Krate { root: "crates/engine/src/lib.rs", dir: "crates/engine/src" },
    Krate { root: "src/main.rs", dir: "src" },
];

/// The source directories of the product's crates.
fn product_files() -> Vec<String> {
    CRATES.iter().flat_map(|k| rust_files(k.dir)).collect()
}

/// Every `.rs` file under `dir` (relative to the workspace root), sorted.
fn rust_files(dir: &str) -> Vec<String> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join(dir), &mut out);
    let mut v: Vec<String> =
        out.iter().map(|p| p.strip_prefix(root()).expect("under root").display().to_string()).collect();
    v.sort();
    v
}

fn parse(file: &str) -> syn::File {
    let text = std::fs::read_to_string(root().join(file)).expect("read");
    syn::parse_file(&text).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn no_file_of_src_is_over_650_lines() {
    let long: Vec<String> = product_files()
        .into_iter()
        .chain(rust_files("xtask/src"))
        .filter(|f| !LONG_FILES.contains(&f.as_str()))
        .filter_map(|f| {
            let n = std::fs::read_to_string(root().join(&f)).expect("read").lines().count();
            (n > FILE_MAX_LINES).then(|| format!("{f}: {n} lines"))
        })
        .collect();
    assert!(long.is_empty(), "files over {FILE_MAX_LINES} lines (split them by what they do): {long:#?}");
    for f in LONG_FILES {
        let n = std::fs::read_to_string(root().join(f)).expect("read").lines().count();
        assert!(n > FILE_MAX_LINES, "{f} is {n} lines now: take it off LONG_FILES");
    }
}

/// Every function with a body (free, in an impl, a trait's default) and its length in lines.
#[derive(Default)]
struct Functions {
    found: Vec<(String, usize)>,
}

impl Functions {
    /// From the line of `fn` to the line of the body's closing brace.
    fn note(&mut self, sig: &syn::Signature, body: &syn::Block) {
        let (start, end) = (sig.fn_token.span.start().line, body.brace_token.span.close().end().line);
        self.found.push((sig.ident.to_string(), end + 1 - start));
    }
}

impl<'a> Visit<'a> for Functions {
    fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
        self.note(&f.sig, &f.block);
        syn::visit::visit_item_fn(self, f);
    }
    fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
        self.note(&f.sig, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }
    fn visit_trait_item_fn(&mut self, f: &'a syn::TraitItemFn) {
        if let Some(b) = &f.default {
            self.note(&f.sig, b);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

#[test]
fn no_function_is_over_120_lines() {
    let mut long = Vec::new();
    for file in product_files() {
        let mut fns = Functions::default();
        fns.visit_file(&parse(&file));
        for (name, n) in fns.found {
            let named = TABLES.contains(&(file.as_str(), name.as_str()));
            if n > FN_MAX_LINES && !named {
                long.push(format!("{file}: fn {name}: {n} lines"));
            } else if n <= FN_MAX_LINES && named {
                long.push(format!("{file}: fn {name} is {n} lines now: take it off TABLES"));
            }
        }
    }
    assert!(long.is_empty(), "functions over {FN_MAX_LINES} lines (name their steps): {long:#?}");
}

/// A crate's modules: the module path (`["layers", "cgroup"]`) of each file, and each file's
/// `use` re-exports (a name to the path it stands for), so that an import of a re-exported
/// name counts as an import of the file that holds it.
struct Modules {
    files: BTreeMap<Vec<String>, String>,
    reexports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
}

/// A path as a list of segments, from the crate's root.
fn absolute(module: &[String], path: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String> = module.to_vec();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The paths a `use` tree names (`a::{b, c::d}` is `a::b` and `a::c::d`), each with the name
/// it is brought in as (`None` for a glob).
fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, Option<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) if n.ident == "self" => out.push((prefix.clone(), prefix.last().cloned())),
        syn::UseTree::Name(n) => {
            let mut p = prefix.clone();
            p.push(n.ident.to_string());
            out.push((p, Some(n.ident.to_string())));
        }
        syn::UseTree::Rename(r) => {
            let mut p = prefix.clone();
            p.push(r.ident.to_string());
            out.push((p, Some(r.rename.to_string())));
        }
        syn::UseTree::Glob(_) => out.push((prefix.clone(), None)),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| use_paths(t, prefix, out)),
    }
}

/// What one file names: every `use` path and every `crate::`, `super::` or `self::` path in its
/// code, made absolute from the module it is written in (inline modules included).
struct Imports<'m> {
    module: Vec<String>,
    named: Vec<Vec<String>>,
    reexports: Option<&'m mut BTreeMap<String, Vec<String>>>,
}

impl<'a> Visit<'a> for Imports<'_> {
    fn visit_item_mod(&mut self, m: &'a syn::ItemMod) {
        if m.content.is_some() {
            self.module.push(m.ident.to_string());
            let outer = self.reexports.take();
            syn::visit::visit_item_mod(self, m);
            self.reexports = outer;
            self.module.pop();
        }
    }
    fn visit_item_use(&mut self, u: &'a syn::ItemUse) {
        let mut paths = Vec::new();
        use_paths(&u.tree, &mut Vec::new(), &mut paths);
        for (p, name) in paths {
            let first = p.first().map(String::as_str);
            // A path from a child module declared here (`use child::X`) is written as one.
            let abs = absolute(&self.module, &p).or_else(|| {
                (first.is_some_and(|f| f != "std" && f != "core" && f != "alloc")).then(|| {
                    let mut a = self.module.clone();
                    a.extend(p.iter().cloned());
                    a
                })
            });
            let Some(abs) = abs else { continue };
            if let (Some(re), Some(name)) = (self.reexports.as_deref_mut(), name) {
                re.insert(name, abs.clone());
            }
            self.named.push(abs);
        }
    }
    fn visit_path(&mut self, p: &'a syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if let Some(abs) = absolute(&self.module, &segs) {
            self.named.push(abs);
        }
        syn::visit::visit_path(self, p);
    }
}

impl Modules {
    fn of(k: &Krate, files: &[String]) -> Modules {
        let mut m = Modules { files: BTreeMap::new(), reexports: BTreeMap::new() };
        for f in files {
            m.files.insert(module_of(k, f), f.clone());
        }
        m
    }

    /// The file that holds what an absolute path names: the longest prefix that is a file's
    /// module, following re-exports (at most a few hops).
    fn file_of(&self, path: &[String]) -> Option<&String> {
        let mut path = path.to_vec();
        for _ in 0..8 {
            let n = (0..=path.len()).rev().find(|n| self.files.contains_key(&path[..*n]))?;
            let next = path.get(n).and_then(|name| self.reexports.get(&path[..n])?.get(name));
            match next {
                Some(to) if to.as_slice() != path.as_slice() => {
                    let mut p = to.clone();
                    p.extend(path[n + 1..].iter().cloned());
                    path = p;
                }
                _ => return self.files.get(&path[..n]),
            }
        }
        None
    }
}

/// A file's module path in its crate: `src/layers/cgroup/mod.rs` is `["layers", "cgroup"]`.
fn module_of(k: &Krate, file: &str) -> Vec<String> {
    if file == k.root {
        return Vec::new();
    }
    let rel = file.strip_prefix(k.dir).expect("in the crate").trim_start_matches('/').trim_end_matches(".rs");
    let mut segs: Vec<String> = rel.split('/').map(String::from).collect();
    if segs.last().is_some_and(|s| s == "mod") {
        segs.pop();
    }
    segs
}

/// The files each file of a crate imports. A module's own file declaring, re-exporting and
/// composing the modules below it (`mod child; pub use child::X;`) is its door, how it is built,
/// not an import of them: an edge from a module's file down into its own subtree is left out.
/// Every other edge counts: between siblings, across the tree, and up (a child's `super::`).
fn import_graph(k: &Krate) -> BTreeMap<String, BTreeSet<String>> {
    let files = rust_files(k.dir);
    let mut modules = Modules::of(k, &files);
    let mut named = BTreeMap::new();
    for f in &files {
        let module = module_of(k, f);
        let mut re = BTreeMap::new();
        let mut imports = Imports { module: module.clone(), named: Vec::new(), reexports: Some(&mut re) };
        imports.visit_file(&parse(f));
        let found = imports.named;
        modules.reexports.insert(module.clone(), re);
        named.insert(f.clone(), (module, found));
    }
    let mut graph = BTreeMap::new();
    for (f, (module, found)) in &named {
        let edges: BTreeSet<String> = found
            .iter()
            .filter_map(|p| {
                let to = modules.file_of(p)?;
                let to_module = module_of(k, to);
                let below = to_module.len() > module.len() && to_module.starts_with(module);
                (to != f && !below).then(|| to.clone())
            })
            .collect();
        graph.insert(f.clone(), edges);
    }
    graph
}

/// A circle of imports, if there is one: the files in order, the first repeated at the end.
fn a_circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &String,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = stack.iter().position(|s| s == n) {
            let mut c = stack[i..].to_vec();
            c.push(n.clone());
            return Some(c);
        }
        if !done.insert(n.clone()) {
            return None;
        }
        stack.push(n.clone());
        for m in graph.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, graph, done, stack) {
                return Some(c);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|n| visit(n, graph, &mut done, &mut Vec::new()))
}

/// The files reachable from `from` by imports.
fn reachable(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut next = vec![from.to_string()];
    while let Some(n) = next.pop() {
        for m in graph.get(&n).into_iter().flatten() {
            if seen.insert(m.clone()) {
                next.push(m.clone());
            }
        }
    }
    seen
}

#[test]
fn no_import_circle_between_files() {
    let mut circles = Vec::new();
    for k in &CRATES {
        let graph = import_graph(k);
        assert!(graph.len() > 10, "{}: the graph found no files", k.root);
        let imports: usize = graph.values().map(BTreeSet::len).sum();
        assert!(2 * imports > graph.len(), "{}: the graph found almost no imports ({imports})", k.root);
        // Each group of files that reach each other, named once, with one circle through it.
        let reach: BTreeMap<&String, BTreeSet<String>> = graph.keys().map(|f| (f, reachable(&graph, f))).collect();
        let mut grouped = BTreeSet::new();
        for (f, r) in &reach {
            if !r.contains(*f) || grouped.contains(*f) {
                continue;
            }
            let group: BTreeSet<String> = r.iter().filter(|g| reach[g].contains(*f)).cloned().collect();
            grouped.extend(group.iter().cloned());
            let inner: BTreeMap<String, BTreeSet<String>> =
                group.iter().map(|g| (g.clone(), graph[g].intersection(&group).cloned().collect())).collect();
            let circle = a_circle(&inner).unwrap_or_default().join(" -> ");
            circles.push(format!("{} files: {group:?}, e.g. {circle}", group.len()));
        }
    }
    assert!(circles.is_empty(), "files that import each other in a circle: {circles:#?}");
}

/// The `unsafe` a file holds: blocks, functions, impls and traits, each with its line.
#[derive(Default)]
struct Unsafe {
    lines: Vec<usize>,
}

impl<'a> Visit<'a> for Unsafe {
    fn visit_expr_unsafe(&mut self, e: &'a syn::ExprUnsafe) {
        self.lines.push(e.unsafe_token.span.start().line);
        syn::visit::visit_expr_unsafe(self, e);
    }
    fn visit_signature(&mut self, s: &'a syn::Signature) {
        if let Some(u) = &s.unsafety {
            self.lines.push(u.span.start().line);
        }
        syn::visit::visit_signature(self, s);
    }
    fn visit_item_impl(&mut self, i: &'a syn::ItemImpl) {
        if let Some(u) = &i.unsafety {
            self.lines.push(u.span.start().line);
        }
        syn::visit::visit_item_impl(self, i);
    }
    fn visit_item_trait(&mut self, t: &'a syn::ItemTrait) {
        if let Some(u) = &t.unsafety {
            self.lines.push(u.span.start().line);
        }
        syn::visit::visit_item_trait(self, t);
    }
}

#[test]
fn unsafe_is_only_in_the_librarys_sys_and_each_block_says_why() {
    let mut wrong = Vec::new();
    for file in product_files() {
        let text = std::fs::read_to_string(root().join(&file)).expect("read");
        let lines: Vec<&str> = text.lines().collect();
        let mut found = Unsafe::default();
        found.visit_file(&parse(&file));
        for line in found.lines {
            if !file.starts_with("crates/stockade/src/sys/") {
                wrong.push(format!("{file}:{line}: unsafe outside crates/stockade/src/sys/"));
            }
            // The SAFETY line stands on the lines just above (a comment may run over several),
            // or on the same line; an unsafe fn says it in its doc (`# Safety`).
            let above = lines[..line.saturating_sub(1)].iter().rev().take_while(|l| {
                let t = l.trim_start();
                t.starts_with("//") || t.starts_with("#[")
            });
            let said = lines[line - 1].contains("SAFETY:")
                || above.into_iter().any(|l| l.contains("SAFETY:") || l.contains("# Safety"));
            if !said {
                wrong.push(format!("{file}:{line}: unsafe without a SAFETY comment above it"));
            }
        }
        if file != "crates/stockade/src/lib.rs" && text.contains("allow(unsafe_code)") {
            wrong.push(format!("{file}: allows unsafe_code"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The source layout block of ARCHITECTURE.md: each entry (a line that starts with a path) with
/// the text that describes it.
fn layout() -> Vec<(String, String)> {
    let doc = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("read");
    let start = doc.find("## Layout").expect("a Layout section");
    let block = &doc[start..];
    let block = &block[block.find("```\n").expect("its block") + 4..];
    let block = &block[..block.find("```").expect("its end")];
    let mut entries: Vec<(String, String)> = Vec::new();
    for line in block.lines() {
        if line.starts_with(' ') {
            if let Some(last) = entries.last_mut() {
                last.1.push(' ');
                last.1.push_str(line.trim());
            }
        } else if let Some((path, text)) = line.split_once(' ') {
            entries.push((path.to_string(), text.trim().to_string()));
        }
    }
    entries
}

/// The `name.rs` words of a text.
fn rs_words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .filter(|w| w.ends_with(".rs") && w.len() > 3)
        .map(String::from)
        .collect()
}

#[test]
fn architecture_md_names_every_source_file_and_no_other() {
    let entries = layout();
    let mut missing = Vec::new();
    for file in product_files() {
        let (dir, name) = file.rsplit_once('/').expect("a directory");
        let named = entries
            .iter()
            .any(|(path, text)| path == &file || (path.trim_end_matches('/') == dir && rs_words(text).contains(name)));
        if !named {
            missing.push(file);
        }
    }
    assert!(missing.is_empty(), "ARCHITECTURE.md's layout does not name (under its directory's entry): {missing:#?}");
    let mut stale = Vec::new();
    for (path, text) in entries.iter().filter(|(p, _)| p.starts_with("src/") || p.starts_with("crates/")) {
        if path.ends_with(".rs") {
            if !root().join(path).is_file() {
                stale.push(path.clone());
            }
            continue;
        }
        for w in rs_words(text) {
            if !root().join(path).join(&w).is_file() {
                stale.push(format!("{path}{w}"));
            }
        }
    }
    assert!(stale.is_empty(), "ARCHITECTURE.md's layout names files that do not exist: {stale:#?}");
}

#[test]
fn tests_readme_names_every_test_file() {
    let readme = std::fs::read_to_string(root().join("tests/README.md")).expect("read");
    let named = rs_words(&readme);
    let files: Vec<String> = std::fs::read_dir(root().join("tests"))
        .expect("read_dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".rs"))
        .collect();
    let missing: Vec<&String> = files.iter().filter(|f| !named.contains(*f)).collect();
    assert!(missing.is_empty(), "tests/README.md does not name: {missing:?}");
    let stale: Vec<&String> =
        named.iter().filter(|n| !n.contains('/') && !root().join("tests").join(n).exists()).collect();
    assert!(stale.is_empty(), "tests/README.md names test files that do not exist: {stale:?}");
}

#[test]
fn no_import_circle_in_the_typescript_sdk() {
    let dir = root().join("typescript/src");
    let mut graph = BTreeMap::new();
    for e in std::fs::read_dir(&dir).expect("typescript/src").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".ts") else { continue };
        let text = std::fs::read_to_string(e.path()).expect("read");
        // `import ... from "./x.js"` and `export ... from "./x.js"`, type-only ones included.
        let edges: BTreeSet<String> = text
            .split("from \"./")
            .skip(1)
            .filter_map(|rest| rest.split('"').next()?.strip_suffix(".js").map(|s| format!("{s}.ts")))
            .filter(|to| to != &name)
            .collect();
        graph.insert(format!("{stem}.ts"), edges);
    }
    // index.ts is the package's door: it re-exports every module, and none imports it.
    graph.remove("index.ts");
    let through_door: Vec<&String> = graph.iter().filter(|(_, e)| e.contains("index.ts")).map(|(f, _)| f).collect();
    assert!(through_door.is_empty(), "typescript/src: {through_door:?} import index.ts, the package's door");
    assert!(graph.len() >= 5, "typescript/src: found {:?}", graph.keys());
    if let Some(c) = a_circle(&graph) {
        panic!("typescript/src: modules import each other in a circle: {}", c.join(" -> "));
    }
}

/// The marker of a layer's doc comment naming the layers it may import.
const LAYER_IMPORTS: &str = "//! Imports (layers):";

/// The layers a crate's layer may import, as its door's doc comment names them (`` `name` ``
/// each, or `none`), by layer; `Err` names the doors that name none.
fn declared_layers(k: &Krate) -> Result<BTreeMap<String, BTreeSet<String>>, Vec<String>> {
    let (mut declared, mut missing) = (BTreeMap::new(), Vec::new());
    for f in rust_files(k.dir) {
        let module = module_of(k, &f);
        if module.len() != 1 {
            continue;
        }
        let text = std::fs::read_to_string(root().join(&f)).expect("read");
        let Some(at) = text.find(LAYER_IMPORTS) else {
            missing.push(f);
            continue;
        };
        // The declaration runs to the end of its sentence, over as many `//!` lines as it takes.
        let rest = &text[at + LAYER_IMPORTS.len()..];
        let sentence: String = rest
            .lines()
            .map(|l| l.trim_start_matches("//!"))
            .take_while(|l| !l.trim().is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        let sentence = sentence.split_once('.').map_or(sentence.as_str(), |(s, _)| s);
        let names: BTreeSet<String> = sentence.split('`').skip(1).step_by(2).map(String::from).collect();
        declared.insert(module[0].clone(), names);
    }
    if missing.is_empty() { Ok(declared) } else { Err(missing) }
}

/// The layers each layer of a crate imports (its top-level modules; the root, the crate's door,
/// left out: it may import them all).
fn layer_imports(k: &Krate) -> BTreeMap<String, BTreeSet<String>> {
    let mut layers: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in import_graph(k) {
        let Some(layer) = module_of(k, &from).first().cloned() else { continue };
        let entry = layers.entry(layer.clone()).or_default();
        entry.extend(to.iter().filter_map(|t| module_of(k, t).first().cloned()).filter(|t| *t != layer));
    }
    layers
}

/// Each crate's layers (its top-level modules) say in their doors' doc comments which other
/// layers they may import, and import no other: no import up, none across that is not said.
#[test]
fn each_layer_imports_only_the_layers_its_doc_comment_names() {
    let mut wrong = Vec::new();
    for k in &CRATES {
        let actual = layer_imports(k);
        let declared = match declared_layers(k) {
            Ok(d) => d,
            Err(missing) => {
                for door in missing {
                    let layer = module_of(k, &door).remove(0);
                    let names: Vec<String> =
                        actual.get(&layer).into_iter().flatten().map(|n| format!("`{n}`")).collect();
                    let names = if names.is_empty() { "none".to_string() } else { names.join(", ") };
                    wrong.push(format!("{door}: no line {LAYER_IMPORTS:?} (it imports {names})"));
                }
                continue;
            }
        };
        assert!(declared.len() >= 4, "{}: found only {} layers", k.root, declared.len());
        for (layer, to) in &actual {
            for t in to.iter().filter(|t| !declared.get(layer).is_some_and(|d| d.contains(*t))) {
                wrong.push(format!("{}: layer `{layer}` imports `{t}`, which its doc comment does not name", k.root));
            }
        }
    }
    assert!(wrong.is_empty(), "imports the layers' doc comments do not allow: {wrong:#?}");
}
