//! Classic-BPF assembler for seccomp: a policy over syscall numbers in, one binary-search program out.
//!
//! Why not a linear chain: since Linux 5.11 the kernel, on every install, runs the filter once per
//! syscall number to find the ones it may allow without running it (`seccomp_cache_prepare_bitmap`).
//! A chain of one compare per listed syscall makes each allowed number walk the whole chain; a
//! balanced search over the sorted numbers walks about log2(rules) compares instead.
//!
//! Program layout, every jump forward:
//! 1. `seccomp_data.arch` against the build's `AUDIT_ARCH_*` (anything else gets `wrong_arch`);
//! 2. load `seccomp_data.nr`, then a tree of `JGE` splits over the intervals of the number space
//!    (each interval has one outcome: the default or a rule's);
//! 3. one block per argument check (load the low 32 bits of one argument, one compare);
//! 4. one `RET` per distinct action, shared by every path that ends there.
//!
//! Allowed numbers reach their `RET ALLOW` loading only `nr` and `arch`, which is what lets the
//! kernel's cache skip the filter for them entirely.

use thiserror::Error;

/// One classic-BPF instruction, the fields of `struct sock_filter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Insn {
    pub(super) code: u16,
    pub(super) jt: u8,
    pub(super) jf: u8,
    pub(super) k: u32,
}

impl Insn {
    pub(super) fn to_sock_filter(self) -> libc::sock_filter {
        libc::sock_filter {
            code: self.code,
            jt: self.jt,
            jf: self.jf,
            k: self.k,
        }
    }
}

// The opcodes we emit, from linux/bpf_common.h (BPF_LD, BPF_W, BPF_K and BPF_JA are 0).
const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JMP_JA: u16 = 0x05; // BPF_JMP | BPF_JA
const JMP_JEQ_K: u16 = 0x05 | 0x10; // BPF_JMP | BPF_JEQ | BPF_K
const JMP_JGE_K: u16 = 0x05 | 0x30; // BPF_JMP | BPF_JGE | BPF_K
const JMP_JSET_K: u16 = 0x05 | 0x40; // BPF_JMP | BPF_JSET | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K
const ALU_AND_K: u16 = 0x04 | 0x50; // BPF_ALU | BPF_AND | BPF_K

// Offsets in `struct seccomp_data { int nr; u32 arch; u64 instruction_pointer; u64 args[6]; }`.
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;
const ARGS_OFFSET: u32 = 16;
const ARG_COUNT: u8 = 6;

/// `BPF_MAXINSNS`: the kernel refuses longer programs.
const MAX_INSNS: usize = 4096;

/// What the kernel does with a syscall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    Allow,
    /// Fail the syscall with this errno, without running it.
    Errno(u16),
    KillProcess,
}

impl Action {
    /// The filter's return value (`SECCOMP_RET_*`).
    pub(super) fn ret_value(self) -> u32 {
        match self {
            Self::Allow => libc::SECCOMP_RET_ALLOW,
            Self::Errno(errno) => libc::SECCOMP_RET_ERRNO | u32::from(errno),
            Self::KillProcess => libc::SECCOMP_RET_KILL_PROCESS,
        }
    }
}

/// A test on the low 32 bits of one syscall argument (all our arguments are `int`-sized flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ArgTest {
    /// Any of these bits is set.
    AnyBit(u32),
    Equals(u32),
}

/// One condition of [`Outcome::AllOf`]: the low 32 bits of argument `arg`, masked with `mask`,
/// equal one of `one_of`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ArgIn {
    pub(super) arg: u8,
    pub(super) mask: u32,
    pub(super) one_of: &'static [u32],
}

/// What the syscalls of a rule get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    Always(Action),
    /// `matched` if argument `arg` (0-based) passes `test`, else `otherwise`.
    Arg {
        arg: u8,
        test: ArgTest,
        matched: Action,
        otherwise: Action,
    },
    /// `matched` if every condition holds, else `otherwise` (an allowlist over several
    /// arguments, such as a socket's family, type and protocol).
    AllOf {
        all: &'static [ArgIn],
        matched: Action,
        otherwise: Action,
    },
}

/// The syscall numbers `first..=last` get `outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Rule {
    pub(super) first: u32,
    pub(super) last: u32,
    pub(super) outcome: Outcome,
}

impl Rule {
    pub(super) fn one(nr: u32, outcome: Outcome) -> Self {
        Self {
            first: nr,
            last: nr,
            outcome,
        }
    }
}

