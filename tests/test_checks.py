"""Static checks: each bad rule file gives one exact message at an exact line:col, rendered with the
source line and a caret under the offending text."""
from __future__ import annotations

from pathlib import Path

import pytest

from rulec.build import build
from rulec.diagnostics import CompileError


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


# ------------------------------------------------------------------ YAML

def test_invalid_yaml(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0
             rewrite: x
    """)
    assert_diag(d, 5, 6, "invalid YAML: did not find expected '-' indicator "
                         "(while parsing a block collection at line 3)")


def test_invalid_yaml_unclosed_quote_points_at_the_quote(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: "(ADD x 0)
    """)
    assert_diag(d, 4, 14, "invalid YAML: found unexpected end of stream (while scanning a quoted scalar that "
                          "starts here)")


def test_invalid_yaml_at_the_end_of_the_file(rules):
    d = error(rules, """
        s:
          rules: [
    """)
    assert_diag(d, 2, 11, "invalid YAML: did not find expected node content at the end of the file")


def test_invalid_yaml_tab(rules):
    d = error(rules, "s:\n\trules: []\n")
    assert_diag(d, 2, 1, "invalid YAML: found character that cannot start any token (a tab: YAML indents with "
                         "spaces)")


def test_duplicate_yaml_key(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              rewrite: x
              match: (MUL x 1)
    """)
    assert_diag(d, 6, 7, "duplicate key 'match' (first at line 4)", 5)


def test_rule_file_must_be_a_mapping(rules):
    d = error(rules, """
        - s
    """)
    assert_diag(d, 1, 1, "a rule file maps rule-set names to rule sets")


# ------------------------------------------------------------------ names of ops, groups, dtypes

def test_unknown_op(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADDD x 0)
              rewrite: x
    """)
    assert_diag(d, 4, 15, "unknown op or group 'ADDD' (did you mean 'ADD'?)", 4)


def test_unknown_op_in_a_result(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (NEG x)
              rewrite: (NEGG x)
    """)
    assert_diag(d, 5, 17, "unknown op 'NEGG' (did you mean 'NEG'?)", 4)


def test_op_set_in_a_result(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (NEG x)
              rewrite: (ADD|MUL x x)
    """)
    assert_diag(d, 5, 17, "a result must name one op, not 'ADD|MUL'", 7)


def test_unknown_group(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (CONTIGUOUS (Movment x))
              rewrite: x
    """)
    assert_diag(d, 4, 27, "unknown op or group 'Movment' (did you mean 'Movement'?)", 7)


def test_unknown_group_in_a_negated_alternative(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (CONTIGUOUS x@!CONST|Bufer)
              rewrite: x
    """)
    assert_diag(d, 4, 35, "unknown op or group 'Bufer' (did you mean 'Buffer'?)", 5)


def test_unknown_dtype(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (NEG x :dtype int32|flaot32)
              rewrite: x
    """)
    assert_diag(d, 4, 34, "unknown dtype 'flaot32' (did you mean 'float32'?)", 7)


def test_unknown_dtype_lists_the_dtypes(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (NEG x :dtype complex)
              rewrite: x
    """)
    assert_diag(d, 4, 28, "unknown dtype 'complex' (dtypes: bool, int8, uint8, int16, uint16, int32, uint32, "
                          "int64, uint64, float16, bfloat16, float32, float64, index, void, half, float, double, "
                          "int, long; classes: ints, sints, uints, floats)", 7)


def test_unknown_dtype_in_a_result(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (NEG x)
              rewrite: (CAST x :dtype float33)
    """)
    assert_diag(d, 5, 31, "unknown dtype 'float33' (did you mean 'float32'?)", 7)


def test_capture_as_a_result_dtype(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (NEG x)
              rewrite: (CAST x :dtype x)
    """)
    assert_diag(d, 5, 31, "unknown dtype 'x' (for the dtype of a captured node, write x.dtype)", 1)


