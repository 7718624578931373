//! A small classic-BPF compiler for seccomp deny-lists: one filter, a binary search over merged
//! ranges of syscall numbers, an action per leaf.
//!
//! Why not `seccompiler` alone: it emits one linear chain with at least five instructions per
//! system call and a single action per filter, so stockade's groups took three filters and 400
//! instructions, and the kernel re-verifies and JITs a filter at every install: 246 µs of every
//! run here (measured). This compiler merges neighbouring numbers with the same action into
//! ranges and searches them as a tree: about a quarter of the instructions, and a syscall the
//! filter does not name (the hot path: read, write, mmap...) costs a handful of comparisons
//! instead of a walk past every denied number. `seccompiler` is kept as the oracle: a test runs
//! both programs through a BPF interpreter over every syscall number and the interesting
//! arguments and checks they agree.

use crate::sys::SockFilter;

/// What the filter answers for a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Action {
    /// Kill the whole process (`SECCOMP_RET_KILL_PROCESS`).
    Kill,
    /// Fail the call with this errno.
    Errno(u16),
    /// Ask the supervisor (`SECCOMP_RET_USER_NOTIF`).
    Notify,
    Allow,
}

impl Action {
    pub fn ret(self) -> u32 {
        match self {
            Action::Kill => 0x8000_0000,
            Action::Errno(e) => 0x0005_0000 | u32::from(e),
            Action::Notify => 0x7fc0_0000,
            Action::Allow => 0x7fff_0000,
        }
    }
}

/// A test on the low 32 bits of an argument (every argument stockade checks is an `int` or a
/// flag word whose bits of interest are all in the low half).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Test {
    Eq(u32),
    Ne(u32),
    /// `(arg & mask) != 0`.
    AnyBits(u32),
    /// `(arg & mask) == value`.
    MaskedEq(u32, u32),
}

/// One system call the filter names: unconditionally, or when any rule holds (a rule holds
/// when all its tests do). Several entries may name one number with rules (each group its own,
/// with its own action): their rules are tried in order, the first that holds answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub nr: u32,
    pub rules: Vec<Vec<(u8, Test)>>,
    pub action: Action,
}

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const JGT_K: u16 = 0x25;
const JSET_K: u16 = 0x45;
const ALU_AND_K: u16 = 0x54;
const JA: u16 = 0x05;
const RET_K: u16 = 0x06;
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

