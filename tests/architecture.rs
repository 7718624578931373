//! ARCHITECTURE.md lists the child's stages once; this checks the list matches `Stage`'s order.

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