def test_unknown_dtype_in_an_expression(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (NEG x)
              when: x.dtype == dtypes.flaot32
              rewrite: x
    """)
    assert_diag(d, 5, 24, "unknown dtype dtypes.flaot32 (did you mean 'float32'?)", 14)


# ------------------------------------------------------------------ arity

def test_wrong_arity_in_a_pattern(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0 x)
              rewrite: x
    """)
    assert_diag(d, 4, 14, "ADD takes 2 sources, but the pattern gives 3")


def test_wrong_arity_with_more_sources(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (NEG (NEG x x ...))
              rewrite: x
    """)
    assert_diag(d, 4, 19, "NEG takes 1 source, but the pattern gives 2 or more")


def test_wrong_arity_for_every_op_of_a_group(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ALU x x x x)
              rewrite: x
    """)
    assert_diag(d, 4, 14, "the ops of ALU take 1, 2, 3 sources, but the pattern gives 4")


def test_wrong_arity_in_a_result(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              rewrite: (NEG x x)
    """)
    assert_diag(d, 5, 16, "NEG takes 1 source, but the result gives 2")


# ------------------------------------------------------------------ names

def test_unbound_name_in_a_rewrite(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              rewrite: (NEG y)
    """)
    assert_diag(d, 5, 21, "name 'y' is not bound by the pattern of rule 'a' (it binds x)", 1)


def test_unbound_name_with_a_suggestion(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD xs 0)
              rewrite: xss
    """)
    assert_diag(d, 5, 16, "name 'xss' is not bound by the pattern of rule 'a' (did you mean 'xs'?)", 3)


def test_unbound_name_in_a_guard(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              when: x.arg == y.arg
              rewrite: x
    """)
    assert_diag(d, 5, 22, "name 'y' is not bound by the pattern of rule 'a' (it binds x)", 1)


def test_unbound_name_in_a_computed_arg(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (RESHAPE x)
              rewrite: (RESHAPE x :arg z.shape)
    """)
    assert_diag(d, 5, 32, "name 'z' is not bound by the pattern of rule 'a' (it binds x)", 1)


def test_unbound_name_when_nothing_is_bound(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD _ 0)
              rewrite: q
    """)
    assert_diag(d, 5, 16, "name 'q' is not bound by the pattern of rule 'a' (it binds no names)", 1)


def test_rest_capture_used_as_a_node(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (SINK x ...rest)
              rewrite: (SINK rest x)
    """)
    assert_diag(d, 5, 22, "'rest' captures several sources: splice it with ...rest", 4)


def test_keyword_as_a_capture_name(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x in)
              rewrite: x
    """)
    assert_diag(d, 4, 21, "'in' cannot be a capture name: it is a Python keyword", 2)


def test_capture_hiding_a_helper(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x len@CONST)
              when: len(x.src) == 0
              rewrite: len
    """)
    assert_diag(d, 5, 13, "'len' is a capture of rule 'a', which hides the helper len(); rename the capture", 3)


# ------------------------------------------------------------------ expressions

def test_unknown_helper(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              when: frob(x) > 1
              rewrite: x
    """)
    assert_diag(d, 5, 13, "unknown helper 'frob' (see docs/rules.md for the registered helpers)", 4)


def test_unknown_helper_with_a_suggestion(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              when: lenn(x.src) > 1
              rewrite: x
    """)
    assert_diag(d, 5, 13, "unknown helper 'lenn' (did you mean 'len'?)", 4)


def test_lambda_is_not_allowed(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              when: "(lambda q: q)(x)"
              rewrite: x
    """)
    assert_diag(d, 5, 15, "lambda is not allowed in rule expressions", 11)


def test_walrus_is_not_allowed(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              when: (q := x) is x
              rewrite: x
    """)
    assert_diag(d, 5, 14, "':=' is not allowed in rule expressions", 6)


def test_attribute_not_in_the_whitelist(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              when: x.__class__ is None
              rewrite: x
    """)
    assert_diag(d, 5, 14, "attribute .__class__ is not readable in rule expressions (allowed: addrspace, arg, "
                          "base, dtype, is_float, is_int, is_unsigned, itemsize, kind, name, ndim, op, ranges, "
                          "scalar, shape, size, src, tag, vmax, vmin)", 10)


