"""The DSL features that keep logic out of Python: let-bindings and (if ...) results, `enabled: false`,
the integer helpers, rules over op groups (fold_alu, replace), facts, and typed callback declarations.
Each has its behaviour on the engines and its located diagnostics."""
from __future__ import annotations

import itertools
import random
import textwrap

import pytest

from rulec.build import build
from rulec.compiler import compile_project
from rulec.diagnostics import CompileError
from rulec.runtime.ir.dtype import dtypes
from rulec.runtime.engine.helpers import bit_length, fold_alu, log2
from rulec.runtime.engine.matcher import RuleError
from rulec.runtime.ir.ops import Ops
from rulec.runtime.engine.rewrite import graph_rewrite
from rulec.runtime.ir.uop import UOp

x = UOp.variable("x", 0, 10)
y = UOp.variable("y", 0, 10)


def c(v, dtype=dtypes.index):
    return UOp.const(dtype, v)


def located(diags, severity: str = "error") -> list[tuple[int, int, str]]:
    """(line, col, message) of each diagnostic of `severity`, in order."""
    return [(d.loc.line, d.loc.col, d.message) for d in diags if d.severity == severity]


def rule_file(*lines: str, head: str = "") -> str:
    """Rule set `s` with one rule `a` whose keys after `name` are `lines`: the first is line 4 of the file
    (line 4 + the lines of `head`), its value at column 7 + len(key) + 2."""
    return head + "s:\n  rules:\n    - name: a\n" + "".join(f"      {ln}\n" for ln in lines)


# ------------------------------------------------------------------ let and (if ...)

THREE_WAY = """
    s:
      rules:
        - name: three-way
          match: (MUL x c@CONST :dtype index)
          let:
            m: -c.arg
            unit: m == 1
          when: m >= 0
          rewrite: (if {m == 0} 0 (if unit (NEG x) (NEG (MUL x {m}))))
"""


def test_let_and_if_make_a_three_way_decision(rules):
    rs = rules.load(THREE_WAY)
    assert rs.rewrite(x * 0) is c(0)
    assert rs.rewrite(x * -1) is -x
    assert rs.rewrite(x * -4) is -(x * 4)
    assert rs.rewrite(x * 4) is x * 4  # the guard, reading the let, declines


def test_a_let_is_computed_once_per_match(rules):
    rules.load(THREE_WAY)
    code = (rules.root / "build1" / "s.py").read_text()
    functions = code.count("def r0_three_way")  # MUL is commutative: one function per order of its sources
    blocks = code.count("_rid = 0")  # and one block per order in op_MUL, the untraced fast path
    assert functions == blocks == 2
    assert code.count("v_m = -v_c.arg") == code.count("v_unit = v_m == 1") == functions + blocks
    # computed after the pattern matched and before the guard
    assert code.index("v_c = ") < code.index("v_m = ") < code.index("v_unit = ") < code.index("if not (v_m >= 0)")


def test_lets_on_the_egglog_engine_are_inlined(rules):
    rs = rules.load("""
        s:
          rules:
            - name: fold-let
              match: (ADD a@CONST b@CONST)
              let:
                total: a.arg + b.arg
                ok: fits_int64(total) and fits_dtype(a.dtype, total)
              when: ok
              rewrite: "{total}"
    """)
    for e in (c(2) + c(3), c(-7) + c(7)):
        assert rs.rewrite(e, engine="egglog") is rs.rewrite(e)
    assert rs.egglog_skipped == []


def test_a_let_holding_a_node_is_a_result(rules):
    rs = rules.load("""
        s:
          rules:
            - name: pick
              match: (ADD a b)
              let:
                small: a if a.vmax <= b.vmax else b
              when: small.op is Ops.CONST
              rewrite: small
    """)
    assert rs.rewrite(x + 0) is c(0)
    assert rs.rewrite(x + y) is x + y


def test_an_if_result_is_skipped_on_egglog_with_its_reason(rules):
    rs = rules.load(THREE_WAY)
    assert [n for n, _ in rs.egglog_skipped] == ["three-way"]


