"""Static checks: each bad rule file gives one exact message at an exact line:col, rendered with the
source line and a caret under the offending text.

Most checks have one shape (a rule file -> one located diagnostic) and are rows of CASES, run by
test_located_diagnostic; the checks that need more (several diagnostics, files written beside the rule
file, clean files) are functions below the table."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from rulec.build import build
from rulec.diagnostics import CompileError
from rulec.parse import RULE_KEYS


def only(diags: list, severity: str = "error"):
    """The one diagnostic of `severity` (there must be exactly one)."""
    found = [d for d in diags if d.severity == severity]
    assert len(found) == 1, "\n".join(d.render() for d in diags)
    return found[0]


def assert_diag(d, line: int, col: int, message: str, length: int | None = None) -> None:
    assert (d.loc.line, d.loc.col) == (line, col), d.render()
    assert d.message == message
    if length is not None:
        assert d.length == length
    # rendered: `file:line:col: severity: message`, the source line, and a caret under the column
    rendered = d.render().split("\n")
    assert rendered[0] == f"{d.loc.file}:{line}:{col}: {d.severity}: {message}"
    source = Path(d.loc.file).read_text().split("\n")[line - 1].replace("\t", " ")
    assert rendered[1] == f"  {line:>4} | {source}"
    gutter = "       | "
    assert rendered[2].startswith(gutter)
    caret = rendered[2][len(gutter):]
    assert caret.index("^") == col - 1
    assert caret == " " * (col - 1) + "^" + "~" * (min(d.length, len(source) - col + 1) - 1)


def error(rules, text: str):
    return only(rules.errors(text))


def one_rule(*lines: str, name: str = "a") -> str:
    """A file holding rule set `s` with the one rule `name`; `lines` are the rule's keys after its name, so
    the first of them is line 4 of the file and its value starts at column 7 + len(key) + 2."""
    return f"s:\n  rules:\n    - name: {name}\n" + "".join(f"      {line}\n" for line in lines)


DSL = "callbacks: [dsl_callbacks]\n"
# dsl_callbacks.py's line of NOT_A_FUNCTION, which a message quotes
NOT_A_FUNCTION_LINE = (Path(__file__).parent / "dsl_callbacks.py").read_text().split("\n").index(
    "NOT_A_FUNCTION = 3") + 1


@dataclass(frozen=True)
class Case:
    id: str
    text: str
    line: int
    col: int
    message: str  # the whole message; `{file}` stands for the rule file's path
    length: int | None = None  # the caret's length, where the case pins it
    severity: str = "error"
    no_warnings: bool = False  # the error must come alone, without a follow-on warning


CASES = [
    # ------------------------------------------------------------------ YAML
    Case("invalid_yaml", "s:\n  rules:\n    - name: a\n      match: (ADD x 0\n     rewrite: x\n", 5, 6,
         "invalid YAML: did not find expected '-' indicator (while parsing a block collection at line 3)"),
    Case("invalid_yaml_unclosed_quote_points_at_the_quote", one_rule('match: "(ADD x 0)'), 4, 14,
         "invalid YAML: found unexpected end of stream (while scanning a quoted scalar that starts here)"),
    Case("invalid_yaml_at_the_end_of_the_file", "s:\n  rules: [\n", 2, 11,
         "invalid YAML: did not find expected node content at the end of the file"),
    Case("invalid_yaml_tab", "s:\n\trules: []\n", 2, 1,
         "invalid YAML: found character that cannot start any token (a tab: YAML indents with spaces)"),
    Case("duplicate_yaml_key", one_rule("match: (ADD x 0)", "rewrite: x", "match: (MUL x 1)"), 6, 7,
         "duplicate key 'match' (first at line 4)", 5),
    Case("rule_file_must_be_a_mapping", "- s\n", 1, 1, "a rule file maps rule-set names to rule sets"),
    # ------------------------------------------------------------------ names of ops, groups, dtypes
    Case("unknown_op", one_rule("match: (ADDD x 0)", "rewrite: x"), 4, 15,
         "unknown op or group 'ADDD' (did you mean 'ADD'?)", 4),
    Case("unknown_op_in_a_result", one_rule("match: (NEG x)", "rewrite: (NEGG x)"), 5, 17,
         "unknown op 'NEGG' (did you mean 'NEG'?)", 4),
    Case("op_set_in_a_result", one_rule("match: (NEG x)", "rewrite: (ADD|MUL x x)"), 5, 17,
         "a result must name one op, not 'ADD|MUL'", 7),
    Case("unknown_group", one_rule("match: (CONTIGUOUS (Movment x))", "rewrite: x"), 4, 27,
         "unknown op or group 'Movment' (did you mean 'Movement'?)", 7),
    Case("unknown_group_in_a_negated_alternative", one_rule("match: (CONTIGUOUS x@!CONST|Bufer)", "rewrite: x"),
         4, 35, "unknown op or group 'Bufer' (did you mean 'Buffer'?)", 5),
    Case("unknown_dtype", one_rule("match: (NEG x :dtype int32|flaot32)", "rewrite: x"), 4, 34,
         "unknown dtype 'flaot32' (did you mean 'float32'?)", 7),
    Case("unknown_dtype_lists_the_dtypes", one_rule("match: (NEG x :dtype complex)", "rewrite: x"), 4, 28,
         "unknown dtype 'complex' (dtypes: bool, int8, uint8, int16, uint16, int32, uint32, int64, uint64, "
         "float16, bfloat16, float32, float64, index, void, half, float, double, int, long, char, uchar, short, "
         "ushort, uint, ulong; classes: ints, sints, uints, floats)", 7),
    Case("unknown_dtype_in_a_result", one_rule("match: (NEG x)", "rewrite: (CAST x :dtype float33)"), 5, 31,
         "unknown dtype 'float33' (did you mean 'float32'?)", 7),
    Case("capture_as_a_result_dtype", one_rule("match: (NEG x)", "rewrite: (CAST x :dtype x)"), 5, 31,
         "unknown dtype 'x' (for the dtype of a captured node, write x.dtype)", 1),
    Case("unknown_dtype_in_an_expression",
         one_rule("match: (NEG x)", "when: x.dtype == dtypes.flaot32", "rewrite: x"), 5, 24,
         "unknown dtype dtypes.flaot32 (did you mean 'float32'?)", 14),
    # ------------------------------------------------------------------ arity
    Case("wrong_arity_in_a_pattern", one_rule("match: (ADD x 0 x)", "rewrite: x"), 4, 14,
         "ADD takes 2 sources, but the pattern gives 3"),
    Case("wrong_arity_with_more_sources", one_rule("match: (NEG (NEG x x ...))", "rewrite: x"), 4, 19,
         "NEG takes 1 source, but the pattern gives 2 or more"),
    Case("wrong_arity_for_every_op_of_a_group", one_rule("match: (ALU x x x x)", "rewrite: x"), 4, 14,
         "the ops of ALU take 1, 2, 3 sources, but the pattern gives 4"),
    Case("wrong_arity_in_a_result", one_rule("match: (ADD x 0)", "rewrite: (NEG x x)"), 5, 16,
         "NEG takes 1 source, but the result gives 2"),
    # ------------------------------------------------------------------ names
    Case("unbound_name_in_a_rewrite", one_rule("match: (ADD x 0)", "rewrite: (NEG y)"), 5, 21,
         "name 'y' is not bound by the pattern of rule 'a' (it binds x)", 1),
    Case("unbound_name_with_a_suggestion", one_rule("match: (ADD xs 0)", "rewrite: xss"), 5, 16,
         "name 'xss' is not bound by the pattern of rule 'a' (did you mean 'xs'?)", 3),
    Case("unbound_name_in_a_guard", one_rule("match: (ADD x 0)", "when: x.arg == y.arg", "rewrite: x"), 5, 22,
         "name 'y' is not bound by the pattern of rule 'a' (it binds x)", 1),
    Case("unbound_name_in_a_computed_arg", one_rule("match: (RESHAPE x)", "rewrite: (RESHAPE x :arg z.shape)"),
         5, 32, "name 'z' is not bound by the pattern of rule 'a' (it binds x)", 1),
    Case("unbound_name_when_nothing_is_bound", one_rule("match: (ADD _ 0)", "rewrite: q"), 5, 16,
         "name 'q' is not bound by the pattern of rule 'a' (it binds no names)", 1),
    Case("rest_capture_used_as_a_node", one_rule("match: (SINK x ...rest)", "rewrite: (SINK rest x)"), 5, 22,
         "'rest' captures several sources: splice it with ...rest", 4),
    Case("keyword_as_a_capture_name", one_rule("match: (ADD x in)", "rewrite: x"), 4, 21,
         "'in' cannot be a capture name: it is a Python keyword", 2),
    Case("capture_hiding_a_helper", one_rule("match: (ADD x len@CONST)", "when: len(x.src) == 0", "rewrite: len"),
         5, 13, "'len' is a capture of rule 'a', which hides the helper len(); rename the capture", 3),
    # ------------------------------------------------------------------ expressions
    Case("unknown_helper", one_rule("match: (ADD x 0)", "when: frob(x) > 1", "rewrite: x"), 5, 13,
         "unknown helper 'frob' (see docs/rules.md for the registered helpers)", 4),
    Case("unknown_helper_with_a_suggestion", one_rule("match: (ADD x 0)", "when: lenn(x.src) > 1", "rewrite: x"),
         5, 13, "unknown helper 'lenn' (did you mean 'len'?)", 4),
    Case("lambda_is_not_allowed", one_rule("match: (ADD x 0)", 'when: "(lambda q: q)(x)"', "rewrite: x"), 5, 15,
         "lambda is not allowed in rule expressions", 11),
    Case("walrus_is_not_allowed", one_rule("match: (ADD x 0)", "when: (q := x) is x", "rewrite: x"), 5, 14,
         "':=' is not allowed in rule expressions", 6),
    Case("attribute_not_in_the_whitelist", one_rule("match: (ADD x 0)", "when: x.__class__ is None", "rewrite: x"),
         5, 14, "attribute .__class__ is not readable in rule expressions (allowed: addrspace, arg, base, dtype, "
         "is_float, is_int, is_unsigned, itemsize, kind, name, ndim, op, ranges, scalar, shape, size, src, tag, "
         "vmax, vmin)", 10),
    Case("method_call", one_rule("match: (ADD x 0)", "when: x.src.count(x) > 1", "rewrite: x"), 5, 18,
         "only registered helpers can be called: write helper(x), not x.count()", 6),
    Case("keyword_arguments", one_rule("match: (ADD x 0)", "when: max(x.arg, default=0) > 1", "rewrite: x"), 5, 24,
         "a keyword argument is not allowed in rule expressions", 9),
    Case("invalid_expression_syntax", one_rule("match: (ADD x 0)", "when: x.arg ==", "rewrite: x"), 5, 21,
         "invalid expression: invalid syntax"),
    Case("a_tuple_arg_needs_braces", one_rule("match: (RESHAPE x)", "rewrite: (RESHAPE x :arg (16,))"), 5, 32,
         ":arg takes a literal or an expression, not a node; write a tuple as {(1, 2)}"),
    # ------------------------------------------------------------------ callbacks
    Case("callback_module_not_declared", one_rule("match: (ADD x 0)", "call: no_such_module_xyz:f"), 5, 13,
         "callback module 'no_such_module_xyz' is not declared: list it under `callbacks:` at the top of "
         "rules1.yaml, or put no_such_module_xyz.py beside it", no_warnings=True),  # no "capture 'x' is never used"
    Case("callback_function_missing", one_rule("match: (ADD x 0)", "call: dsl_callbacks:nothing_here") + DSL, 5, 13,
         "module 'dsl_callbacks' has no function 'nothing_here'"),
    Case("callback_function_missing_with_a_suggestion",
         one_rule("match: (ADD x 0)", "call: dsl_callbacks:negat") + DSL, 5, 13,
         "module 'dsl_callbacks' has no function 'negat' (did you mean 'negate'?)"),
    Case("callback_that_is_not_a_function", one_rule("match: (ADD x 0)", "call: dsl_callbacks:NOT_A_FUNCTION") + DSL,
         5, 13, f"'dsl_callbacks:NOT_A_FUNCTION' is a variable, not a function (line {NOT_A_FUNCTION_LINE} of "
         f"dsl_callbacks.py); a callback must be a def in the module it is named from"),
    Case("callback_parameters_must_be_bound_names", one_rule("match: (ADD x 0)", "call: dsl_callbacks:takes_y") + DSL,
         5, 13, "callback takes_y takes parameter 'y', but rule 'a' binds x", no_warnings=True),
    Case("callback_with_star_args", one_rule("match: (ADD x 0)", "call: dsl_callbacks:takes_star") + DSL, 5, 13,
         "callback takes_star takes *args/**kwargs; name its parameters after the captures of rule 'a'"),
    Case("callback_with_keyword_only_parameters",
         one_rule("match: (ADD x 0)", "call: dsl_callbacks:keyword_only") + DSL, 5, 13,
         "callback keyword_only takes keyword-only parameter 'x'; rulec passes captures by position"),
    Case("callback_spec_syntax", one_rule("match: (ADD x 0)", "call: dsl_callbacks.negate"), 5, 13,
         "call must be 'package.module:function', got 'dsl_callbacks.negate'"),
    Case("ctx_is_reserved", one_rule("match: (ADD ctx 0)", "rewrite: 0"), 4, 19,
         "'ctx' is reserved for the callback context", 3),
    # ------------------------------------------------------------------ rules and rule sets
    Case("duplicate_rule_names",
         one_rule("match: (ADD x 0)", "rewrite: x") + "    - name: a\n      match: (MUL x 1)\n      rewrite: x\n",
         6, 13, "duplicate rule name 'a' in rule set 's' (first defined at {file}:3:13)", 1),
    Case("invalid_rule_set_name", "a/b:\n  rules:\n    - name: a\n      match: (ADD x 0)\n      rewrite: x\n", 1, 1,
         "invalid rule-set name 'a/b': use letters, digits, '_' and '-'", 3),
    Case("unknown_include", "s:\n  include: [bsae]\n  rules:\n    - name: a\n      match: (ADD x 0)\n      rewrite: x\n"
         "base:\n  rules:\n    - name: b\n      match: (MUL x 1)\n      rewrite: x\n", 2, 13,
         "include of unknown rule set 'bsae' (did you mean 'base'?)", 4),
    Case("include_of_itself", "a:\n  include: [a]\n  rules:\n    - name: r\n      match: (ADD x 0)\n      rewrite: x\n",
         2, 13, "include cycle: rule set 'a' includes itself", 1),
    Case("rule_with_both_rewrite_and_call",
         one_rule("match: (ADD x 0)", "rewrite: x", "call: dsl_callbacks:negate") + DSL, 3, 13,
         "rule 'a' has both rewrite and call: give exactly one", 1),
    Case("rule_with_neither_rewrite_nor_call", one_rule("match: (ADD x 0)"), 3, 13,
         "rule 'a' has neither rewrite nor call: give exactly one", 1),
    Case("rule_without_match", one_rule("rewrite: x"), 3, 13, "rule 'a' has no match", 1),
    # only the misspelled key: not also "rule 'a' has neither rewrite nor call"
    Case("unknown_rule_key", one_rule("match: (ADD x 0)", "rewrit: x"), 5, 7,
         "unknown rule key 'rewrit' (did you mean 'rewrite'?)", 6),
    Case("unknown_rule_key_without_a_suggestion", one_rule("match: (ADD x 0)", "rewrite: x", "priority: 3"), 6, 7,
         f"unknown rule key 'priority' (expected one of: {', '.join(RULE_KEYS)})", 8),
    Case("unknown_rule_set_key",
         "s:\n  includes: [q]\n  rules:\n    - name: a\n      match: (ADD x 0)\n      rewrite: x\n", 2, 3,
         "unknown rule-set key 'includes' (did you mean 'include'?)", 8),
    # ------------------------------------------------------------------ s-expressions
    Case("unclosed_paren", one_rule("match: (ADD (NEG x) 0", "rewrite: x"), 4, 14, "unclosed '('"),
    Case("unexpected_close_paren", one_rule("match: (ADD x 0))", "rewrite: x"), 4, 23, "unexpected ')'"),
    Case("unclosed_brace", one_rule("match: (ADD x 0)", "rewrite: (MUL x {x.arg[0])"), 5, 23, "unclosed '{'"),
    Case("several_terms", one_rule("match: ADD x 0", "rewrite: x"), 4, 18,
         "expected one term; wrap several in parentheses"),
    Case("capture_written_inside_the_list", one_rule("match: (x@ADD y 0)", "rewrite: y"), 4, 15,
         "write the capture before the list: x@(OP ...)", 5),
    Case("capture_of_a_capture", one_rule("match: (NEG x@y)", "rewrite: x"), 4, 19,
         "'x@y' names one node twice: write x, or x@OP", 3),
    # ------------------------------------------------------------------ warnings
    Case("shadowed_rule",
         one_rule("match: (ADD x _)", "rewrite: x", name="any-add") + "    - name: add-zero\n"
         "      match: (ADD x 0)\n      rewrite: x\n", 6, 13,
         "rule 'add-zero' can never fire: rule 'any-add' at {file}:3:13 matches everything it matches and has no "
         "guard", 8, "warning"),
    Case("shadowed_rule_with_swapped_sources",
         one_rule("match: (ADD x 0)", "rewrite: x", name="zero-right") + "    - name: zero-left\n"
         "      match: (ADD 0 y)\n      rewrite: y\n", 6, 13,
         "rule 'zero-left' can never fire: rule 'zero-right' at {file}:3:13 matches everything it matches and has "
         "no guard", 9, "warning"),
    Case("shadowed_by_an_included_rule",
         "base:\n  rules:\n    - name: any-neg\n      match: (NEG x)\n      rewrite: x\n"
         "top:\n  include: [base]\n  rules:\n    - name: neg-neg\n      match: (NEG (NEG x))\n      rewrite: x\n",
         9, 13, "rule 'neg-neg' can never fire: rule 'any-neg' at {file}:3:13 (included from rule set 'base') "
         "matches everything it matches and has no guard", 7, "warning"),
    Case("unused_capture", one_rule("match: (ADD x y)", "rewrite: x"), 4, 21,
         "capture 'y' is never used (write _ to match without capturing)", 1, "warning"),
    Case("too_many_commutative_orderings",
         one_rule("match: (ADD (MUL (ADD (MUL (ADD x 1) 2) 3) 4) 5)", "rewrite: x", name="deep"), 3, 13,
         "rule 'deep' has more than 16 orderings of its commutative sources; only 16 are matched (split it into "
         "smaller rules)", 4, "warning"),
    # ------------------------------------------------------------------ positions inside YAML scalars
    Case("exact_position_in_a_literal_block",
         one_rule("match: |", "  (ADD", "    (NEG x)", "    (MUL x Bogus))", "rewrite: x"), 7, 18,
         "unknown op or group 'Bogus'", 5),
    Case("position_in_a_multi_line_guard",
         one_rule("match: (ADD x y)", "when: |", "  x.arg == 1 and", "    zz.arg == y.arg", "rewrite: x"), 7, 11,
         "name 'zz' is not bound by the pattern of rule 'a' (it binds x, y)", 2),
    Case("position_in_a_multi_line_rewrite",
         one_rule("match: (ADD x y)", "rewrite: |", "  (MUL", "    x", "    (NEG q))"), 8, 16,
         "name 'q' is not bound by the pattern of rule 'a' (it binds x, y)", 1),
    Case("position_after_non_ascii_text_in_a_guard",
         one_rule("match: (BUFFER)", "when: \"'é' != zz\"", "rewrite: (BUFFER :arg 1)"), 5, 21,
         "name 'zz' is not bound by the pattern of rule 'a' (it binds no names)", 2),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_located_diagnostic(rules, case: Case):
    diags = rules.errors(case.text) if case.severity == "error" else rules.warnings(case.text)
    d = only(diags, case.severity)
    assert_diag(d, case.line, case.col, case.message.replace("{file}", d.loc.file), case.length)
    if case.no_warnings:
        assert not [x for x in diags if x.severity == "warning"]


# ------------------------------------------------------------------ checks that need more than one file text

def test_callback_module_that_fails_to_import(rules):
    # a module beside the rule file needs no declaration; this one raises when the build imports it
    (rules.root / "broken_callbacks_xyz.py").write_text("1 / 0\n\n\ndef f(x):\n    return x\n")
    d = error(rules, one_rule("match: (ADD x 0)", "call: broken_callbacks_xyz:f"))
    assert_diag(d, 5, 13, "cannot import callback module 'broken_callbacks_xyz': ZeroDivisionError: division by zero")


def test_duplicate_rule_set_names_across_files(rules):
    text = one_rule("match: (ADD x 0)", "rewrite: x")
    first, second = rules.write(text, "first.yaml"), rules.write(text, "second.yaml")
    with pytest.raises(CompileError) as info:
        build([first, second], rules.root / "out")
    d = only(info.value.diagnostics)
    assert d.loc.file == "second.yaml"
    assert_diag(d, 1, 1, "rule set 's' is already defined at first.yaml:1:1", 1)


# ------------------------------------------------------------------ several diagnostics

def test_include_cycle(rules):
    diags = rules.errors("a:\n  include: [b]\nb:\n  include: [c]\nc:\n  include: a\n  rules:\n    - name: r\n"
                         "      match: (ADD x 0)\n      rewrite: x\n")
    assert [(d.loc.line, d.loc.col, d.message) for d in diags] == [
        (2, 13, "include cycle: a -> b -> c -> a"),
        (4, 13, "include cycle: b -> c -> a -> b"),
        (6, 12, "include cycle: c -> a -> b -> c"),
    ]
    assert_diag(diags[0], 2, 13, "include cycle: a -> b -> c -> a", 1)


def test_including_a_cycle_from_outside_is_not_a_cycle(rules):
    diags = rules.errors("top:\n  include: [b]\nb:\n  include: [c]\nc:\n  include: [b]\n  rules:\n    - name: r\n"
                         "      match: (ADD x 0)\n      rewrite: x\n")
    assert [(d.loc.line, d.message) for d in diags] == [
        (4, "include cycle: b -> c -> b"),
        (6, "include cycle: c -> b -> c"),
    ]


# ------------------------------------------------------------------ files that must compile without warnings

def test_rule_name_from_yaml_scalars(rules):
    # `name: true` is a bool to YAML; the name is the text as written
    assert not rules.warnings(one_rule("match: (AND x True)", "rewrite: x", name="true")
                              + "    - name: 1\n      match: (MUL x 1)\n      rewrite: x\n")


def test_captures_used_by_a_guard_a_callback_or_an_equality_are_used(rules):
    assert not rules.warnings(one_rule("match: (ADD x y)", "when: y.op is Ops.CONST", "rewrite: x", name="guard")
                              + "    - name: callback\n      match: (MUL a b)\n      call: dsl_callbacks:fold_add\n"
                              "    - name: equality\n      match: (SUB x x)\n      rewrite: 0\n" + DSL)


@pytest.mark.parametrize("first, second", [
    ("match: (ADD x y)\n      when: x is y", "match: (ADD x 0)"),  # the earlier rule has a guard
    ("match: (ADD x 0)", "match: (ADD x _)"),  # the earlier rule is more specific
    ("match: (ADD x x)", "match: (ADD x 0)"),  # a repeated capture is an equality test
    ("match: (ADD x _)\n      call: dsl_callbacks:negate", "match: (ADD x 0)"),  # a callback may decline
    ("match: (ADD x 0 :dtype int32)", "match: (ADD x 0)"),
    ("match: (SINK x)", "match: (SINK x ...)"),  # exact arity vs. any number of sources
])
def test_not_shadowed(rules, first, second):
    rewrite = "" if "call:" in first else "\n      rewrite: x"
    text = f"s:\n  rules:\n    - name: a\n      {first}{rewrite}\n    - name: b\n      {second}\n      rewrite: x\n"
    text += DSL if "call:" in first else ""
    assert not [d for d in rules.warnings(text) if "never fire" in d.message]


# ------------------------------------------------------------------ positions inside YAML scalars

MULTI_LINE = {
    "literal block": one_rule("match: |", "  (ADD", "    (NEG x)", "    (MUL x Bogus))", "rewrite: x"),
    "literal block, more-indented first line": one_rule("match: |2", "    (ADD", "      (NEG x)", "    (MUL x Bogus))",
                                                        "rewrite: x"),
    "folded block": one_rule("match: >", "  (ADD (NEG x)", "    (MUL x Bogus))", "rewrite: x"),
    "plain, over two lines": one_rule("match: (ADD (NEG x)", "  (MUL x Bogus))", "rewrite: x"),
}


@pytest.mark.parametrize("text", MULTI_LINE.values(), ids=MULTI_LINE.keys())
def test_position_in_multi_line_scalars(rules, text):
    d = error(rules, text)
    source = Path(d.loc.file).read_text().split("\n")
    line = next(i for i, ln in enumerate(source, 1) if "Bogus" in ln)
    assert_diag(d, line, source[line - 1].index("Bogus") + 1, "unknown op or group 'Bogus'", 5)


@pytest.mark.parametrize("match, col", [
    ('"(ADD (NEG x) (MUL x Bogus))"', 35),
    ("'(ADD (NEG x) (MUL x Bogus))'", 35),
    (r'"(ADD (NEG x) (MUL \"s\" Bogus))"', 39),  # escapes are longer in the file than in the value
    ("'(ADD (NEG x) (BUFFER :arg ''q'') (MUL x Bogus))'", 55),
])
def test_position_in_quoted_scalars(rules, match, col):
    d = error(rules, one_rule(f"match: {match}", "rewrite: x"))
    assert_diag(d, 4, col, "unknown op or group 'Bogus'", 5)