def test_method_call(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              when: x.src.count(x) > 1
              rewrite: x
    """)
    assert_diag(d, 5, 18, "only registered helpers can be called: write helper(x), not x.count()", 6)


def test_keyword_arguments(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              when: max(x.arg, default=0) > 1
              rewrite: x
    """)
    assert_diag(d, 5, 24, "a keyword argument is not allowed in rule expressions", 9)


def test_invalid_expression_syntax(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              when: x.arg ==
              rewrite: x
    """)
    assert_diag(d, 5, 21, "invalid expression: invalid syntax")


def test_a_tuple_arg_needs_braces(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (RESHAPE x)
              rewrite: (RESHAPE x :arg (16,))
    """)
    assert_diag(d, 5, 32, ":arg takes a literal or an expression, not a node; write a tuple as {(1, 2)}")


# ------------------------------------------------------------------ callbacks

def test_callback_module_not_declared(rules):
    diags = rules.errors("""
        s:
          rules:
            - name: a
              match: (ADD x 0)
              call: no_such_module_xyz:f
    """)
    assert_diag(only(diags), 5, 13, "callback module 'no_such_module_xyz' is not declared: list it under "
                                    "`callbacks:` at the top of rules1.yaml, or put no_such_module_xyz.py beside it")
    assert not [d for d in diags if d.severity == "warning"]  # no "capture 'x' is never used"


def test_callback_module_that_fails_to_import(rules):
    # a module beside the rule file needs no declaration; this one raises when the build imports it
    (rules.root / "broken_callbacks_xyz.py").write_text("1 / 0\n\n\ndef f(x):\n    return x\n")
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              call: broken_callbacks_xyz:f
    """)
    assert_diag(d, 5, 13, "cannot import callback module 'broken_callbacks_xyz': ZeroDivisionError: division by zero")


def test_callback_function_missing(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              call: dsl_callbacks:nothing_here
        callbacks: [dsl_callbacks]
    """)
    assert_diag(d, 5, 13, "module 'dsl_callbacks' has no function 'nothing_here'")


def test_callback_function_missing_with_a_suggestion(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              call: dsl_callbacks:negat
        callbacks: [dsl_callbacks]
    """)
    assert_diag(d, 5, 13, "module 'dsl_callbacks' has no function 'negat' (did you mean 'negate'?)")


def test_callback_that_is_not_a_function(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              call: dsl_callbacks:NOT_A_FUNCTION
        callbacks: [dsl_callbacks]
    """)
    line = (Path(__file__).parent / "dsl_callbacks.py").read_text().split("\n").index("NOT_A_FUNCTION = 3") + 1
    assert_diag(d, 5, 13, f"'dsl_callbacks:NOT_A_FUNCTION' is a variable, not a function (line {line} of "
                          f"dsl_callbacks.py); a callback must be a def in the module it is named from")


def test_callback_parameters_must_be_bound_names(rules):
    diags = rules.errors("""
        s:
          rules:
            - name: a
              match: (ADD x 0)
              call: dsl_callbacks:takes_y
        callbacks: [dsl_callbacks]
    """)
    assert_diag(only(diags), 5, 13, "callback takes_y takes parameter 'y', but rule 'a' binds x")
    assert not [d for d in diags if d.severity == "warning"]


def test_callback_with_star_args(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              call: dsl_callbacks:takes_star
        callbacks: [dsl_callbacks]
    """)
    assert_diag(d, 5, 13, "callback takes_star takes *args/**kwargs; name its parameters after the captures of "
                          "rule 'a'")


def test_callback_with_keyword_only_parameters(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              call: dsl_callbacks:keyword_only
        callbacks: [dsl_callbacks]
    """)
    assert_diag(d, 5, 13, "callback keyword_only takes keyword-only parameter 'x'; rulec passes captures by position")


