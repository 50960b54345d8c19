"""WGSL's lexical layer for wgtune's reflection: tokens, the arithmetic sizes are written in, and
the declarations a type can name (structs, aliases, consts, overrides) gathered in a :class:`Scope`.

- :func:`tokenize` splits WGSL into tokens, dropping ``//`` and (nested) ``/* */`` comments.
- :func:`evaluate` computes the integer and float arithmetic that sizes and counts are written
  in: literals (``16``, ``16u``, ``2.0f``, ``0x10``), names, ``+ - * / %``, parentheses and
  the conversions ``u32(..)``, ``i32(..)``, ``f32(..)``, ``f16(..)``. Nothing else: a size
  written as ``select(..)`` or with shifts is reported as not evaluable, never guessed.

Imports go one way: ``wgsl_layout`` (bytes) and ``wgsl`` (reading a source) build on this
module, never the reverse.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

from ..errors import ConfigError

__all__ = [
    "Alias", "Constant", "DependsOnOverride", "Member", "Override", "Scope", "Struct", "Token", "Value",
    "WgslError", "evaluate", "host_number", "join", "literal", "tokenize",
]

Value = int | float


class WgslError(ConfigError):
    """WGSL that wgtune cannot reflect, lay out or pack by; the message names the declaration
    (and its line where known) and what is wrong."""


class DependsOnOverride(WgslError):
    """An expression needs an override's value where only consts were asked for
    (``Scope.evaluate(..., overrides=False)``, ``layout(..., overrides=False)``)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"depends on override {name!r}")
        self.name = name


# -- tokens ------------------------------------------------------------------------------------

class Token(NamedTuple):
    kind: str  # "ident", "number" or "punct"
    text: str
    line: int


_LEX = re.compile(r"""
    (?P<space>\s+) | (?P<comment>//[^\n]*) | (?P<block>/\*)
  | (?P<number>0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+[fh]?)?[iu]?
      | (?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fh]? | [0-9]+[eE][+-]?[0-9]+[fh]? | [0-9]+[iufh]?)
  | (?P<ident>[^\W\d]\w*) | (?P<punct>->|.)""", re.VERBOSE | re.DOTALL)
_BLOCK = re.compile(r"/\*|\*/")
# What a function body's end depends on: its braces, and comments that may hold braces.
_BODY = re.compile(r"[{}]|//[^\n]*|/\*")


def tokenize(source: str, bodies: bool = True) -> list[Token]:
    """WGSL's tokens with their lines. Block comments nest, as WGSL says they do.

    ``bodies=False``: the body of each module-scope ``fn`` comes as its two braces alone. Reading
    declarations needs nothing inside a body, and bodies are most of a kernel's tokens (of the 92
    matmul candidates' 282,671 tokens, 15,289 are outside them): a tune reflects its candidates
    before the first is measured, which took 0.75 s of a first tune here with the bodies read."""
    tokens: list[Token] = []
    pos, line = 0, 1
    depth, header = 0, False  # braces open; an `fn` seen at module scope whose body is still to come
    while pos < len(source):
        match = _LEX.match(source, pos)
        assert match is not None  # the last alternative matches any character
        kind, end = match.lastgroup, match.end()
        if kind == "block":
            end = _block_end(source, end, line)
        elif kind in ("number", "ident", "punct"):
            text = match.group()
            tokens.append(Token(kind, text, line))
            if not bodies:
                if text == "fn" and depth == 0:
                    header = True
                elif text == "{" and header and depth == 0:
                    header, end = False, _body_end(source, end, line)
                    if end < 0:  # never closed: the reader says where the source ends
                        return tokens
                    line += source.count("\n", pos, end)
                    tokens.append(Token("punct", "}", line))
                    pos = end
                    continue
                elif text in ("{", "}"):
                    depth += 1 if text == "{" else -1
        line += source.count("\n", pos, end)
        pos = end
    return tokens


def _block_end(source: str, end: int, line: int) -> int:
    """Where the block comment opened just before ``end`` closes (after its ``*/``)."""
    depth = 1
    while depth:
        mark = _BLOCK.search(source, end)
        if mark is None:
            raise WgslError(f"line {line}: a /* comment is never closed")
        depth += 1 if mark.group() == "/*" else -1
        end = mark.end()
    return end


def _body_end(source: str, end: int, line: int) -> int:
    """Where the body opened just before ``end`` closes (after its ``}``), or -1 if it never does."""
    depth, start = 1, end
    while depth:
        mark = _BODY.search(source, end)
        if mark is None:
            return -1
        text, end = mark.group(), mark.end()
        if text == "/*":
            end = _block_end(source, end, line + source.count("\n", start, mark.start()))
        elif text in ("{", "}"):
            depth += 1 if text == "{" else -1
    return end


