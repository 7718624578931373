//! ARCHITECTURE.md lists the child's stages once; this checks the list matches `Stage`'s order,
//! and that the child's code runs them in that order: `setup()` names every stage up to the start
//! as it runs it, `enter()` the spawn, `program()` the exec.

use stockade::Stage;

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

/// The `Stage::X` names a function of src/child.rs mentions, in the order written.
fn stages_in(function: &str) -> Vec<String> {
    let code = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/child.rs")).expect("read");
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