def test_callback_spec_syntax(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              call: dsl_callbacks.negate
    """)
    assert_diag(d, 5, 13, "call must be 'package.module:function', got 'dsl_callbacks.negate'")


def test_ctx_is_reserved(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD ctx 0)
              rewrite: 0
    """)
    assert_diag(d, 4, 19, "'ctx' is reserved for the callback context", 3)


# ------------------------------------------------------------------ rules and rule sets

def test_duplicate_rule_names(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              rewrite: x
            - name: a
              match: (MUL x 1)
              rewrite: x
    """)
    assert_diag(d, 6, 13, f"duplicate rule name 'a' in rule set 's' (first defined at {d.loc.file}:3:13)", 1)


def test_duplicate_rule_set_names_across_files(rules):
    text = """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              rewrite: x
    """
    first, second = rules.write(text, "first.yaml"), rules.write(text, "second.yaml")
    with pytest.raises(CompileError) as info:
        build([first, second], rules.root / "out")
    d = only(info.value.diagnostics)
    assert d.loc.file == "second.yaml"
    assert_diag(d, 1, 1, "rule set 's' is already defined at first.yaml:1:1", 1)


def test_invalid_rule_set_name(rules):
    d = error(rules, """
        a/b:
          rules:
            - name: a
              match: (ADD x 0)
              rewrite: x
    """)
    assert_diag(d, 1, 1, "invalid rule-set name 'a/b': use letters, digits, '_' and '-'", 3)


def test_unknown_include(rules):
    d = error(rules, """
        s:
          include: [bsae]
          rules:
            - name: a
              match: (ADD x 0)
              rewrite: x
        base:
          rules:
            - name: b
              match: (MUL x 1)
              rewrite: x
    """)
    assert_diag(d, 2, 13, "include of unknown rule set 'bsae' (did you mean 'base'?)", 4)


def test_include_cycle(rules):
    diags = rules.errors("""
        a:
          include: [b]
        b:
          include: [c]
        c:
          include: a
          rules:
            - name: r
              match: (ADD x 0)
              rewrite: x
    """)
    assert [(d.loc.line, d.loc.col, d.message) for d in diags] == [
        (2, 13, "include cycle: a -> b -> c -> a"),
        (4, 13, "include cycle: b -> c -> a -> b"),
        (6, 12, "include cycle: c -> a -> b -> c"),
    ]
    assert_diag(diags[0], 2, 13, "include cycle: a -> b -> c -> a", 1)


def test_include_of_itself(rules):
    d = error(rules, """
        a:
          include: [a]
          rules:
            - name: r
              match: (ADD x 0)
              rewrite: x
    """)
    assert_diag(d, 2, 13, "include cycle: rule set 'a' includes itself", 1)


def test_including_a_cycle_from_outside_is_not_a_cycle(rules):
    diags = rules.errors("""
        top:
          include: [b]
        b:
          include: [c]
        c:
          include: [b]
          rules:
            - name: r
              match: (ADD x 0)
              rewrite: x
    """)
    assert [(d.loc.line, d.message) for d in diags] == [
        (4, "include cycle: b -> c -> b"),
        (6, "include cycle: c -> b -> c"),
    ]


def test_rule_with_both_rewrite_and_call(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              rewrite: x
              call: dsl_callbacks:negate
        callbacks: [dsl_callbacks]
    """)
    assert_diag(d, 3, 13, "rule 'a' has both rewrite and call: give exactly one", 1)


def test_rule_with_neither_rewrite_nor_call(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
    """)
    assert_diag(d, 3, 13, "rule 'a' has neither rewrite nor call: give exactly one", 1)


def test_rule_without_match(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              rewrite: x
    """)
    assert_diag(d, 3, 13, "rule 'a' has no match", 1)


