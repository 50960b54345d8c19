"""The reading half of :mod:`wgtune.wgsl.declarations`: module-scope declarations from tokens.

:class:`ModuleReader` walks the tokens of a module (``syntax.tokenize`` with function bodies
skipped) and collects what it finds as text and tokens, into :class:`Found`: nothing is evaluated
here, since declarations may come in any order; ``declarations.reflect`` resolves them. It
raises :class:`~wgtune.wgsl.syntax.WgslError` for what it cannot read (a name declared twice, the
pre-2022 attribute syntax, a declaration cut short), naming the line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .syntax import Alias, Token, WgslError, join

__all__ = ["Attr", "Found", "ModuleReader"]


@dataclass(frozen=True, slots=True)
class Attr:
    name: str
    args: tuple[str, ...]
    line: int


@dataclass
class Found:
    """What the reader found, before anything is evaluated (declarations may come in any order)."""

    enables: list[str] = field(default_factory=list)
    requires: list[str] = field(default_factory=list)
    aliases: list[Alias] = field(default_factory=list)
    consts: dict[str, tuple[str | None, str, int]] = field(default_factory=dict)
    structs: list[tuple[Token, list[tuple[Token, str, list[Attr]]]]] = field(default_factory=list)
    overrides: list[tuple[Token, str | None, str | None, list[Attr]]] = field(default_factory=list)
    variables: list[tuple[Token, str | None, str | None, str | None, list[Attr]]] = field(default_factory=list)
    functions: list[tuple[Token, list[Attr]]] = field(default_factory=list)
    declared: dict[str, int] = field(default_factory=dict)

    def declare(self, tok: Token, kind: str) -> Token:
        if tok.text in self.declared:
            first = self.declared[tok.text]
            raise WgslError(f"line {tok.line}: {kind} {tok.text!r} is already declared on line {first}")
        self.declared[tok.text] = tok.line
        return tok


class ModuleReader:
    """A cursor over the module's tokens that reads the few shapes module scope is made of."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens, self.pos = tokens, 0

    def peek(self) -> str:
        return self.tokens[self.pos].text if self.pos < len(self.tokens) else ""

    def next(self, what: str) -> Token:
        if self.pos >= len(self.tokens):
            line = self.tokens[-1].line if self.tokens else 1
            raise WgslError(f"line {line}: the source ends inside {what}")
        self.pos += 1
        return self.tokens[self.pos - 1]

    def expect(self, text: str, what: str) -> Token:
        tok = self.next(what)
        if tok.text != text:
            raise WgslError(f"line {tok.line}: expected {text!r} in {what}, found {tok.text!r}")
        return tok

    def ident(self, what: str) -> Token:
        tok = self.next(what)
        if tok.kind != "ident":
            raise WgslError(f"line {tok.line}: expected a name in {what}, found {tok.text!r}")
        return tok

    def until(self, stop: str, what: str) -> list[Token]:
        """The tokens up to ``stop`` outside brackets, and ``stop`` itself consumed."""
        out: list[Token] = []
        depth = 0
        while depth or self.peek() != stop:
            tok = self.next(what)
            depth += (tok.text in ("(", "[", "{")) - (tok.text in (")", "]", "}"))
            out.append(tok)
        self.next(what)
        return out

    def type(self, what: str) -> str:
        out = [self.ident(what)]
        depth = 0
        while self.peek() == "<" or depth:
            tok = self.next(what)
            depth += (tok.text == "<") - (tok.text == ">")
            out.append(tok)
        return join(out)

    def attributes(self) -> list[Attr]:
        attrs: list[Attr] = []
        while self.peek() == "@":
            self.next("an attribute")
            name = self.ident("an attribute")
            parts: list[list[Token]] = [[]]
            if self.peek() == "(":
                self.next(f"@{name.text}")
                depth = 0
                for tok in self.until(")", f"@{name.text}"):
                    depth += (tok.text in ("(", "[", "<")) - (tok.text in (")", "]", ">"))
                    if tok.text == "," and depth == 0:
                        parts.append([])
                    else:
                        parts[-1].append(tok)
            attrs.append(Attr(name.text, tuple(join(p) for p in parts if p), name.line))
        return attrs

    def module(self) -> Found:
        found = Found()
        while self.peek():
            if self.peek() == "[":
                raise WgslError(f"line {self.tokens[self.pos].line}: '[[...]]' attributes are pre-2022 WGSL; "
                                "wgtune reads current WGSL ('@group(0) @binding(0)')")
            attrs = self.attributes()
            kw = self.next("a declaration")
            if kw.text in ("enable", "requires", "diagnostic"):
                names = [t.text for t in self.until(";", kw.text) if t.kind == "ident"]
                found.enables.extend(names if kw.text == "enable" else ())
                found.requires.extend(names if kw.text == "requires" else ())
            elif kw.text == "alias":
                name = found.declare(self.ident("an alias"), "alias")
                self.expect("=", f"alias {name.text}")
                found.aliases.append(Alias(name.text, self.type(f"alias {name.text}"), name.line))
                self.expect(";", f"alias {name.text}")
            elif kw.text == "struct":
                name = found.declare(self.ident("a struct"), "struct")
                found.structs.append((name, self.members(name)))
            elif kw.text in ("const", "override", "var"):
                self.value(kw.text, attrs, found)
            elif kw.text == "fn":
                name = found.declare(self.ident("fn"), "fn")
                self.until("{", f"fn {name.text}")  # parameters and return type
                self.until("}", f"the body of fn {name.text}")
                found.functions.append((name, attrs))
            elif kw.text == "const_assert":
                self.until(";", "const_assert")
            elif kw.text != ";":
                raise WgslError(f"line {kw.line}: unexpected {kw.text!r}: wgtune reads module-scope declarations "
                                "(enable, requires, alias, struct, const, override, var, fn, const_assert)")
        return found

    def members(self, name: Token) -> list[tuple[Token, str, list[Attr]]]:
        what = f"struct {name.text}"
        self.expect("{", what)
        members: list[tuple[Token, str, list[Attr]]] = []
        while self.peek() != "}":
            attrs = self.attributes()
            member = self.ident(what)
            self.expect(":", f"{what}, member {member.text}")
            members.append((member, self.type(f"{what}, member {member.text}"), attrs))
            if self.peek() in (",", ";"):  # `;` as older WGSL wrote it
                self.next(what)
            elif self.peek() != "}":
                self.expect("}", what)
        self.next(what)
        if not members:
            raise WgslError(f"line {name.line}: struct {name.text} has no members")
        return members

    def value(self, kw: str, attrs: list[Attr], found: Found) -> None:
        """``const``, ``override`` or ``var`` (with its ``<address space[, access]>``)."""
        space = access = None
        if kw == "var" and self.peek() == "<":
            self.next("var")
            space, access = [*(t.text for t in self.until(">", "var<...>") if t.text != ","), None, None][:2]
        name = found.declare(self.ident(kw), kw)
        what = f"{kw} {name.text}"
        type_text = None
        if self.peek() == ":":
            self.next(what)
            type_text = self.type(what)
        init = join(self.until(";", what)[1:]) if self.peek() == "=" else None
        if init is None:
            self.expect(";", what)
        if kw == "const":
            if init is None:
                raise WgslError(f"line {name.line}: const {name.text} has no value")
            found.consts[name.text] = (type_text, init, name.line)
        elif kw == "override":
            found.overrides.append((name, type_text, init, attrs))
        else:
            found.variables.append((name, space, access, type_text, attrs))