@pytest.mark.parametrize("lines,line,col,message", [
    (["match: (ADD x 0)", "let:", "  x: 1", "rewrite: x"], 6, 9, "let 'x' has the name of a capture of rule 'a'"),
    (["match: (ADD x 0)", "let:", "  max: 1", "rewrite: x"], 6, 9, "let 'max' would hide the helper max()"),
    (["match: (ADD x 0)", "let:", "  Big: 1", "rewrite: x"], 6, 9, "invalid let name 'Big': use a lowercase identifier"),
    (["match: (ADD x 0)", "let:", "  ctx: 1", "rewrite: x"], 6, 9, "'ctx' cannot be a let name: it is reserved"),
    (["match: (ADD x 0)", "let:", "  p: q + 1", "  q: 2", "rewrite: \"{p + q}\""], 6, 12,
     "let 'q' is bound after this: a let reads the captures and the lets before it"),
    (["match: (ADD x 0)", "let: [1, 2]", "rewrite: x"], 5, 12,
     "`let:` maps names to expressions (name: expression, one per line)"),
    (["match: (ADD x 0)", "let:", "  p: zz", "rewrite: x"], 6, 12,
     "name 'zz' is not bound by the pattern of rule 'a' (it binds p, x)"),
    (["match: (ADD x 0)", "rewrite: (ADD (if {True} x x) 0)"], 5, 21,
     "(if ...) chooses the whole result (or a branch of another if); inside a node, compute the value with "
     "{a if c else b}"),
    (["match: (ADD x 0)", "rewrite: (if {True} x)"], 5, 17,
     "if takes a condition and two results: (if cond then else), got 2 items"),
])
def test_let_and_if_diagnostics(rules, lines, line, col, message):
    assert (line, col, message) in located(rules.errors(rule_file(*lines)))


def test_an_unused_let_is_a_warning(rules):
    diags = rules.warnings(rule_file("match: (ADD x 0)", "let:", "  unused: 1", "rewrite: x"))
    assert located(diags, "warning") == [(6, 9, "let 'unused' is never used")]


# ------------------------------------------------------------------ enabled: false

def test_a_disabled_rule_is_checked_but_not_compiled(rules):
    text = """
        s:
          rules:
            - name: off
              enabled: false
              match: (ADD x 0)
              rewrite: (MUL x 1)
            - name: on
              match: (ADD x 0)
              rewrite: x
    """
    rs = rules.load(text)
    assert [r.name for r in rs.rules] == ["on"] and rs.rewrite(x + 0) is x
    project = compile_project([rules.write(text)])
    assert [r.name for r in project.disabled_rules_of("s")] == ["off"]
    assert project.warnings == []  # `off` would shadow `on`, but it is off


def test_a_disabled_rule_with_a_mistake_is_still_an_error(rules):
    diags = rules.errors(rule_file("enabled: false", "match: (ADD x 0)", "rewrite: z"))
    assert located(diags) == [(6, 16, "name 'z' is not bound by the pattern of rule 'a' (it binds x)")]


@pytest.mark.parametrize("value", ["no_thanks", "0", "[]"])
def test_enabled_takes_a_bool(rules, value):
    diags = rules.errors(rule_file(f"enabled: {value}", "match: (ADD x 0)", "rewrite: x"))
    assert located(diags)[0][:2] == (4, 16) and located(diags)[0][2].startswith("`enabled:` takes true or false")


# ------------------------------------------------------------------ bit_length, log2

def test_integer_helpers():
    assert [bit_length(v) for v in (0, 1, 5, -5, 2**63)] == [0, 1, 3, 3, 64]
    assert [log2(v) for v in (1, 2, 1024, 2**100)] == [0, 1, 10, 100]
    for bad in (0, -8, 6, 2**64 + 1):
        with pytest.raises(ValueError, match="not a power of two"):
            log2(bad)
    for bad in (2.0, True, "8"):
        with pytest.raises(TypeError):
            log2(bad)
        with pytest.raises(TypeError):
            bit_length(bad)


def test_log2_of_a_non_power_names_the_rule(rules):
    rs = rules.load("""
        s:
          rules:
            - name: to-shift
              match: (MUL x c@CONST :dtype index)
              when: c.arg > 1
              rewrite: (SHL x {log2(c.arg)})
    """)
    assert rs.rewrite(x * 8) is UOp(Ops.SHL, dtypes.index, (x, c(3)))
    with pytest.raises(RuleError, match="rule s/to-shift: ValueError: log2") as info:
        rs.rewrite(x * 6)
    assert isinstance(info.value, ValueError)