/// A whole filter: numbers no rule covers get `default`.
#[derive(Debug, Clone, Copy)]
pub(super) struct FilterSpec<'a> {
    /// The only `AUDIT_ARCH_*` value whose syscall numbers the rules describe.
    pub(super) arch: u32,
    pub(super) wrong_arch: Action,
    pub(super) rules: &'a [Rule],
    pub(super) default: Action,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub(super) enum BpfError {
    #[error("syscall rule {first}..={last} is an empty range")]
    EmptyRange { first: u32, last: u32 },
    #[error("two syscall rules cover syscall number {0}")]
    Overlap(u32),
    #[error("argument index {0} is out of range (seccomp passes 6 arguments)")]
    NoSuchArgument(u8),
    #[error("a jump over {0} instructions does not fit in 8 bits: too many rules for one program")]
    JumpTooFar(usize),
    #[error("{0} instructions exceed the kernel's limit of {MAX_INSNS}")]
    TooLong(usize),
}

/// Builds the program for `spec`.
pub(super) fn assemble(spec: &FilterSpec<'_>) -> Result<Vec<Insn>, BpfError> {
    let mut outcomes = vec![Outcome::Always(spec.default)];
    let intervals = intervals(spec.rules, &mut outcomes)?;

    let mut asm = Assembler::default();
    let mut actions: Vec<(Action, Label)> = Vec::new();
    let mut action_label =
        |asm: &mut Assembler, action: Action| match actions.iter().find(|(a, _)| *a == action) {
            Some(&(_, label)) => label,
            None => {
                let label = asm.label();
                actions.push((action, label));
                label
            }
        };

    // Where each outcome starts: a shared `RET`, or an argument check block.
    let outcome_labels: Vec<Label> = outcomes
        .iter()
        .map(|outcome| match *outcome {
            Outcome::Always(action) => action_label(&mut asm, action),
            Outcome::Arg { .. } | Outcome::AllOf { .. } => asm.label(),
        })
        .collect();

    let wrong_arch = action_label(&mut asm, spec.wrong_arch);
    let nr_check = asm.label();
    asm.stmt(LD_W_ABS, ARCH_OFFSET);
    asm.jump(JMP_JEQ_K, spec.arch, nr_check, wrong_arch);
    asm.bind(nr_check);
    asm.stmt(LD_W_ABS, NR_OFFSET);
    match intervals.as_slice() {
        [(_, only)] => asm.jump_always(outcome_labels[*only]),
        _ => {
            let root = asm.label();
            asm.search(&intervals, root, &outcome_labels);
        }
    }

    for (outcome, &label) in outcomes.iter().zip(&outcome_labels) {
        match *outcome {
            Outcome::Always(_) => {}
            Outcome::Arg {
                arg,
                test,
                matched,
                otherwise,
            } => {
                if arg >= ARG_COUNT {
                    return Err(BpfError::NoSuchArgument(arg));
                }
                let matched = action_label(&mut asm, matched);
                let otherwise = action_label(&mut asm, otherwise);
                asm.bind(label);
                asm.stmt(LD_W_ABS, arg_low_word_offset(arg));
                match test {
                    ArgTest::AnyBit(bits) => asm.jump(JMP_JSET_K, bits, matched, otherwise),
                    ArgTest::Equals(value) => asm.jump(JMP_JEQ_K, value, matched, otherwise),
                }
            }
            Outcome::AllOf {
                all,
                matched,
                otherwise,
            } => {
                let matched = action_label(&mut asm, matched);
                let otherwise = action_label(&mut asm, otherwise);
                asm.bind(label);
                // One block per condition: load, mask, then a chain of compares; a value that
                // matches goes on to the next condition, none of them to `otherwise`.
                for check in all {
                    if check.arg >= ARG_COUNT {
                        return Err(BpfError::NoSuchArgument(check.arg));
                    }
                    asm.stmt(LD_W_ABS, arg_low_word_offset(check.arg));
                    if check.mask != u32::MAX {
                        asm.stmt(ALU_AND_K, check.mask);
                    }
                    let holds = asm.label();
                    for (i, &value) in check.one_of.iter().enumerate() {
                        if i + 1 == check.one_of.len() {
                            asm.jump(JMP_JEQ_K, value, holds, otherwise);
                        } else {
                            let next = asm.label();
                            asm.jump(JMP_JEQ_K, value, holds, next);
                            asm.bind(next);
                        }
                    }
                    if check.one_of.is_empty() {
                        asm.jump_always(otherwise);
                    }
                    asm.bind(holds);
                }
                asm.jump_always(matched);
            }
        }
    }
    for &(action, label) in &actions {
        asm.bind(label);
        asm.stmt(RET_K, action.ret_value());
    }
    asm.finish()
}

