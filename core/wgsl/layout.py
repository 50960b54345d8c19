"""WGSL memory layout, and packing host values into the bytes a shader reads.

This is the half of wgtune's WGSL reflection that knows bytes; :mod:`wgtune.wgsl.declarations` reads the
declarations out of a source and builds the :class:`~wgtune.wgsl.syntax.Scope` this module
works in (the structs, aliases, consts and overrides a type or an expression can name). Imports
go one way only: ``wgsl`` imports this module, this one imports ``wgsl_syntax``.

- :func:`layout` lays a type out by the WGSL spec's rules (https://www.w3.org/TR/WGSL/,
  "Alignment and Size", "Structure Member Layout" and "Address Space Layout Constraints"):
  its size, alignment, array stride, and each struct member's offset. A layout the spec
  forbids (a ``bool`` in a buffer, a uniform array whose stride is not a multiple of 16, a
  uniform struct member at an offset the rules reject) is a :class:`WgslError` naming the
  struct, the member and the line, never a silently different layout.
- :func:`pack_struct` writes Python values into those bytes, padding included.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .syntax import Alias, DependsOnOverride, Scope, Struct, Token, WgslError, host_number, join, tokenize

__all__ = ["Field", "Layout", "layout", "pack_struct"]

# -- layout ------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Field:
    """A struct member laid out: ``size``/``align`` are the member's (``@size``/``@align``
    included), ``layout`` its type's."""

    name: str
    type: str
    offset: int
    size: int
    align: int
    layout: Layout


@dataclass(frozen=True, slots=True)
class Layout:
    """A type laid out. ``type`` is its text with aliases and sizes resolved (``vec4f`` reads
    ``vec4<f32>``). ``scalar`` is the scalar of a scalar, atomic, vector or matrix; ``count``
    the components of a vector, the columns of a matrix, the elements of an array (None:
    runtime-sized); ``stride`` an array's element stride or a matrix's column stride;
    ``element`` an array's element or a matrix's column. A runtime-sized array's ``size`` is
    its stride (one element: WebGPU's minimum binding size counts one)."""

    type: str
    kind: str  # "scalar", "atomic", "vector", "matrix", "array" or "struct"
    align: int
    size: int
    scalar: str | None = None
    count: int | None = None
    stride: int | None = None
    element: Layout | None = None
    fields: tuple[Field, ...] = ()

    @property
    def runtime_sized(self) -> bool:
        if self.kind == "array":
            return self.count is None
        return self.kind == "struct" and self.fields[-1].layout.runtime_sized


_SCALARS = {"f32": "<f", "i32": "<i", "u32": "<I", "f16": "<e", "bool": ""}
_SHORTHAND = re.compile(r"(vec[234]|mat[234]x[234])([fiuh])")
_SPACES = ("uniform", "storage", "workgroup", "private", "function")