def test_integer_helpers_are_typed_and_checked(rules):
    # an int result where a dtype is wanted is a check-time error; a wrong arity is located
    assert (5, 24, "log2() cannot take 2 arguments: too many positional arguments") in \
        located(rules.errors(rule_file("match: (ADD x 0)", "rewrite: (MUL x {log2(2, 3)})")))
    assert located(rules.errors(rule_file("match: (ADD x 0)", "rewrite: (MUL x 1 :dtype {bit_length(8)})")))


# ------------------------------------------------------------------ rules over op groups: fold_alu

# the fifteen per-op folds that rules/symbolic.yaml held before fold-binary and fold-neg replaced them
OLD_FOLDS = """
    old:
      rules:
        - {name: add, match: "(ADD a@CONST b@CONST :dtype ints)", when: "fits_int64(a.arg + b.arg) and fits_dtype(a.dtype, a.arg + b.arg)", rewrite: "{a.arg + b.arg}"}
        - {name: sub, match: "(SUB a@CONST b@CONST :dtype ints)", when: "fits_int64(a.arg - b.arg) and fits_dtype(a.dtype, a.arg - b.arg)", rewrite: "{a.arg - b.arg}"}
        - {name: mul, match: "(MUL a@CONST b@CONST :dtype ints)", when: "fits_int64(a.arg * b.arg) and fits_dtype(a.dtype, a.arg * b.arg)", rewrite: "{a.arg * b.arg}"}
        - {name: idiv, match: "(IDIV a@CONST b@CONST :dtype ints)", when: "b.arg != 0 and fits_int64(c_div(a.arg, b.arg)) and fits_dtype(a.dtype, c_div(a.arg, b.arg))", rewrite: "{c_div(a.arg, b.arg)}"}
        - {name: mod, match: "(MOD a@CONST b@CONST :dtype ints)", when: "b.arg != 0 and fits_int64(c_mod(a.arg, b.arg)) and fits_dtype(a.dtype, c_mod(a.arg, b.arg))", rewrite: "{c_mod(a.arg, b.arg)}"}
        - {name: max, match: "(MAX a@CONST b@CONST :dtype ints)", when: "fits_int64(a.arg, b.arg)", rewrite: "{max(a.arg, b.arg)}"}
        - {name: neg, match: "(NEG a@CONST :dtype ints)", when: "fits_int64(-a.arg) and fits_dtype(a.dtype, -a.arg)", rewrite: "{-a.arg}"}
        - {name: lt, match: "(CMPLT a@CONST b@CONST)", when: "is_int(a) and fits_int64(a.arg, b.arg)", rewrite: "{a.arg < b.arg}"}
        - {name: ne, match: "(CMPNE a@CONST b@CONST)", when: "is_int(a) and fits_int64(a.arg, b.arg)", rewrite: "{a.arg != b.arg}"}
        - {name: eq, match: "(CMPEQ a@CONST b@CONST)", when: "is_int(a) and fits_int64(a.arg, b.arg)", rewrite: "{a.arg == b.arg}"}
        - {name: and, match: "(AND a@CONST b@CONST :dtype ints|bool)", when: "fits_int64(a.arg, b.arg)", rewrite: "{a.arg & b.arg}"}
        - {name: or, match: "(OR a@CONST b@CONST :dtype ints|bool)", when: "fits_int64(a.arg, b.arg)", rewrite: "{a.arg | b.arg}"}
        - {name: xor, match: "(XOR a@CONST b@CONST :dtype ints|bool)", when: "fits_int64(a.arg, b.arg)", rewrite: "{a.arg ^ b.arg}"}
        - {name: shl, match: "(SHL a@CONST b@CONST :dtype ints)", when: "a.arg >= 0 and 0 <= b.arg < 8 * a.dtype.itemsize and fits_int64(a.arg << b.arg) and fits_dtype(a.dtype, a.arg << b.arg)", rewrite: "{a.arg << b.arg}"}
        - {name: shr, match: "(SHR a@CONST b@CONST :dtype ints)", when: "a.arg >= 0 and 0 <= b.arg < 8 * a.dtype.itemsize and fits_int64(a.arg)", rewrite: "{a.arg >> b.arg}"}
"""
NEW_FOLDS = """
    new:
      rules:
        - name: fold-binary
          match: n@(Binary CONST CONST)
          let: {v: fold_alu(n)}
          when: v is not None
          rewrite: "{v}"
        - name: fold-neg
          match: n@(NEG CONST)
          let: {v: fold_alu(n)}
          when: v is not None
          rewrite: "{v}"
"""
INT_DTYPES = [dtypes.index, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16,
              dtypes.uint32, dtypes.uint64]