def join(tokens: list[Token]) -> str:
    """Tokens back to text, spaced the usual way: ``array<f32, TILE * 2>``, ``u32(-1)``."""
    out, prev, prev_unary = "", None, False
    for i, tok in enumerate(tokens):
        if tok.text == "," and i + 1 < len(tokens) and tokens[i + 1].text in (">", ")"):
            continue  # a trailing comma: `array<f32, 4,>` reads `array<f32, 4>`
        if prev is not None:
            tight = (prev_unary or prev.text in ("(", "<", "[", ".", "@")
                     or tok.text in (")", ">", "]", ",", "<", ".")
                     or (tok.text in ("(", "[") and (prev.kind == "ident" or prev.text in (">", "]"))))
            out += "" if tight else " "
        prev_unary = tok.text == "-" and (prev is None or prev.text in ("(", "<", "[", ",", "*", "/", "%", "+", "-"))
        out += tok.text
        prev = tok
    return out


def literal(text: str) -> Value:
    """The value of a WGSL numeric literal: ``16u`` -> 16, ``0x1f`` -> 31, ``2.0f`` -> 2.0."""
    low = text.lower()
    if low.startswith("0x"):
        if "p" in low:
            return float.fromhex(low.rstrip("fh"))
        return float.fromhex(low) if "." in low else int(low.rstrip("iu"), 16)
    body, suffix = (low[:-1], low[-1]) if low[-1] in "iufh" else (low, "")
    if suffix in ("i", "u"):
        return int(body)
    return float(body) if suffix or "." in body or "e" in body else int(body)


# -- values ------------------------------------------------------------------------------------

class NotArithmetic(WgslError):
    """An expression outside the arithmetic :func:`evaluate` reads (internal)."""


def evaluate(expr: str, lookup: Callable[[str], Value], what: str) -> Value:
    """The value of ``expr``, names resolved by ``lookup``; ``what`` names it in errors."""
    tokens, pos = tokenize(expr), 0

    def fail(why: str) -> NotArithmetic:
        return NotArithmetic(f"{what}: cannot evaluate {expr!r} ({why}); wgtune evaluates literals, "
                             "consts, overrides, + - * / %, parentheses and u32/i32/f32/f16(..)")

    def peek() -> str:
        return tokens[pos].text if pos < len(tokens) else ""

    def take(text: str) -> None:
        nonlocal pos
        if peek() != text:
            raise fail(f"expected {text!r}")
        pos += 1

    def atom() -> Value:
        nonlocal pos
        if pos >= len(tokens):
            raise fail("it ends early")
        tok = tokens[pos]
        pos += 1
        if tok.text == "-":
            return -atom()
        if tok.text == "(":
            value = total()
            take(")")
            return value
        if tok.kind == "number":
            return literal(tok.text)
        if tok.kind == "ident" and peek() == "(":
            if tok.text not in ("u32", "i32", "f32", "f16"):
                raise fail(f"a call to {tok.text}")
            take("(")
            value = total()
            take(")")
            return float(value) if tok.text[0] == "f" else math.trunc(value)
        if tok.kind == "ident":
            return lookup(tok.text)
        raise fail(f"unexpected {tok.text!r}")

    def product() -> Value:
        nonlocal pos
        value = atom()
        while peek() in ("*", "/", "%"):
            op = peek()
            pos += 1
            right = atom()
            if op == "*":
                value *= right
                continue
            if right == 0:
                raise WgslError(f"{what}: division by zero in {expr!r}")
            if isinstance(value, int) and isinstance(right, int):  # WGSL truncates toward zero
                quotient = abs(value) // abs(right) * (1 if (value < 0) == (right < 0) else -1)
                value = quotient if op == "/" else value - right * quotient
            else:
                value = value / right if op == "/" else math.fmod(value, right)
        return value

    def total() -> Value:
        nonlocal pos
        value = product()
        while peek() in ("+", "-"):
            op = peek()
            pos += 1
            value = value + product() if op == "+" else value - product()
        return value

    value = total()
    if pos != len(tokens):
        raise fail(f"unexpected {peek()!r}")
    return value