fn stmt(code: u16, k: u32) -> SockFilter {
    SockFilter { code, jt: 0, jf: 0, k }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> SockFilter {
    SockFilter { code, jt, jf, k }
}

/// A leaf of the search: a range of numbers with one unconditional action, or one number with
/// rules (its code lives after the tree).
#[derive(Debug, Clone)]
enum Leaf {
    Range { lo: u32, hi: u32, action: Action },
    Rules { nr: u32, block: usize },
}

impl Leaf {
    fn lo(&self) -> u32 {
        match self {
            Leaf::Range { lo, .. } => *lo,
            Leaf::Rules { nr, .. } => *nr,
        }
    }
    fn hi(&self) -> u32 {
        match self {
            Leaf::Range { hi, .. } => *hi,
            Leaf::Rules { nr, .. } => *nr,
        }
    }
}

/// Instructions with symbolic long jumps, resolved once every block's position is known.
enum Ins {
    Plain(SockFilter),
    /// `JA` to the start of conditional block N.
    ToBlock(usize),
    /// `JA` to a later instruction of the tree (index into the tree's own instructions).
    ToTree(usize),
}

/// Compiles the entries (numbers must be unique) into one filter: native-arch check, x32 kill,
/// the search, `Allow` for everything not named.
pub fn compile(mut entries: Vec<Entry>) -> Vec<SockFilter> {
    entries.sort_by_key(|e| e.nr);
    let mut leaves: Vec<Leaf> = Vec::new();
    let mut blocks: Vec<Vec<&Entry>> = Vec::new();
    for e in &entries {
        if e.rules.is_empty() {
            match leaves.last_mut() {
                Some(Leaf::Range { hi, action, .. }) if *hi + 1 == e.nr && *action == e.action => *hi = e.nr,
                _ => leaves.push(Leaf::Range { lo: e.nr, hi: e.nr, action: e.action }),
            }
        } else if let Some(Leaf::Rules { nr, block }) = leaves.last()
            && *nr == e.nr
        {
            blocks[*block].push(e);
        } else {
            leaves.push(Leaf::Rules { nr: e.nr, block: blocks.len() });
            blocks.push(vec![e]);
        }
    }

    let mut tree: Vec<Ins> = Vec::new();
    search(&leaves, &mut tree);
    tree.push(Ins::Plain(stmt(RET_K, Action::Allow.ret())));

    // Conditional blocks, each ending in a return.
    let mut block_code: Vec<Vec<SockFilter>> = Vec::new();
    for group in blocks {
        let mut code = Vec::new();
        for (rule, action) in group.iter().flat_map(|e| e.rules.iter().map(|r| (r, e.action))) {
            // Each test either passes (falls through) or fails (jumps to the next rule).
            let tests: Vec<Vec<SockFilter>> = rule
                .iter()
                .map(|&(arg, t)| {
                    let load = stmt(LD_W_ABS, 16 + 8 * u32::from(arg));
                    match t {
                        // jt/jf are patched below: FAIL marks "to the next rule".
                        Test::Eq(v) => vec![load, jump(JEQ_K, v, 0, FAIL)],
                        Test::Ne(v) => vec![load, jump(JEQ_K, v, FAIL, 0)],
                        Test::AnyBits(m) => vec![load, jump(JSET_K, m, 0, FAIL)],
                        Test::MaskedEq(m, v) => vec![load, stmt(ALU_AND_K, m), jump(JEQ_K, v, 0, FAIL)],
                    }
                })
                .collect();
            let len: usize = tests.iter().map(Vec::len).sum::<usize>() + 1;
            let mut at = 0;
            for t in tests {
                for mut ins in t {
                    at += 1;
                    let to_next_rule = u8::try_from(len - at).unwrap_or(u8::MAX);
                    if ins.jt == FAIL {
                        ins.jt = to_next_rule;
                    }
                    if ins.jf == FAIL {
                        ins.jf = to_next_rule;
                    }
                    code.push(ins);
                }
            }
            code.push(stmt(RET_K, action.ret()));
        }
        code.push(stmt(RET_K, Action::Allow.ret()));
        block_code.push(code);
    }

    let mut out = vec![
        stmt(LD_W_ABS, 4), // seccomp_data.arch
        jump(JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        stmt(RET_K, Action::Kill.ret()),
        stmt(LD_W_ABS, 0), // seccomp_data.nr
        jump(JGE_K, X32_SYSCALL_BIT, 0, 1),
        stmt(RET_K, Action::Kill.ret()),
    ];
    let tree_start = out.len();
    let mut block_start = Vec::new();
    let mut pos = tree_start + tree.len();
    for b in &block_code {
        block_start.push(pos);
        pos += b.len();
    }
    for (i, ins) in tree.into_iter().enumerate() {
        let here = tree_start + i;
        out.push(match ins {
            Ins::Plain(f) => f,
            Ins::ToBlock(b) => stmt(JA, u32::try_from(block_start[b] - here - 1).unwrap_or(0)),
            Ins::ToTree(t) => stmt(JA, u32::try_from(tree_start + t - here - 1).unwrap_or(0)),
        });
    }
    for b in block_code {
        out.extend(b);
    }
    out
}

/// A placeholder jump offset patched once a rule's length is known.
const FAIL: u8 = 0xff;

/// Emits the search over `leaves` (the syscall number is in A). Falls through past the end when
/// nothing matches.
fn search(leaves: &[Leaf], out: &mut Vec<Ins>) {
    if leaves.len() <= 3 {
        for leaf in leaves {
            match leaf {
                Leaf::Range { lo, hi, action } if lo == hi => {
                    out.push(Ins::Plain(jump(JEQ_K, *lo, 0, 1)));
                    out.push(Ins::Plain(stmt(RET_K, action.ret())));
                }
                Leaf::Range { lo, hi, action } => {
                    // lo <= nr <= hi
                    out.push(Ins::Plain(jump(JGE_K, *lo, 0, 2)));
                    out.push(Ins::Plain(jump(JGT_K, *hi, 1, 0)));
                    out.push(Ins::Plain(stmt(RET_K, action.ret())));
                }
                Leaf::Rules { nr, block } => {
                    out.push(Ins::Plain(jump(JEQ_K, *nr, 0, 1)));
                    out.push(Ins::ToBlock(*block));
                }
            }
        }
        return;
    }
    // nr >= first number of the right half: go right (a long jump over the left half).
    let mid = leaves.len() / 2;
    out.push(Ins::Plain(jump(JGE_K, leaves[mid].lo(), 0, 1)));
    let to_right = out.len();
    out.push(Ins::ToTree(0)); // patched below
    search(&leaves[..mid], out);
    // The left half ends by falling through: nothing there matched, so nothing does.
    let to_end = out.len();
    out.push(Ins::ToTree(0)); // patched below: to the final Allow
    let right = out.len();
    out[to_right] = Ins::ToTree(right);
    search(&leaves[mid..], out);
    let end = out.len();
    // Everything in the tree that falls off the end reaches the Allow return right after it.
    out[to_end] = Ins::ToTree(end);
    debug_assert!(leaves.windows(2).all(|w| w[0].hi() < w[1].lo()));
}

#[cfg(test)]
pub mod interp {
    //! A classic-BPF interpreter for seccomp programs (the subset both compilers emit), for tests.
    #![allow(clippy::cast_possible_truncation)] // test code reading 32-bit halves on purpose
    use crate::sys::SockFilter;

    #[derive(Debug)]
    pub struct Data {
        pub nr: i32,
        pub arch: u32,
        pub args: [u64; 6],
    }

    pub fn run(prog: &[SockFilter], d: &Data) -> u32 {
        let word = |off: u32| -> u32 {
            match off {
                0 => d.nr as u32,
                4 => d.arch,
                8 | 12 => 0,
                o if (16..64).contains(&o) => {
                    let a = d.args[((o - 16) / 8) as usize];
                    if (o - 16) % 8 == 0 { a as u32 } else { (a >> 32) as u32 }
                }
                _ => panic!("load from offset {off}"),
            }
        };
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let i = &prog[pc];
            pc += 1;
            match i.code {
                0x20 => a = word(i.k),
                0x06 => return i.k,
                0x05 => pc += i.k as usize,
                0x54 => a &= i.k, // ALU AND K
                0x15 | 0x35 | 0x25 | 0x45 => {
                    let t = match i.code {
                        0x15 => a == i.k,
                        0x35 => a >= i.k,
                        0x25 => a > i.k,
                        _ => a & i.k != 0,
                    };
                    pc += if t { i.jt } else { i.jf } as usize;
                }
                c => panic!("instruction {c:#x} not interpreted"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_and_the_search_finds_every_number() {
        let deny = |nr| Entry { nr, rules: vec![], action: Action::Errno(1) };
        let mut entries: Vec<Entry> = (100..140).map(deny).collect();
        entries.extend((300..310).step_by(3).map(deny));
        entries.push(Entry { nr: 41, rules: vec![vec![(0, Test::Ne(1))]], action: Action::Notify });
        let prog = compile(entries.clone());
        assert!(prog.len() < 40, "{} instructions", prog.len());
        for nr in 0..512 {
            for arg0 in [0u64, 1, 2] {
                let d = interp::Data { nr, arch: AUDIT_ARCH_X86_64, args: [arg0, 0, 0, 0, 0, 0] };
                let want = entries
                    .iter()
                    .find(|e| e.nr as i32 == nr)
                    .map_or(Action::Allow, |e| if e.rules.is_empty() || arg0 != 1 { e.action } else { Action::Allow });
                assert_eq!(interp::run(&prog, &d), want.ret(), "nr {nr} arg0 {arg0}");
            }
        }
        let x32 = interp::Data { nr: 0x4000_0027, arch: AUDIT_ARCH_X86_64, args: [0; 6] };
        assert_eq!(interp::run(&prog, &x32), Action::Kill.ret());
        let i386 = interp::Data { nr: 20, arch: 0x4000_0003, args: [0; 6] };
        assert_eq!(interp::run(&prog, &i386), Action::Kill.ret());
    }
}