FOLD_OPS = [Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR,
            Ops.XOR, Ops.SHL, Ops.SHR, Ops.POW, Ops.FDIV]


def _constants(dt, rng):
    if dt.kind == "bool":
        return [False, True]
    if dt.kind == "float":
        return [0.0, 1.0, -2.5]
    edges = {dt.min, dt.max, dt.min + 1, dt.max - 1, 0, 1, -1, 2, 3, 7, 8, 63, 64, 2**31, 2**32, 2**62, 2**63 - 1,
             2**63, 2**63 + 5}
    return sorted(v for v in edges if dt.min <= v <= dt.max) + [rng.randint(dt.min, dt.max) for _ in range(6)]


def _fold_cases():
    rng = random.Random(8)
    for dt in INT_DTYPES + [dtypes.bool, dtypes.float32]:
        for a, b in itertools.product(_constants(dt, rng), repeat=2):
            for op in FOLD_OPS:
                yield UOp(op, dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else dt, (c(a, dt), c(b, dt)))
            yield UOp(Ops.NEG, dt, (c(a, dt),))


def test_one_fold_rule_is_bit_exact_with_the_fifteen(rules):
    old, new = rules.load(OLD_FOLDS), rules.load(NEW_FOLDS)
    n = 0
    for e in _fold_cases():
        assert new.rewrite(e) is old.rewrite(e), e
        n += 1
    assert n > 10_000