def test_unknown_rule_key(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              rewrit: x
    """)
    # only the misspelled key: not also "rule 'a' has neither rewrite nor call"
    assert_diag(d, 5, 7, "unknown rule key 'rewrit' (did you mean 'rewrite'?)", 6)


def test_unknown_rule_key_without_a_suggestion(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              rewrite: x
              priority: 3
    """)
    assert_diag(d, 6, 7, "unknown rule key 'priority' (expected one of: name, doc, match, when, rewrite, call)", 8)


def test_unknown_rule_set_key(rules):
    d = error(rules, """
        s:
          includes: [q]
          rules:
            - name: a
              match: (ADD x 0)
              rewrite: x
    """)
    assert_diag(d, 2, 3, "unknown rule-set key 'includes' (did you mean 'include'?)", 8)


def test_rule_name_from_yaml_scalars(rules):
    # `name: true` is a bool to YAML; the name is the text as written
    assert not rules.warnings("""
        s:
          rules:
            - name: true
              match: (AND x True)
              rewrite: x
            - name: 1
              match: (MUL x 1)
              rewrite: x
    """)


# ------------------------------------------------------------------ s-expressions

def test_unclosed_paren(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD (NEG x) 0
              rewrite: x
    """)
    assert_diag(d, 4, 14, "unclosed '('")


def test_unexpected_close_paren(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0))
              rewrite: x
    """)
    assert_diag(d, 4, 23, "unexpected ')'")


def test_unclosed_brace(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x 0)
              rewrite: (MUL x {x.arg[0])
    """)
    assert_diag(d, 5, 23, "unclosed '{'")


def test_several_terms(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: ADD x 0
              rewrite: x
    """)
    assert_diag(d, 4, 18, "expected one term; wrap several in parentheses")


def test_capture_written_inside_the_list(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (x@ADD y 0)
              rewrite: y
    """)
    assert_diag(d, 4, 15, "write the capture before the list: x@(OP ...)", 5)


def test_capture_of_a_capture(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (NEG x@y)
              rewrite: x
    """)
    assert_diag(d, 4, 19, "'x@y' names one node twice: write x, or x@OP", 3)


# ------------------------------------------------------------------ warnings

def test_shadowed_rule(rules):
    d = only(rules.warnings("""
        s:
          rules:
            - name: any-add
              match: (ADD x _)
              rewrite: x
            - name: add-zero
              match: (ADD x 0)
              rewrite: x
    """), "warning")
    assert_diag(d, 6, 13, f"rule 'add-zero' can never fire: rule 'any-add' at {d.loc.file}:3:13 matches "
                          f"everything it matches and has no guard", 8)


def test_shadowed_rule_with_swapped_sources(rules):
    d = only(rules.warnings("""
        s:
          rules:
            - name: zero-right
              match: (ADD x 0)
              rewrite: x
            - name: zero-left
              match: (ADD 0 y)
              rewrite: y
    """), "warning")
    assert_diag(d, 6, 13, f"rule 'zero-left' can never fire: rule 'zero-right' at {d.loc.file}:3:13 matches "
                          f"everything it matches and has no guard", 9)


def test_shadowed_by_an_included_rule(rules):
    d = only(rules.warnings("""
        base:
          rules:
            - name: any-neg
              match: (NEG x)
              rewrite: x
        top:
          include: [base]
          rules:
            - name: neg-neg
              match: (NEG (NEG x))
              rewrite: x
    """), "warning")
    assert_diag(d, 9, 13, f"rule 'neg-neg' can never fire: rule 'any-neg' at {d.loc.file}:3:13 (included from "
                          f"rule set 'base') matches everything it matches and has no guard", 7)


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
    text += "callbacks: [dsl_callbacks]\n" if "call:" in first else ""
    assert not [d for d in rules.warnings(text) if "never fire" in d.message]


def test_unused_capture(rules):
    d = only(rules.warnings("""
        s:
          rules:
            - name: a
              match: (ADD x y)
              rewrite: x
    """), "warning")
    assert_diag(d, 4, 21, "capture 'y' is never used (write _ to match without capturing)", 1)