def host_number(value: Any, path: str, expected: str) -> Value:
    """A host value as a Python int or float: numpy's scalars (``.item()``), anything with
    ``__index__`` or ``__float__``; a WgslError naming ``path`` otherwise."""
    if isinstance(value, int | float):
        return value
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, (str, bytes)):
        try:
            inner = item()
        except (TypeError, ValueError):
            inner = None
        if isinstance(inner, int | float):
            return inner
    if hasattr(type(value), "__index__"):
        return operator.index(value)
    if hasattr(type(value), "__float__") and not isinstance(value, (str, bytes)):
        return float(value)
    raise WgslError(f"{path}: expects {expected}, got {value!r}")


# -- declarations the layout depends on ----------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Member:
    """A struct member; ``align``/``size`` are its ``@align(n)``/``@size(n)``, evaluated."""

    name: str
    type: str
    align: int | None
    size: int | None
    line: int


@dataclass(frozen=True, slots=True)
class Struct:
    """``struct Name { member: type, ... }``, members in declaration order."""

    name: str
    members: tuple[Member, ...]
    line: int


@dataclass(frozen=True, slots=True)
class Alias:
    """``alias name = type;``"""

    name: str
    type: str
    line: int


@dataclass(frozen=True, slots=True)
class Constant:
    """``const name[: type] = expr;``: ``value`` is the number it evaluates to, or None when it
    is not plain arithmetic (a vector, a bool, a call)."""

    name: str
    type: str | None
    expr: str
    value: Value | None
    line: int


@dataclass(frozen=True, slots=True)
class Override:
    """``[@id(n)] override name[: type][= default];``"""

    name: str
    type: str | None
    default: str | None
    id: int | None
    line: int

    @property
    def key(self) -> str:
        """Its key in WebGPU's pipeline ``constants``: the ``@id`` as a string where it has one,
        else its name (WebGPU, GPUProgrammableStage.constants)."""
        return self.name if self.id is None else str(self.id)


@dataclass(frozen=True)
class Scope:
    """What types and expressions can name: module-scope structs, aliases, consts, overrides,
    and the ``enable``/``requires`` directives that change what is allowed."""

    structs: tuple[Struct, ...]
    aliases: tuple[Alias, ...]
    constants: tuple[Constant, ...]
    overrides: tuple[Override, ...]
    enables: tuple[str, ...]
    requires: tuple[str, ...]

    @cached_property
    def _names(self) -> dict[str, Struct | Alias | Constant | Override]:
        return {d.name: d for group in (self.structs, self.aliases, self.constants, self.overrides)
                for d in group}

    def struct(self, name: str) -> Struct:
        found = self._names.get(name)
        if not isinstance(found, Struct):
            raise WgslError(f"no struct named {name!r}")
        return found

    def evaluate(self, expr: str, constants: Mapping[str, Any] | None = None, *, what: str,
                 overrides: bool = True) -> Value:
        """``expr`` evaluated with the module's consts and the overrides' values: those in
        ``constants`` (keyed as WebGPU keys them, :attr:`Override.key`), else their defaults."""
        given = self._given(constants)

        def lookup(name: str, stack: tuple[str, ...] = ()) -> Value:
            found = self._names.get(name)
            if isinstance(found, Constant):
                if found.value is None:
                    raise WgslError(f"{what}: const {name} (line {found.line}) is not a number "
                                    f"wgtune can evaluate: {found.expr!r}")
                return found.value
            if not isinstance(found, Override):
                raise WgslError(f"{what}: {name!r} is not a module-scope const or override")
            if not overrides:
                raise DependsOnOverride(name)
            if found.key in given:
                return given[found.key]
            if found.default is None:
                raise WgslError(f"{what} needs override {name!r} (line {found.line}), which has no "
                                f"default: give it in constants as {found.key!r}")
            if name in stack:
                raise WgslError(f"{what}: override {name!r} is defined in terms of itself")
            return evaluate(found.default, lambda n: lookup(n, (*stack, name)), f"override {name}")

        return evaluate(expr, lookup, what)

    def _given(self, constants: Mapping[str, Any] | None) -> dict[str, Value]:
        keys = {o.key: o for o in self.overrides}
        given: dict[str, Value] = {}
        for key, value in (constants or {}).items():
            if key not in keys:
                named = [o for o in self.overrides if o.name == key]
                hint = f": override {key} has @id({named[0].id}), so its key is '{named[0].id}'" if named else ""
                raise WgslError(f"constants: {key!r} is not an override of this module{hint}")
            number = host_number(value, f"constants[{key!r}]", "a number")
            if keys[key].type in ("u32", "i32") and isinstance(number, float):
                if not number.is_integer():
                    raise WgslError(f"constants[{key!r}]: override {key} is {keys[key].type}, got {number!r}")
                number = int(number)
            given[key] = number
        return given


