"""ALU ops in the index arithmetic of every kernel of the kernel-count corpus: rulec against tinygrad 0.14.

    PYTHONPATH=/path/to/tinygrad-0.14 python bench/index_alu.py

Index arithmetic: the integer ALU nodes an address is computed from (the index operand of every INDEX into
a buffer, not what a load reads), each node counted once per kernel (both compilers share common
subexpressions). rulec's kernels are counted after its CPU lowering (rules/codegen/cpu.pipeline.yaml) without its
`upcast` stage (which writes each index once per lane);
tinygrad's after `full_rewrite_to_sink` for its CPU renderer without its kernel optimizer (no upcasts or
unrolling: the same loop nests as rulec's simple loops). Programs are those of
tests/test_schedule_counts.py.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

INT_ALU = {"ADD", "SUB", "MUL", "IDIV", "MOD", "SHL", "SHR", "AND", "OR", "XOR", "MAX", "NEG", "WHERE", "CMPLT",
           "CMPNE", "CMPEQ"}


def count_index_alu(sink, is_int, op_name, load_name="LOAD") -> int:
    """Distinct integer ALU nodes under the index operands of the kernel's INDEX nodes, not below a LOAD."""
    seen: set = set()
    stack = [u.src[1] for u in sink.toposort() if op_name(u) == "INDEX" and len(u.src) > 1]
    while stack:
        u = stack.pop()
        if u in seen or op_name(u) == load_name:
            continue
        seen.add(u)
        stack.extend(u.src)
    return sum(1 for u in seen if op_name(u) in INT_ALU and is_int(u))


def rulec_counts(build, inputs) -> list[int]:
    from rulec import Tensor
    from rulec.runtime.codegen.lower import lower

    outs = build(*[Tensor(a) for a in inputs])
    return [count_index_alu(lower(it.ast, "cpu", without=("upcast",)).lowered, lambda u: u.dtype.scalar.kind in ("int", "uint", "index"),
                            lambda u: u.op.name) for it in Tensor.schedule(*outs) if it.ast.op.name == "SINK"]


def tinygrad_counts(build, inputs) -> list[int] | None:
    try:
        from tinygrad import Device, Tensor, dtypes
        from tinygrad.codegen import full_rewrite_to_sink
    except ImportError:
        return None
    import test_schedule_counts

    ts = [Tensor(a).realize() for a in inputs]
    saved, test_schedule_counts.Tensor = test_schedule_counts.Tensor, Tensor  # programs that name Tensor
    try:
        outs = build(*ts)
    finally:
        test_schedule_counts.Tensor = saved
    ren = Device["CPU"].renderer
    counts = []
    linear = outs[0].schedule_linear(*outs[1:])  # tinygrad 0.14: a LINEAR of CALLs; a kernel CALLs a SINK
    for call in linear.src:
        if not call.src or call.src[0].op.name != "SINK":
            continue
        sink = full_rewrite_to_sink(call.src[0], ren, optimize=False)
        counts.append(count_index_alu(sink, lambda u: dtypes.is_int(u.dtype), lambda u: u.op.name))
    return counts


def main() -> None:
    import os

    os.environ.setdefault("DEV", "CPU")
    from test_schedule_counts import PROGRAMS

    print("| program | rulec kernels: index ALU ops | tinygrad kernels: index ALU ops | rulec total | tinygrad total |")
    print("|---|---|---|---|---|")
    more = fewer = 0
    for name, build, _, inputs, _ in PROGRAMS:
        ours = rulec_counts(build, inputs)
        try:
            theirs = tinygrad_counts(build, inputs)
        except Exception as e:  # noqa: BLE001 - a program written with rulec-only API: say so, go on
            theirs, note = None, f"n/a ({type(e).__name__})"
        else:
            note = "n/a" if theirs is None else str(theirs)
        t_total = "n/a" if theirs is None else str(sum(theirs))
        if theirs is not None:
            more += sum(ours) > sum(theirs)
            fewer += sum(ours) < sum(theirs)
        print(f"| {name} | {ours} | {note} | {sum(ours)} | {t_total} |")
    print(f"\nprograms where rulec has more index ALU ops: {more}; fewer: {fewer}")


if __name__ == "__main__":
    main()