def _round_up(align: int, n: int) -> int:
    return -(-n // align) * align


def _template(text: str, where: str) -> tuple[str, list[str]]:
    """``array<vec4<f32>, 8>`` -> ``("array", ["vec4<f32>", "8"])``."""
    tokens = tokenize(text)
    if not tokens or tokens[0].kind != "ident":
        raise WgslError(f"{where}: {text!r} is not a type")
    if len(tokens) == 1:
        return tokens[0].text, []
    if tokens[1].text != "<" or tokens[-1].text != ">":
        raise WgslError(f"{where}: {text!r} is not a type")
    args: list[list[Token]] = [[]]
    depth = 0
    for tok in tokens[2:-1]:
        depth += (tok.text in ("<", "(", "[")) - (tok.text in (">", ")", "]"))
        if tok.text == "," and depth == 0:
            args.append([])
        else:
            args[-1].append(tok)
    return tokens[0].text, [join(a) for a in args if a]


def layout(type_text: str, module: Scope, address_space: str = "storage",
           constants: Mapping[str, Any] | None = None, *, overrides: bool = True) -> Layout:
    """``type_text`` laid out as the spec lays it out in ``address_space``. Array sizes given by
    overrides (``var<workgroup>`` only) take ``constants``, else the overrides' defaults; with
    ``overrides=False`` they raise :class:`DependsOnOverride` instead."""
    if address_space not in _SPACES:
        raise WgslError(f"address space {address_space!r} is not one of {', '.join(_SPACES)}")
    layouter = _Layouter(module, address_space, constants, overrides and address_space == "workgroup")
    return layouter.lay(type_text, type_text, ())


class _Layouter:
    def __init__(self, module: Scope, space: str, constants: Mapping[str, Any] | None, overrides: bool) -> None:
        self.module, self.space, self.constants, self.overrides = module, space, constants, overrides
        # "Address Space Layout Constraints": unless the implementation supports the language
        # extension uniform_buffer_standard_layout (a module says it needs it with `requires`),
        # the uniform address space adds RequiredAlignOf = roundUp(16, AlignOf) for arrays and
        # structs, array strides a multiple of 16, and 16-rounded room after a struct member.
        # The spec makes these constraints (violations are shader-creation errors), not rules
        # that change offsets: so they are checked here, and never applied.
        self.std140 = space == "uniform" and "uniform_buffer_standard_layout" not in module.requires

    def lay(self, text: str, where: str, stack: tuple[str, ...]) -> Layout:
        name, args = _template(text, where)
        found = self.module._names.get(name)
        if isinstance(found, Alias) and not args:
            return self.lay(found.type, where, stack)
        if isinstance(found, Struct) and not args:
            if name in stack:
                raise WgslError(f"{where}: struct {name} contains itself")
            return self.struct(found, (*stack, name))
        short = _SHORTHAND.fullmatch(name)
        if short and not args:
            kind = {"f": "f32", "i": "i32", "u": "u32", "h": "f16"}[short.group(2)]
            return self.lay(f"{short.group(1)}<{kind}>", where, stack)
        if name in _SCALARS and not args:
            return self.scalar(name, where)
        if name == "atomic" and len(args) == 1:
            inner = self.lay(args[0], where, stack)
            # atomic<f32>: wgpu-native's float atomics (the device feature shader-float32-atomic).
            if inner.type not in ("i32", "u32", "f32") or self.space not in ("storage", "workgroup"):
                raise WgslError(f"{where}: atomic<{inner.type}> is only allowed as atomic<i32|u32> "
                                f"(or atomic<f32> with float atomics) in storage or workgroup memory, "
                                f"not {self.space}")
            return Layout(f"atomic<{inner.type}>", "atomic", 4, 4, inner.type)
        if re.fullmatch(r"vec[234]", name) and len(args) == 1:
            n, inner = int(name[3]), self.lay(args[0], where, stack)
            if inner.kind != "scalar":
                raise WgslError(f"{where}: {text!r}: a vector's components must be scalars")
            # vec2: align 2*s, vec3 and vec4: align 4*s; size n*s ("Alignment and Size").
            return Layout(f"{name}<{inner.type}>", "vector", (2 if n == 2 else 4) * inner.size,
                          n * inner.size, inner.type, n)
        if re.fullmatch(r"mat[234]x[234]", name) and len(args) == 1:
            columns, rows = int(name[3]), int(name[5])
            column = self.lay(f"vec{rows}<{args[0]}>", where, stack)
            if column.scalar not in ("f32", "f16"):
                raise WgslError(f"{where}: {text!r}: matrices hold f32 or f16")
            # matCxR is laid out as array<vecR, C>: align of vecR, column stride
            # roundUp(AlignOf(vecR), SizeOf(vecR)) ("Internal Layout of Values").
            stride = _round_up(column.align, column.size)
            return Layout(f"{name}<{column.scalar}>", "matrix", column.align, columns * stride,
                          column.scalar, columns, stride, column)
        if name == "array" and len(args) in (1, 2):
            return self.array(args, where, stack)
        if name.startswith(("texture", "sampler")):
            raise WgslError(f"{where}: {text} is a handle (texture or sampler): it has no memory layout")
        raise WgslError(f"{where}: unknown type {text!r}")

    def scalar(self, name: str, where: str) -> Layout:
        if name == "bool" and self.space in ("uniform", "storage"):
            raise WgslError(f"{where}: bool is not host-shareable, so it cannot be in a {self.space} "
                            "buffer (use u32)")
        if name == "f16" and "f16" not in self.module.enables:
            raise WgslError(f"{where}: f16 needs 'enable f16;' at the top of the module")
        size = 2 if name == "f16" else 4
        return Layout(name, "scalar", size, size, name)

    def array(self, args: list[str], where: str, stack: tuple[str, ...]) -> Layout:
        element = self.lay(args[0], f"{where} (array element)", stack)
        if element.runtime_sized:
            raise WgslError(f"{where}: an array's element cannot be runtime-sized")
        if len(args) == 1 and self.space != "storage":
            raise WgslError(f"{where}: a runtime-sized array is only allowed in storage buffers")
        stride = _round_up(element.align, element.size)  # "Alignment and Size": array<E, N>
        if self.std140 and stride % 16:
            raise WgslError(f"{where}: array<{element.type}> has element stride {stride}, but in the "
                            "uniform address space an array's stride must be a multiple of 16 (wrap "
                            "the element in a struct with @size(16), or use vec4)")
        if len(args) == 1:
            return Layout(f"array<{element.type}>", "array", element.align, stride, element.scalar,
                          None, stride, element)
        try:
            count = self.module.evaluate(args[1], self.constants, what=f"{where} (array size)",
                                         overrides=self.overrides)
        except DependsOnOverride as needs:
            if self.space == "workgroup":  # reflect asked for the size from consts alone
                raise
            raise WgslError(f"{where}: array size {args[1]!r} uses override {needs.name!r}; only "
                            "var<workgroup> arrays may be sized by an override") from None
        if not isinstance(count, int) or count <= 0:
            raise WgslError(f"{where}: array size {args[1]!r} is {count!r}, not a positive integer")
        return Layout(f"array<{element.type}, {count}>", "array", element.align, count * stride,
                      element.scalar, count, stride, element)

    def struct(self, decl: Struct, stack: tuple[str, ...]) -> Layout:
        fields: list[Field] = []
        end = 0
        for i, member in enumerate(decl.members):
            where = f"struct {decl.name} (line {decl.line}), member {member.name!r} (line {member.line})"
            inner = self.lay(member.type, where, stack)
            if inner.runtime_sized and i != len(decl.members) - 1:
                raise WgslError(f"{where}: a runtime-sized member must be the struct's last")
            align = inner.align if member.align is None else member.align
            # @align(n): positive, a power of two (as naga and Tint demand), and outside the
            # uniform address space a multiple of RequiredAlignOf(T) (the spec's `align`).
            if member.align is not None and (align <= 0 or align & (align - 1)
                                             or (self.space != "uniform" and align % inner.align)):
                raise WgslError(f"{where}: @align({align}) must be a power of two and a multiple of "
                                f"{inner.align}, the alignment of {inner.type}")
            size = inner.size if member.size is None else member.size
            if member.size is not None and (size < inner.size or size <= 0 or inner.runtime_sized):
                raise WgslError(f"{where}: @size({size}) must be at least {inner.size}, the size of "
                                f"{inner.type}, and cannot be on a runtime-sized array")
            offset = _round_up(align, end)  # OffsetOfMember ("Structure Member Layout")
            required = _round_up(16, inner.align) if self.std140 and inner.kind in ("array", "struct") else inner.align
            if offset % required:
                raise WgslError(f"{where}: {inner.type} is at offset {offset}, but in the {self.space} "
                                f"address space it must be at a multiple of {required} (add @align({required}))")
            if self.std140 and fields and fields[-1].layout.kind == "struct":
                room = _round_up(16, fields[-1].layout.size)
                if offset - fields[-1].offset < room:
                    raise WgslError(f"{where}: in the uniform address space a struct member "
                                    f"({fields[-1].name!r}) must be followed by at least {room} bytes, "
                                    f"but {member.name!r} starts {offset - fields[-1].offset} bytes after "
                                    f"it (add @align(16) to {member.name!r})")
            fields.append(Field(member.name, inner.type, offset, size, align, inner))
            end = offset + size
        align = max(f.align for f in fields)
        return Layout(decl.name, "struct", align, _round_up(align, end), fields=tuple(fields))


# -- packing -----------------------------------------------------------------------------------

def pack_struct(module: Scope, type_text: str, values: Any, address_space: str = "uniform",
                constants: Mapping[str, Any] | None = None) -> bytes:
    """``values`` packed as ``type_text`` (a struct's name, or any host-shareable type) is laid out
    in ``address_space``: padding zeroed, the buffer as long as the type (a uniform's rounded up
    to a multiple of 16 bytes; a runtime-sized array as long as the values given).

    A struct takes a mapping of its fields (nested mappings for nested structs) or a sequence
    in field order; vectors, arrays and matrices take sequences (a matrix: its columns, or all
    its values column after column). Numbers may be Python ints, floats, bools, or objects with
    ``.item()``, ``__index__`` or ``__float__`` (numpy scalars): a float field given an int takes
    it as a float; an integer field given a float takes it only if it is integral and in range.
    """
    if address_space not in ("uniform", "storage"):
        raise WgslError(f"pack_struct packs uniform or storage buffers, not {address_space!r}")
    top = layout(type_text, module, address_space, constants)
    out = bytearray(top.size)
    end = _put(out, top, values, 0, top.type)
    size = max(top.size, _round_up(top.align, end))
    size = _round_up(16, size) if address_space == "uniform" else size
    return bytes(out.ljust(size, b"\0"))


def _put(out: bytearray, lay: Layout, value: Any, offset: int, path: str) -> int:
    """Writes ``value`` at ``offset``; returns the offset just past what it wrote."""
    if lay.kind in ("scalar", "atomic"):
        assert lay.scalar is not None
        return _put_scalar(out, lay.scalar, value, offset, path)
    if lay.kind == "struct":
        if isinstance(value, Mapping):
            items = by_field(value, [f.name for f in lay.fields], f"{path}", f"struct {lay.type}")
        else:
            items = _items(value, len(lay.fields), path, f"struct {lay.type}", exact=True)
        end = offset + lay.size
        for f, item in zip(lay.fields, items, strict=True):
            end = max(end, _put(out, f.layout, item, offset + f.offset, f"{path}.{f.name}"))
        return end
    if lay.kind == "matrix":
        assert lay.element is not None and lay.count is not None and lay.stride is not None
        items = _items(value, None, path, lay.type, exact=False)
        rows = lay.element.count or 0
        if len(items) == lay.count * rows and not any(_is_sequence(i) for i in items):
            items = [items[c * rows:(c + 1) * rows] for c in range(lay.count)]  # flat, column-major
        items = _items(items, lay.count, path, f"{lay.type} (its {lay.count} columns)", exact=True)
        for c, column in enumerate(items):
            _put(out, lay.element, column, offset + c * lay.stride, f"{path}[{c}]")
        return offset + lay.size
    if lay.kind == "vector":
        assert lay.scalar is not None
        items = _items(value, lay.count, path, lay.type, exact=True)
        step = 2 if lay.scalar == "f16" else 4
        for i, item in enumerate(items):
            _put_scalar(out, lay.scalar, item, offset + i * step, f"{path}[{i}]")
        return offset + lay.size
    assert lay.element is not None and lay.stride is not None
    items = _items(value, lay.count, path, lay.type, exact=lay.count is not None)
    for i, item in enumerate(items):
        _put(out, lay.element, item, offset + i * lay.stride, f"{path}[{i}]")
    return offset + len(items) * lay.stride


def by_field(values: Mapping[str, Any], names: Sequence[str], path: str, what: str) -> list[Any]:
    """``values`` (field name -> value) in the order of ``names``; a WgslError naming the fields
    missing and unknown, and those ``what`` (a struct, say) has."""
    missing = [n for n in names if n not in values]
    unknown = [str(n) for n in values if n not in names]
    if missing or unknown:
        problems = "; ".join(p for p in (missing and f"missing field(s) {', '.join(missing)}",
                                         unknown and f"unknown field(s) {', '.join(unknown)}") if p)
        raise WgslError(f"{path}: {problems} ({what} has {', '.join(names)})")
    return [values[n] for n in names]


def _is_sequence(value: Any) -> bool:
    return hasattr(value, "__len__") and hasattr(value, "__iter__") and not isinstance(value, (str, bytes, Mapping))


def _items(value: Any, count: int | None, path: str, what: str, *, exact: bool) -> list[Any]:
    if not _is_sequence(value):
        raise WgslError(f"{path}: {what} expects a sequence, got {value!r}")
    items = list(value)
    if exact and len(items) != count:
        raise WgslError(f"{path}: {what} expects {count} values, got {len(items)}")
    return items


_RANGES = {"u32": (0, 2**32), "i32": (-(2**31), 2**31)}


def _put_scalar(out: bytearray, scalar: str, value: Any, offset: int, path: str) -> int:
    number = host_number(value, path, f"a number ({scalar})")
    fmt = _SCALARS[scalar]
    if len(out) < offset + 4:  # a runtime-sized array grows the buffer
        out.extend(bytes(offset + 4 - len(out)))
    try:
        if scalar in ("f32", "f16"):
            struct.pack_into(fmt, out, offset, float(number))  # an int (a JS 2.0) becomes 2.0
            return offset + struct.calcsize(fmt)
    except OverflowError:
        raise WgslError(f"{path}: {number!r} is out of range for {scalar}") from None
    if isinstance(number, float):
        if not number.is_integer():
            raise WgslError(f"{path}: {scalar} field given {number!r}, which is not an integer")
        number = int(number)
    low, high = _RANGES[scalar]
    if not low <= number < high:
        raise WgslError(f"{path}: {number} is out of range for {scalar} [{low}, {high})")
    struct.pack_into(fmt, out, offset, number)
    return offset + 4