def test_fold_alu_declines_what_c_leaves_undefined():
    assert fold_alu(c(7) // c(0)) is None and fold_alu(c(7) % c(0)) is None
    assert fold_alu(UOp(Ops.SHL, dtypes.int32, (c(1, dtypes.int32), c(32, dtypes.int32)))) is None
    assert fold_alu(UOp(Ops.SHR, dtypes.index, (c(-8), c(1)))) is None
    assert fold_alu(c(2**62) * c(4)) is None  # signed overflow
    assert fold_alu(UOp(Ops.ADD, dtypes.uint8, (c(200, dtypes.uint8), c(100, dtypes.uint8)))) is None  # wraps
    assert fold_alu(UOp(Ops.POW, dtypes.index, (c(2), c(3)))) is None  # not folded
    assert fold_alu(x + c(1)) is None  # a source that is not a constant
    assert fold_alu(c(7) // c(-2)) == -3 and fold_alu(c(-7) % c(2)) == -1 and fold_alu(c(1) < c(2)) is True


def test_the_fold_rule_runs_on_egglog_as_the_fifteen_did(rules):
    old, new = rules.load(OLD_FOLDS), rules.load(NEW_FOLDS)
    assert new.egglog_skipped == [] and old.egglog_skipped == []
    rng = random.Random(3)
    cases = list(_fold_cases())
    folded = 0
    for e in rng.sample(cases, 150):
        out = new.rewrite(e, engine="egglog")
        assert out is old.rewrite(e, engine="egglog"), e
        folded += out.op is Ops.CONST
    assert folded > 30


def test_a_mixed_op_set_swaps_only_its_commutative_ops(rules):
    rs = rules.load("""
        s:
          rules:
            - name: lift-left
              match: n@(ADD|SUB (WHERE g i bad@INVALID) y)
              rewrite: (WHERE g (replace n :src (i y) :tag None) bad)
    """)
    g = x < 5
    inv = UOp(Ops.INVALID, dtypes.index, ())
    w = UOp(Ops.WHERE, dtypes.index, (g, x, inv))
    assert rs.rewrite(w + y) is UOp(Ops.WHERE, dtypes.index, (g, x + y, inv))
    assert rs.rewrite(y + w) is UOp(Ops.WHERE, dtypes.index, (g, x + y, inv))  # ADD: either order
    assert rs.rewrite(w - y) is UOp(Ops.WHERE, dtypes.index, (g, x - y, inv))
    assert rs.rewrite(y - w) is y - w  # SUB: this order only


# ------------------------------------------------------------------ facts

FACTS = """
    s:
      rules:
        - name: mark
          match: v@DEFINE_VAR
          fact: v
        - name: name-it
          match: v@DEFINE_VAR
          fact:
            key: v.arg[0]
            value: v.arg[2]
        - name: mark-sources
          match: a@MUL
          fact:
            keys: "[('src', s) for s in a.src if s.op is not Ops.CONST]"
            value: "'source'"
        - name: rename
          match: v@DEFINE_VAR
          when: v.tag is None
          rewrite: (replace v :tag "seen")
"""


def test_facts_record_into_the_context_and_decline(rules):
    rs = rules.load(FACTS)
    ctx: dict = {}
    out = graph_rewrite(UOp.sink(x * 2 + y), rs.matcher, ctx=ctx)
    # every fact rule recorded, and the rule after them still rewrote the variables
    assert ctx[x] is None and ctx[y] is None and ctx["x"] == 10 and ctx["y"] == 10
    # the MUL's variable source (whatever its tag by then), and not its constant
    assert [k[1].arg[0] for k, v in ctx.items() if isinstance(k, tuple) and v == "source"] == ["x"]
    assert {u.tag for u in out.toposort() if u.op is Ops.DEFINE_VAR} == {"seen"}
    assert [(r.name, r.kind) for r in rs.rules][:3] == [("mark", "fact"), ("name-it", "fact"), ("mark-sources", "fact")]


def test_fact_rules_are_skipped_on_egglog(rules):
    rs = rules.load(FACTS)
    assert {n for n, _ in rs.egglog_skipped} >= {"mark", "name-it", "mark-sources"}
    assert all("fact" in why for n, why in rs.egglog_skipped if n != "rename")


def test_a_fact_rule_shadows_nothing(rules):
    assert rules.warnings(rule_file("match: x", "fact: x") + "    - name: b\n      match: (ADD x 0)\n"
                          "      rewrite: x\n") == []


@pytest.mark.parametrize("lines,line,col,message", [
    (["match: x", "fact: {key: x, keys: x.src}"], 5, 13,
     "a fact has `key:` (one key) or `keys:` (a sequence of them): give exactly one"),
    (["match: x", "fact: {key: x, val: 1}"], 5, 22, "unknown fact key 'val' (did you mean 'value'?)"),
    (["match: x", "fact: zz"], 5, 13, "name 'zz' is not bound by the pattern of rule 'a' (it binds x)"),
    (["match: x", "fact: x", "rewrite: x"], 3, 13, "rule 'a' has both rewrite and fact: give exactly one"),
    (["match: x", "fact: {keys: 'x.src', value: x.nope}"], 5, 37, None),
])
def test_fact_diagnostics(rules, lines, line, col, message):
    found = located(rules.errors(rule_file(*lines)))
    assert found and found[0][:2] == (line, col), found
    if message is not None:
        assert found[0][2] == message


OLD_REALIZE_PY = '''
from rulec.runtime.ir.ops import GroupOp


def realize_sink_sources(ctx, s):
    for x in s.src:
        if x.base.op not in GroupOp.AlwaysContiguous:
            ctx[x.base] = None


def realize_node(ctx, x):
    ctx[x] = None


def realize_sources(ctx, x):
    for s in x.src:
        if s.op not in GroupOp.AlwaysContiguous:
            ctx[s] = None


def realize_assign_value(ctx, a):
    if a.src[1].op not in GroupOp.AlwaysContiguous:
        ctx[a.src[1]] = None
'''
OLD_REALIZE = """
    old_marks:
      rules:
        - {name: realize-outputs, match: s@SINK, call: "old_realize:realize_sink_sources"}
        - {name: realize-explicit, match: x@ASSIGN|COPY|BUFFER_VIEW|CONTIGUOUS, call: "old_realize:realize_node"}
        - {name: realize-copy-sources, match: x@COPY|MSELECT|MSTACK, call: "old_realize:realize_sources"}
        - {name: realize-assign-value, match: a@ASSIGN, call: "old_realize:realize_assign_value"}
"""


def test_realize_marks_are_facts_that_record_what_the_callbacks_did(rules):
    """The realize stage's fact rules record the same nodes, in the same order, as the callbacks they replace."""
    from rulec.loader import load
    from rulec.runtime.resources import rules_dir

    (rules.root / "old_realize.py").write_text(textwrap.dedent(OLD_REALIZE_PY))
    old = rules.load(OLD_REALIZE)
    new = load(rules_dir() / "schedule" / "realize.yaml", name="realize_marks", build_dir=rules.root / "shipped")
    assert {r.kind for r in new.rules} == {"fact"}
    buf = UOp(Ops.BUFFER, dtypes.float32, (), 6)
    r = UOp(Ops.RESHAPE, dtypes.float32, (buf,), (2, 3))
    e = UOp(Ops.EXP2, dtypes.float32, (r,))
    cont = UOp(Ops.CONTIGUOUS, dtypes.float32, (e,))
    assign = UOp(Ops.ASSIGN, dtypes.float32, (buf, UOp(Ops.ADD, dtypes.float32, (r, e))))
    copy = UOp(Ops.COPY, dtypes.float32, (cont, UOp(Ops.DEVICE, dtypes.void, (), "CPU")))
    for sink in (UOp.sink(e, cont), UOp.sink(assign, copy, r), UOp.sink(UOp(Ops.NEG, dtypes.float32, (copy,)))):
        for bottom_up in (False, True):
            want: dict = {}
            got: dict = {}
            graph_rewrite(sink, old.matcher, ctx=want, bottom_up=bottom_up)
            graph_rewrite(sink, new.matcher, ctx=got, bottom_up=bottom_up)
            assert list(got) == list(want) and want


# ------------------------------------------------------------------ typed callback declarations

CALLBACKS_PY = '''
from rulec.runtime.ir.uop import UOp


def negate(ctx, x):
    return -x


def first(x, rest):
    return rest[0] if rest else None


def broken(x):
    return 3


def scaled(x, k):
    return x * k if k > 1 else None
'''


_modules = itertools.count()


def _typed(rules, decls: str, *rule_lines: str, source: str = CALLBACKS_PY):
    """A rule file declaring `decls` (;-separated) for a fresh callback module beside it, named in the rule
    lines as MOD (a new name each time: a module imported by an earlier test stays in sys.modules)."""
    module = f"typed_cbs_{next(_modules)}"
    (rules.root / f"{module}.py").write_text(textwrap.dedent(source))
    head = f"callbacks:\n  {module}:\n" + "".join(f"    - {d}\n" for d in decls.split(";"))
    return rule_file(*(ln.replace("MOD", module) for ln in rule_lines), head=head).replace("MOD", module)


def test_a_declared_callback_runs_and_its_result_is_checked(rules):
    text = _typed(rules, "negate(context, node) -> node;broken(node) -> node?", "match: (ADD x 0)", "call: MOD:negate")
    module = text.split("\n")[1].strip(" :")
    rs = rules.load(text + f"    - name: b\n      match: (MUL x 1)\n      call: {module}:broken\n")
    assert rs.rewrite(x + 0) is -x
    with pytest.raises(RuleError, match=r"rule s/b: RuleTypeError: the callback is declared to return node\? "
                                        r"\(a node or None\), but returned int 3"):
        rs.rewrite(x * 1)


def test_a_rest_capture_is_a_nodes_parameter(rules):
    rs = rules.load(_typed(rules, "first(node, nodes) -> node?", "match: (VECTORIZE x ...rest)",
                           "call: MOD:first"))
    assert rs.rewrite(UOp(Ops.VECTORIZE, dtypes.index, (x, y))) is y


def test_a_let_is_a_value_parameter(rules):
    rs = rules.load(_typed(rules, "scaled(node, value) -> node?", "match: (MUL x c@CONST)", "let:", "  k: c.arg * 2",
                           "when: c.arg % 2 == 1", "call: MOD:scaled"))
    assert rs.rewrite(x * 3) is x * 6 and rs.rewrite(x * 4) is x * 4
    assert rs.rewrite(x * -1) is x * -1  # k = -2: the callback declines


@pytest.mark.parametrize("decls,lines,where,message", [
    ("negate(context, node) -> node", ["match: (ADD x 0)", "call: MOD:first"], (8, 13),
     "callback 'first' is not declared under 'MOD' in `callbacks:` (declared: negate)"),
    ("negate(node) -> node", ["match: (ADD x 0)", "call: MOD:negate"], (3, 7),
     "callback negate is declared with 1 parameter(s) but its def takes 2 (ctx, x)"),
    ("negate(node, node) -> node", ["match: (ADD x 0)", "call: MOD:negate"], (3, 7),
     "callback negate: the stage context is the parameter `ctx`, and only it has kind context (parameter "
     "'ctx' is declared node)"),
    ("first(node, node) -> node?", ["match: (VECTORIZE x ...rest)", "call: MOD:first"], (8, 13),
     "callback first takes 'rest' as a node capture, but rule 'a' binds it to a rest capture"),
    ("negate(context, node) -> nodes", ["match: (ADD x 0)", "call: MOD:negate"], (3, 7),
     "unknown result kind 'nodes' (expected one of: node, node?, none): 'negate(context, node) -> nodes'"),
    ("negate(context, tensor) -> node", ["match: (ADD x 0)", "call: MOD:negate"], (3, 7),
     "unknown parameter kind 'tensor' (expected one of: node, nodes, value, context): "
     "'negate(context, tensor) -> node'"),
    ("negate", ["match: (ADD x 0)", "call: MOD:negate"], (3, 7),
     "a callback declaration reads `function(kind, ...) -> result`: 'negate'"),
])
def test_typed_declaration_diagnostics(rules, decls, lines, where, message):
    text = _typed(rules, decls, *lines)
    module = text.split("\n")[1].strip(" :")
    found = located(rules.errors(text))
    assert (*where, message.replace("MOD", module)) in found, found


def test_the_loaded_matcher_checks_the_declaration_again():
    """A callback module edited after the build: loading compares the function with the declared parameters."""
    from rulec.runtime.engine.callback_import import CallbackImportError
    from rulec.runtime.engine.genlib import callback

    assert callback("rulec.runtime.schedule.callbacks.realize", "realize_marked_sources", ("ctx", "x")).__name__ == \
        "realize_marked_sources"
    with pytest.raises(CallbackImportError, match=r"declared with parameters \(x\) but takes \(ctx, x\)"):
        callback("rulec.runtime.schedule.callbacks.realize", "realize_marked_sources", ("x",))


def test_the_shipped_realize_rules_declare_their_callback():
    from rulec.runtime.resources import rules_dir

    project = compile_project([rules_dir() / "schedule" / "realize.yaml"])
    (rule,) = project.rules_of("add_realize")
    assert rule.call.result == "node?" and rule.call.params == ("ctx", "x")
    assert {r.kind for r in project.rules_of("realize_marks")} == {"fact"}


def test_build_verifies_the_declaration_against_the_imported_function(rules):
    """`rulec check` reads the def; the build imports the module, whose function may differ from its def
    (here a decorator changes the parameters): the build compares the declaration with what it imported."""
    path = rules.write(_typed(rules, "negate(context, node) -> node", "match: (ADD x 0)", "call: MOD:negate",
                              source=textwrap.dedent(CALLBACKS_PY) + textwrap.dedent('''
        import functools


        def _one_arg(f):
            @functools.wraps(f)
            def g(x):
                return f(None, x)
            g.__signature__ = __import__("inspect").signature(lambda x: None)
            return g


        @_one_arg
        def negate(ctx, x):
            return -x
    ''')))
    module = path.read_text().split("\n")[1].strip(" :")
    compile_project([path])  # the def takes (ctx, x): checking passes
    with pytest.raises(CompileError) as info:
        build([path], rules.root / "out")
    assert located(info.value.diagnostics) == [(3, 7, f"callback negate is declared with 2 parameter(s) but "
                                                       f"{module}:negate takes 1")]