def test_captures_used_by_a_guard_a_callback_or_an_equality_are_used(rules):
    assert not rules.warnings("""
        s:
          rules:
            - name: guard
              match: (ADD x y)
              when: y.op is Ops.CONST
              rewrite: x
            - name: callback
              match: (MUL a b)
              call: dsl_callbacks:fold_add
            - name: equality
              match: (SUB x x)
              rewrite: 0
        callbacks: [dsl_callbacks]
    """)


def test_too_many_commutative_orderings(rules):
    d = only(rules.warnings("""
        s:
          rules:
            - name: deep
              match: (ADD (MUL (ADD (MUL (ADD x 1) 2) 3) 4) 5)
              rewrite: x
    """), "warning")
    assert_diag(d, 3, 13, "rule 'deep' has more than 16 orderings of its commutative sources; only 16 are matched "
                          "(split it into smaller rules)", 4)


# ------------------------------------------------------------------ positions inside YAML scalars

MULTI_LINE = {
    "literal block": """
        s:
          rules:
            - name: a
              match: |
                (ADD
                  (NEG x)
                  (MUL x Bogus))
              rewrite: x
    """,
    "literal block, more-indented first line": """
        s:
          rules:
            - name: a
              match: |2
                  (ADD
                    (NEG x)
                  (MUL x Bogus))
              rewrite: x
    """,
    "folded block": """
        s:
          rules:
            - name: a
              match: >
                (ADD (NEG x)
                  (MUL x Bogus))
              rewrite: x
    """,
    "plain, over two lines": """
        s:
          rules:
            - name: a
              match: (ADD (NEG x)
                (MUL x Bogus))
              rewrite: x
    """,
}


@pytest.mark.parametrize("text", MULTI_LINE.values(), ids=MULTI_LINE.keys())
def test_position_in_multi_line_scalars(rules, text):
    d = error(rules, text)
    source = Path(d.loc.file).read_text().split("\n")
    line = next(i for i, ln in enumerate(source, 1) if "Bogus" in ln)
    assert_diag(d, line, source[line - 1].index("Bogus") + 1, "unknown op or group 'Bogus'", 5)


def test_exact_position_in_a_literal_block(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: |
                (ADD
                  (NEG x)
                  (MUL x Bogus))
              rewrite: x
    """)
    assert_diag(d, 7, 18, "unknown op or group 'Bogus'", 5)


@pytest.mark.parametrize("match, col", [
    ('"(ADD (NEG x) (MUL x Bogus))"', 35),
    ("'(ADD (NEG x) (MUL x Bogus))'", 35),
    (r'"(ADD (NEG x) (MUL \"s\" Bogus))"', 39),  # escapes are longer in the file than in the value
    ("'(ADD (NEG x) (BUFFER :arg ''q'') (MUL x Bogus))'", 55),
])
def test_position_in_quoted_scalars(rules, match, col):
    d = error(rules, f"s:\n  rules:\n    - name: a\n      match: {match}\n      rewrite: x\n")
    assert_diag(d, 4, col, "unknown op or group 'Bogus'", 5)


def test_position_in_a_multi_line_guard(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x y)
              when: |
                x.arg == 1 and
                  zz.arg == y.arg
              rewrite: x
    """)
    assert_diag(d, 7, 11, "name 'zz' is not bound by the pattern of rule 'a' (it binds x, y)", 2)


def test_position_in_a_multi_line_rewrite(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (ADD x y)
              rewrite: |
                (MUL
                  x
                  (NEG q))
    """)
    assert_diag(d, 8, 16, "name 'q' is not bound by the pattern of rule 'a' (it binds x, y)", 1)


def test_position_after_non_ascii_text_in_a_guard(rules):
    d = error(rules, """
        s:
          rules:
            - name: a
              match: (BUFFER)
              when: "'é' != zz"
              rewrite: (BUFFER :arg 1)
    """)
    assert_diag(d, 5, 21, "name 'zz' is not bound by the pattern of rule 'a' (it binds no names)", 2)
