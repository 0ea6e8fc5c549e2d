"""Small run-time support for generated matchers."""
from __future__ import annotations

import math
from typing import Any

from rulec.runtime.ir.dtype import DType, PtrDType, python_value
from rulec.runtime.ir.uop import UOp


class _FactRecorded:
    """What a fact rule's own function returns after recording its fact: the rule declines (the node is not
    rewritten, later rules run) and the traced engine counts it as fired. The fast path never sees it."""

    def __repr__(self) -> str:
        return "FACT_RECORDED"


FACT_RECORDED = _FactRecorded()


def as_node(value: Any, dtype: DType) -> UOp:
    """A rule result: a UOp as is, any other value as a CONST of `dtype` (integers must fit 64 bits)."""
    return value if isinstance(value, UOp) else UOp.const(dtype, const_arg(dtype, check_result(value)))


class ExprLimitError(ValueError):
    """A rule expression went past a size limit: an integer, a sequence or a range too large.

    Raised by the bounded operators of `helpers.py`; a generated rule function re-raises it with the
    rule's name and `file:line` (`located`), so the message points at the rule, not at generated code.
    """

    def __init__(self, message: str, rule: Any = None):
        super().__init__(message if rule is None else f"{rule.loc}: rule {rule.ruleset}/{rule.name}: {message}")
        self.rule = rule

    def located(self, rule: Any) -> ExprLimitError:
        """This error with `rule`'s location, unless an inner rule (a nested rewrite) gave it one."""
        return self if self.rule is not None else ExprLimitError(str(self), rule)


# What the IR holds: int64 and uint64 values. A rule result outside this range is an error, so a rule
# that grows a constant at every step (`{c.arg * c.arg}`) stops at once instead of exhausting memory.
RESULT_MIN, RESULT_MAX = -(1 << 63), (1 << 64) - 1


def check_result(value: Any) -> Any:
    """`value` unchanged if every integer in it (a number, or a tuple or list of them) fits 64 bits."""
    if isinstance(value, int):
        if not RESULT_MIN <= value <= RESULT_MAX and not isinstance(value, bool):
            raise ExprLimitError(f"a result holds an integer of {value.bit_length()} bits; "
                                 f"the IR holds 64-bit integers ({RESULT_MIN}..{RESULT_MAX})")
    elif isinstance(value, (tuple, list)):
        for v in value:
            check_result(v)
    return value


def callback(module: str, function: str, params: tuple[str, ...] | None = None) -> Any:
    """A rule's callback, imported when its matcher loads: only a function defined in `module` itself,
    taking exactly `params` where the rule file declared them (a typed callback declaration).

    The build checked this too, but the module may have changed since (it is not one of the hashed
    sources), so a name rebound to a stdlib or imported function is refused here as well.
    """
    from rulec.runtime.engine.callback_import import CallbackImportError, load_defined

    fn = load_defined(module, function)
    if params is not None:
        import inspect

        try:
            actual = tuple(inspect.signature(fn).parameters)
        except (TypeError, ValueError):  # a callable Python cannot describe: the call will say
            return fn
        if actual != params:
            raise CallbackImportError(f"{module}:{function} is declared with parameters ({', '.join(params)}) but "
                                      f"takes ({', '.join(actual)})")
    return fn


def callback_result_error(value: Any, kind: str) -> None:
    """A typed callback returned what its declaration rules out; the engine re-raises this naming the rule."""
    want = {"node": "a node", "node?": "a node or None", "none": "None"}[kind]
    raise RuleTypeError(f"the callback is declared to return {kind} ({want}), but returned "
                        f"{type(value).__name__} {brief(value)}")


# ---- result types (docs/rules.md, "Types"): what the rule compiler could not check statically

class RuleTypeError(TypeError):
    """A rule built a result of the wrong type; the engine re-raises it as a RuleError naming the rule."""


def const_fits(dtype: DType, value: Any) -> bool:
    """Whether a CONST of `dtype` holds `value` exactly: a number, integral and in range for an int, 0 or 1
    for a bool, a float for a float (its Python float, whatever the width)."""
    if not isinstance(value, (bool, int, float)):
        return False
    kind = dtype.kind
    if kind == "bool":
        return value in (0, 1)
    if kind in ("int", "uint", "index"):
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
            return False
        return dtype.min <= value <= dtype.max  # wrapping is C's undefined signed overflow: refused
    if kind == "float" and isinstance(value, int):  # stored as a Python float: 2**53 + 1 is not one
        try:
            return float(value) == value
        except OverflowError:
            return False
    return True


def const_arg(dtype: DType, value: Any) -> Any:
    """`value` as the arg of a CONST of `dtype`; a value it cannot hold is an error, never a silent truncation."""
    if not const_fits(dtype, value):
        what = "is not a number" if not isinstance(value, (bool, int, float)) else "does not fit"
        raise RuleTypeError(f"the constant {brief(value)} {what} (a CONST of {dtype.name})")
    return python_value(dtype, value)


def as_dtype(value: Any) -> DType:
    """A computed `:dtype`: it must be a dtype."""
    if not isinstance(value, DType):
        raise RuleTypeError(f":dtype must be a dtype, but the expression gave {type(value).__name__} {brief(value)}")
    return value


def check_kept_dtype(matched: UOp, result: UOp) -> None:
    """A result that names no dtype keeps the matched node's, where both are values (not void, not pointers)."""
    if _is_value(matched.dtype) and _is_value(result.dtype):
        raise RuleTypeError(f"the result {result.op.name} has dtype {result.dtype.name}, but the matched "
                            f"{matched.op.name} is {matched.dtype.name} (a result that names no :dtype keeps "
                            f"the matched node's)")


def brief(value: Any, width: int = 80) -> str:
    """repr(value) for an error message, cut to `width` characters."""
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def _is_value(dt: DType) -> bool:
    return dt.kind != "void" and not isinstance(dt, PtrDType)