/// Offset of the low 32 bits of `args[arg]` (native byte order, as the kernel fills it).
fn arg_low_word_offset(arg: u8) -> u32 {
    let high_first = if cfg!(target_endian = "big") { 4 } else { 0 };
    ARGS_OFFSET + 8 * u32::from(arg) + high_first
}

/// Splits the whole `u32` number space into intervals `(start, outcome index)`, sorted, the first
/// starting at 0, neighbours with different outcomes. New outcomes are appended to `outcomes`,
/// whose entry 0 is the default.
fn intervals(rules: &[Rule], outcomes: &mut Vec<Outcome>) -> Result<Vec<(u32, usize)>, BpfError> {
    let mut sorted = rules.to_vec();
    sorted.sort_by_key(|r| r.first);
    let mut out: Vec<(u32, usize)> = Vec::new();
    let mut push = |start: u32, outcome: usize| match out.last() {
        Some(&(_, prev)) if prev == outcome => {}
        _ => out.push((start, outcome)),
    };
    // Next number not yet covered; u64 so that a rule ending at u32::MAX does not wrap.
    let mut next: u64 = 0;
    for rule in &sorted {
        if rule.first > rule.last {
            return Err(BpfError::EmptyRange {
                first: rule.first,
                last: rule.last,
            });
        }
        if u64::from(rule.first) < next {
            return Err(BpfError::Overlap(rule.first));
        }
        if u64::from(rule.first) > next {
            push(next as u32, 0);
        }
        let index = match outcomes.iter().position(|o| *o == rule.outcome) {
            Some(i) => i,
            None => {
                outcomes.push(rule.outcome);
                outcomes.len() - 1
            }
        };
        push(rule.first, index);
        next = u64::from(rule.last) + 1;
    }
    if next <= u64::from(u32::MAX) {
        push(next as u32, 0);
    }
    Ok(out)
}

/// A position in the program, known once bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Label(usize);

#[derive(Debug)]
enum Pending {
    Stmt(Insn),
    Jump {
        code: u16,
        k: u32,
        jt: Label,
        jf: Label,
    },
    Always(Label),
}

#[derive(Debug, Default)]
struct Assembler {
    code: Vec<Pending>,
    /// Position of each label, once bound.
    labels: Vec<Option<usize>>,
}

impl Assembler {
    fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    fn bind(&mut self, label: Label) {
        self.labels[label.0] = Some(self.code.len());
    }

    fn stmt(&mut self, code: u16, k: u32) {
        self.code.push(Pending::Stmt(Insn {
            code,
            jt: 0,
            jf: 0,
            k,
        }));
    }

    fn jump(&mut self, code: u16, k: u32, jt: Label, jf: Label) {
        self.code.push(Pending::Jump { code, k, jt, jf });
    }

    fn jump_always(&mut self, to: Label) {
        self.code.push(Pending::Always(to));
    }

    /// Emits the search over `intervals` (at least two) at `at`: `JGE` on the first number of the
    /// upper half, the lower half right after, then the upper half. A half that is one interval
    /// is not emitted: the jump goes straight to its outcome.
    fn search(&mut self, intervals: &[(u32, usize)], at: Label, outcomes: &[Label]) {
        let (low, high) = intervals.split_at(intervals.len() / 2);
        let low_at = self.start_of(low, outcomes);
        let high_at = self.start_of(high, outcomes);
        self.bind(at);
        self.jump(JMP_JGE_K, high[0].0, high_at, low_at);
        if low.len() > 1 {
            self.search(low, low_at, outcomes);
        }
        if high.len() > 1 {
            self.search(high, high_at, outcomes);
        }
    }

    /// Where the search over `intervals` starts: its outcome if there is only one interval.
    fn start_of(&mut self, intervals: &[(u32, usize)], outcomes: &[Label]) -> Label {
        match intervals {
            [(_, outcome)] => outcomes[*outcome],
            _ => self.label(),
        }
    }

