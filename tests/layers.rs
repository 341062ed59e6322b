//! The layering of `src/` as ARCHITECTURE.md's "Layers" table states it: every top-level
//! module is in the table, imports only modules of its own layer or below (`crate::x` paths
//! outside comments and unit-test modules), and no two top-level modules import each other,
//! even through others. Reads the sources and the table; needs no service.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The "Layers" table of ARCHITECTURE.md: module → layer number.
fn layers(architecture: &str) -> BTreeMap<String, u32> {
    let section = architecture
        .split("\n## Layers")
        .nth(1)
        .expect("ARCHITECTURE.md has a `## Layers` section");
    let section = section.split("\n## ").next().unwrap_or_default();
    let mut out = BTreeMap::new();
    for line in section.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | L3 | `config` ... | job |
        let Some(layer) = cells
            .get(1)
            .and_then(|c| c.strip_prefix('L'))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        for module in cells[2].split(',') {
            let name = module.trim().trim_matches('`');
            assert!(!name.is_empty(), "empty module name in: {line}");
            assert!(
                out.insert(name.to_string(), layer).is_none(),
                "module {name} is listed twice in the Layers table"
            );
        }
    }
    assert!(!out.is_empty(), "the Layers table lists no module");
    out
}

/// A source file's text without comment lines and without its inline unit-test module.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules `code` names as `crate::<module>`.
fn imports(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        // `outboxd_crate::`, `my_crate::`: not this crate.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.insert(name);
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module of `path` under `src`: `src/sink/kafka.rs` → `sink`.
fn top_module(src: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// Module → (imported module → files importing it).
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn graph(src: &Path) -> (Graph, BTreeSet<String>) {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph = Graph::new();
    let mut modules = BTreeSet::new();
    for path in files {
        let top = top_module(src, &path);
        if top == "main" || top == "lib" {
            continue;
        }
        modules.insert(top.clone());
        // A unit-test file (`tests.rs`, `#[cfg(test)] mod tests;`) may use anything.
        if path.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(&path).unwrap());
        for to in imports(&code) {
            if to != top {
                graph
                    .entry(top.clone())
                    .or_default()
                    .entry(to)
                    .or_default()
                    .insert(path.strip_prefix(src).unwrap().display().to_string());
            }
        }
    }
    (graph, modules)
}

/// Every violation of the layering in `graph`: upward imports and circles.
fn violations(graph: &Graph, layer: &BTreeMap<String, u32>) -> Vec<String> {
    let mut out = Vec::new();
    for (from, tos) in graph {
        for (to, files) in tos {
            let (Some(a), Some(b)) = (layer.get(from), layer.get(to)) else {
                continue;
            };
            if b > a {
                out.push(format!(
                    "{from} (L{a}) imports {to} (L{b}) upward, in {files:?}"
                ));
            }
        }
    }
    // Circles: a module reaching itself.
    for start in graph.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<&String> = graph[start].keys().collect();
        while let Some(m) = stack.pop() {
            if m == start {
                out.push(format!("{start} imports itself through others (a circle)"));
                break;
            }
            if seen.insert(m.clone()) {
                if let Some(next) = graph.get(m) {
                    stack.extend(next.keys());
                }
            }
        }
    }
    out
}

#[test]
fn src_imports_only_downward_as_architecture_md_states() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let layer = layers(&std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap());
    let (graph, modules) = graph(&root.join("src"));
    let unplaced: Vec<&String> = modules.iter().filter(|m| !layer.contains_key(*m)).collect();
    assert!(
        unplaced.is_empty(),
        "top-level modules missing from ARCHITECTURE.md's Layers table: {unplaced:?}"
    );
    let gone: Vec<&String> = layer.keys().filter(|m| !modules.contains(*m)).collect();
    assert!(
        gone.is_empty(),
        "ARCHITECTURE.md's Layers table names modules src/ does not have: {gone:?}"
    );
    let found = violations(&graph, &layer);
    assert!(
        found.is_empty(),
        "layering violations:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_checker_sees_upward_imports_and_circles() {
    let layer: BTreeMap<String, u32> = [("low", 0), ("high", 1), ("peer", 1)]
        .into_iter()
        .map(|(m, l)| (m.to_string(), l))
        .collect();
    let edge = |g: &mut Graph, a: &str, b: &str| {
        g.entry(a.into())
            .or_default()
            .entry(b.into())
            .or_default()
            .insert(format!("{a}.rs"));
    };
    let mut ok = Graph::new();
    edge(&mut ok, "high", "low");
    edge(&mut ok, "high", "peer");
    assert!(violations(&ok, &layer).is_empty());
    let mut up = ok.clone();
    edge(&mut up, "low", "high");
    let v = violations(&up, &layer);
    assert!(
        v.iter()
            .any(|l| l.contains("low (L0) imports high (L1) upward")),
        "{v:?}"
    );
    let mut circle = ok.clone();
    edge(&mut circle, "peer", "high");
    let v = violations(&circle, &layer);
    assert!(v.iter().any(|l| l.contains("a circle")), "{v:?}");
    // Comments, unit-test modules and other crates' paths are not imports.
    let code = code_of(
        "use crate::low::X;\n// crate::high in a comment\nfn f() { my_crate::peer(); }\n\
         #[cfg(test)]\nmod tests { use crate::high; }",
    );
    assert_eq!(imports(&code), BTreeSet::from(["low".to_string()]));
}