    /// Resolves labels into forward offsets.
    fn finish(self) -> Result<Vec<Insn>, BpfError> {
        if self.code.len() > MAX_INSNS {
            return Err(BpfError::TooLong(self.code.len()));
        }
        let labels = &self.labels;
        // Every label is bound by `assemble` before it finishes; an unbound one reads as a jump
        // past the end, which the range check refuses.
        let distance = |from: usize, to: Label| -> usize {
            labels[to.0].map_or(usize::MAX, |at| at.wrapping_sub(from + 1))
        };
        let short = |from: usize, to: Label| -> Result<u8, BpfError> {
            let d = distance(from, to);
            u8::try_from(d).map_err(|_| BpfError::JumpTooFar(d))
        };
        self.code
            .iter()
            .enumerate()
            .map(|(at, pending)| match *pending {
                Pending::Stmt(insn) => Ok(insn),
                Pending::Jump { code, k, jt, jf } => Ok(Insn {
                    code,
                    jt: short(at, jt)?,
                    jf: short(at, jf)?,
                    k,
                }),
                Pending::Always(to) => {
                    let d = distance(at, to);
                    let k = u32::try_from(d).map_err(|_| BpfError::JumpTooFar(d))?;
                    Ok(Insn {
                        code: JMP_JA,
                        jt: 0,
                        jf: 0,
                        k,
                    })
                }
            })
            .collect()
    }
}

/// A classic-BPF interpreter for the instructions seccomp filters use, to check programs in tests.
#[cfg(test)]
pub(super) mod interpreter {
    use super::*;

    /// The input of a seccomp filter.
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct SeccompData {
        pub(crate) nr: u32,
        pub(crate) arch: u32,
        pub(crate) args: [u64; 6],
    }

    impl SeccompData {
        fn word(&self, offset: u32) -> u32 {
            let mut bytes = Vec::with_capacity(64);
            bytes.extend_from_slice(&self.nr.to_ne_bytes());
            bytes.extend_from_slice(&self.arch.to_ne_bytes());
            bytes.extend_from_slice(&0u64.to_ne_bytes());
            for arg in self.args {
                bytes.extend_from_slice(&arg.to_ne_bytes());
            }
            assert_eq!(offset % 4, 0, "unaligned load at {offset}");
            let at = offset as usize;
            let word = bytes.get(at..at + 4).expect("load past seccomp_data");
            u32::from_ne_bytes([word[0], word[1], word[2], word[3]])
        }
    }

    /// What a program did with one input.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) struct Run {
        pub(crate) ret: u32,
        /// Instructions executed, `RET` included.
        pub(crate) steps: usize,
        /// Whether it loaded more than `nr` and `arch` (then the kernel cannot cache the result).
        pub(crate) read_args: bool,
    }

    /// Runs `program` on `data` like the kernel would; panics on anything the kernel would refuse
    /// (unknown opcode, backward or out-of-range jump, falling off the end).
    pub(crate) fn run(program: &[Insn], data: &SeccompData) -> Run {
        let mut acc = 0u32;
        let mut pc = 0usize;
        let mut steps = 0;
        let mut read_args = false;
        loop {
            let insn = program
                .get(pc)
                .unwrap_or_else(|| panic!("pc {pc} ran off a {}-insn program", program.len()));
            steps += 1;
            let branch = |taken: bool| pc + 1 + usize::from(if taken { insn.jt } else { insn.jf });
            pc = match insn.code {
                LD_W_ABS => {
                    read_args |= insn.k != NR_OFFSET && insn.k != ARCH_OFFSET;
                    acc = data.word(insn.k);
                    pc + 1
                }
                ALU_AND_K => {
                    acc &= insn.k;
                    pc + 1
                }
                JMP_JA => pc + 1 + insn.k as usize,
                JMP_JEQ_K => branch(acc == insn.k),
                JMP_JGE_K => branch(acc >= insn.k),
                JMP_JSET_K => branch(acc & insn.k != 0),
                RET_K => {
                    return Run {
                        ret: insn.k,
                        steps,
                        read_args,
                    }
                }
                other => panic!("opcode {other:#x} at {pc} is not one the generator emits"),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::interpreter::{run, SeccompData};
    use super::*;

    const ARCH: u32 = 0xC000_003E;
    const EPERM: Action = Action::Errno(1);
    const ENOSYS: Action = Action::Errno(38);

    fn data(nr: u32, arg0: u64) -> SeccompData {
        SeccompData {
            nr,
            arch: ARCH,
            args: [arg0, 0, 0, 0, 0, 0],
        }
    }

    fn spec(rules: &[Rule]) -> FilterSpec<'_> {
        FilterSpec {
            arch: ARCH,
            wrong_arch: Action::KillProcess,
            rules,
            default: Action::Allow,
        }
    }

    /// Jumps forward, inside the program, and it ends in `RET`: what the kernel's checker demands.
    fn assert_well_formed(program: &[Insn]) {
        assert!(program.len() <= MAX_INSNS);
        assert_eq!(program.last().map(|i| i.code), Some(RET_K));
        for (at, insn) in program.iter().enumerate() {
            let targets: Vec<usize> = match insn.code {
                JMP_JA => vec![insn.k as usize],
                JMP_JEQ_K | JMP_JGE_K | JMP_JSET_K => vec![insn.jt.into(), insn.jf.into()],
                _ => vec![],
            };
            for offset in targets {
                assert!(
                    at + 1 + offset < program.len(),
                    "jump at {at} leaves the program"
                );
            }
        }
    }

    /// Scattered rules with all kinds of outcomes, and what each number should get.
    fn mixed_rules(count: u32) -> Vec<Rule> {
        (0..count)
            .map(|i| {
                let outcome = match i % 4 {
                    0 | 1 => Outcome::Always(EPERM),
                    2 => Outcome::Always(ENOSYS),
                    _ => Outcome::Arg {
                        arg: 0,
                        test: ArgTest::AnyBit(0b100),
                        matched: EPERM,
                        otherwise: Action::Allow,
                    },
                };
                // 0, 1, 3, 4, 6, 7...: neighbours with equal outcomes merge, others do not.
                Rule::one(i * 3 / 2, outcome)
            })
            .collect()
    }

    fn expected(rules: &[Rule], nr: u32, arg0: u64) -> u32 {
        let outcome = rules
            .iter()
            .find(|r| (r.first..=r.last).contains(&nr))
            .map_or(Outcome::Always(Action::Allow), |r| r.outcome);
        match outcome {
            Outcome::Always(action) => action.ret_value(),
            Outcome::Arg {
                test: ArgTest::AnyBit(bits),
                matched,
                otherwise,
                ..
            } => if arg0 as u32 & bits != 0 {
                matched
            } else {
                otherwise
            }
            .ret_value(),
            Outcome::Arg { .. } | Outcome::AllOf { .. } => {
                unreachable!("mixed_rules uses AnyBit only")
            }
        }
    }

    #[test]
    fn search_agrees_with_the_rule_table_for_every_number() {
        for count in [0, 1, 2, 3, 5, 17, 60] {
            let rules = mixed_rules(count);
            let program = assemble(&spec(&rules)).expect("assembles");
            assert_well_formed(&program);
            for nr in 0..512 {
                for arg0 in [0, 0b100, 0b011, 1 << 32 | 0b100] {
                    let got = run(&program, &data(nr, arg0)).ret;
                    assert_eq!(got, expected(&rules, nr, arg0), "{count} rules, nr {nr}");
                }
            }
        }
    }

    #[test]
    fn path_length_grows_with_log2_of_the_rules() {
        let rules = mixed_rules(60);
        let program = assemble(&spec(&rules)).expect("assembles");
        // 60 rules make at most 121 intervals: 7 splits, plus 2 arch, 1 load, 2 arg check, 1 RET.
        let longest = (0..512).map(|nr| run(&program, &data(nr, 0)).steps).max();
        assert!(longest <= Some(13), "longest path {longest:?}");
        assert!(program.len() < 140, "{} instructions", program.len());
    }

    #[test]
    fn allowed_numbers_never_read_arguments() {
        let rules = mixed_rules(60);
        let program = assemble(&spec(&rules)).expect("assembles");
        for nr in 0..512 {
            let r = run(&program, &data(nr, 0));
            let has_arg_rule = rules
                .iter()
                .any(|rule| rule.first == nr && matches!(rule.outcome, Outcome::Arg { .. }));
            assert_eq!(r.read_args, has_arg_rule, "nr {nr}");
        }
    }

    #[test]
    fn wrong_arch_gets_its_action_before_any_number_is_looked_at() {
        let rules = mixed_rules(10);
        let program = assemble(&spec(&rules)).expect("assembles");
        for nr in [0, 3, 4, 1000] {
            let mut d = data(nr, 0);
            d.arch = 0x4000_0003; // AUDIT_ARCH_I386
            let r = run(&program, &d);
            assert_eq!(r.ret, libc::SECCOMP_RET_KILL_PROCESS);
            assert_eq!(r.steps, 3);
        }
    }

    #[test]
    fn ranges_cover_exactly_their_bounds_up_to_the_top_number() {
        let rules = [
            Rule {
                first: 10,
                last: 20,
                outcome: Outcome::Always(EPERM),
            },
            Rule {
                first: 0x4000_0000,
                last: u32::MAX,
                outcome: Outcome::Always(ENOSYS),
            },
        ];
        let program = assemble(&spec(&rules)).expect("assembles");
        assert_well_formed(&program);
        let cases = [
            (9, Action::Allow),
            (10, EPERM),
            (20, EPERM),
            (21, Action::Allow),
            (0x3fff_ffff, Action::Allow),
            (0x4000_0000, ENOSYS),
            (u32::MAX, ENOSYS),
        ];
        for (nr, action) in cases {
            assert_eq!(
                run(&program, &data(nr, 0)).ret,
                action.ret_value(),
                "nr {nr:#x}"
            );
        }
    }

    #[test]
    fn argument_checks_read_the_low_word_of_the_right_argument() {
        let rules = [
            Rule::one(
                5,
                Outcome::Arg {
                    arg: 2,
                    test: ArgTest::Equals(7),
                    matched: EPERM,
                    otherwise: Action::Allow,
                },
            ),
            Rule::one(
                6,
                Outcome::Arg {
                    arg: 0,
                    test: ArgTest::AnyBit(0x4000_0000),
                    matched: ENOSYS,
                    otherwise: EPERM,
                },
            ),
        ];
        let program = assemble(&spec(&rules)).expect("assembles");
        let with_args = |nr, args| {
            let mut d = data(nr, 0);
            d.args = args;
            run(&program, &d).ret
        };
        assert_eq!(with_args(5, [0, 0, 7, 0, 0, 0]), EPERM.ret_value());
        assert_eq!(
            with_args(5, [0, 0, 1 << 32 | 7, 0, 0, 0]),
            EPERM.ret_value()
        );
        assert_eq!(with_args(5, [7, 7, 8, 7, 7, 7]), Action::Allow.ret_value());
        assert_eq!(
            with_args(6, [0x4000_0001, 0, 0, 0, 0, 0]),
            ENOSYS.ret_value()
        );
        assert_eq!(with_args(6, [1, 0, 0, 0, 0, 0]), EPERM.ret_value());
    }

    #[test]
    fn no_rules_is_the_arch_check_and_the_default() {
        let program = assemble(&spec(&[])).expect("assembles");
        assert_well_formed(&program);
        assert_eq!(run(&program, &data(0, 0)).ret, Action::Allow.ret_value());
        assert_eq!(
            run(&program, &data(u32::MAX, 0)).ret,
            Action::Allow.ret_value()
        );
    }

    #[test]
    fn too_many_rules_for_8_bit_jumps_is_an_error_not_a_wrong_program() {
        // Alternating outcomes cannot merge: ~1200 intervals, the root's jumps cross hundreds.
        let rules: Vec<Rule> = (0..600)
            .map(|i| {
                let action = if i % 2 == 0 { EPERM } else { ENOSYS };
                Rule::one(i * 2, Outcome::Always(action))
            })
            .collect();
        assert!(matches!(
            assemble(&spec(&rules)),
            Err(BpfError::JumpTooFar(_))
        ));
    }

    #[test]
    fn malformed_rules_are_refused() {
        let deny = Outcome::Always(EPERM);
        let overlap = [
            Rule {
                first: 1,
                last: 5,
                outcome: deny,
            },
            Rule::one(5, deny),
        ];
        assert_eq!(assemble(&spec(&overlap)), Err(BpfError::Overlap(5)));
        let empty = [Rule {
            first: 5,
            last: 4,
            outcome: deny,
        }];
        assert_eq!(
            assemble(&spec(&empty)),
            Err(BpfError::EmptyRange { first: 5, last: 4 })
        );
        let bad_arg = [Rule::one(
            1,
            Outcome::Arg {
                arg: 6,
                test: ArgTest::Equals(0),
                matched: EPERM,
                otherwise: Action::Allow,
            },
        )];
        assert_eq!(assemble(&spec(&bad_arg)), Err(BpfError::NoSuchArgument(6)));
    }
}
