"""Keys, anchor(), and the plan: pure values, no device."""

from __future__ import annotations

import dataclasses
import json
import struct

import pytest
from fakes import kernel

from wgtune import ConfigError, Group, Key, Plan, TunableSet, anchor
from wgtune.sets.args import pack_params

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core

# -- anchor ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "expected"),
    [(0, 1), (1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (1023, 1024), (1024, 1024), (1025, 2048)],
)
def test_anchor_rounds_up_to_the_next_power_of_two(x, expected):
    assert anchor(x) == expected


def test_anchor_is_exact_for_every_power_of_two_up_to_2_to_the_62():
    for exponent in range(63):
        assert anchor(2**exponent) == 2**exponent
        assert anchor(2**exponent + 1) == 2 ** (exponent + 1)


def test_anchor_of_2_to_the_29_is_2_to_the_29_not_2_to_the_30():
    assert anchor(2**29) == 2**29
    assert anchor(2**29 + 1) == 2**30
    assert anchor(2**29 - 1) == 2**29


@pytest.mark.parametrize(("x", "expected"), [(0, 1), (1, 1), (2, 3), (3, 3), (4, 9), (9, 9), (10, 27), (3**20, 3**20)])
def test_anchor_with_base_3_rounds_up_to_a_power_of_3(x, expected):
    assert anchor(x, base=3) == expected


def test_anchor_clamps_to_max_and_min():
    assert anchor(5000, max=4096) == 4096
    assert anchor(5000, max=3000) == 3000
    assert anchor(3, min=16) == 16
    assert anchor(100, min=16, max=64) == 64
    assert anchor(32, min=16, max=64) == 32


@pytest.mark.parametrize(
    ("args", "kwargs", "error"),
    [
        ((-1,), {}, ValueError),
        ((2.0,), {}, TypeError),
        (("8",), {}, TypeError),
        ((True,), {}, TypeError),
        ((None,), {}, TypeError),
        ((8,), {"base": 1}, ValueError),
        ((8,), {"base": 0}, ValueError),
    ],
)
def test_anchor_rejects_bad_input(args, kwargs, error):
    with pytest.raises(error):
        anchor(*args, **kwargs)


class Index:
    """Stands in for a numpy integer (these tests run where numpy is not): an int by ``__index__``."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


def test_anchor_takes_what_python_takes_as_an_index_such_as_numpys_integers():
    assert anchor(Index(1000)) == 1024
    assert type(anchor(Index(3))) is int


# -- keys ------------------------------------------------------------------------------------


def test_key_integers_are_those_the_stores_and_exports_read_back():
    assert Key({"h": 2**63 - 1, "l": -(2**63)}).as_dict() == {"h": 2**63 - 1, "l": -(2**63)}
    for value in (2**63, -(2**63) - 1, 10**400):
        with pytest.raises(ValueError, match=r"key field 'h' is .*: key integers must lie in \[-2\*\*63, 2\*\*63\)"):
            Key({"h": value})


def test_keys_with_the_same_fields_in_any_order_are_equal_and_hash_alike():
    a = Key({"n": 1024, "dtype": "f32", "transposed": False})
    b = Key([("transposed", False), ("dtype", "f32"), ("n", 1024)])
    assert a == b
    assert hash(a) == hash(b)
    assert a.to_json() == b.to_json()
    assert {a: "winner"}[b] == "winner"


def test_keys_with_different_values_differ():
    assert Key({"n": 1024}) != Key({"n": 2048})
    assert Key({"n": 1024}) != Key({"m": 1024})


def test_a_key_is_frozen():
    key = Key({"n": 1})
    with pytest.raises((AttributeError, TypeError)):
        key.n = 2  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        key[0] = ("n", 2)  # type: ignore[index]


def test_a_key_round_trips_through_json():
    key = Key({"n": 1024, "dtype": "f32", "alpha": 0.5, "flag": True, "layout": None})
    text = key.to_json()
    assert json.loads(text) == {"n": 1024, "dtype": "f32", "alpha": 0.5, "flag": True, "layout": None}
    assert Key.from_json(text) == key
    assert Key.from_json(json.loads(text)) == key
    assert Key.from_json(text).to_json() == text


def test_a_key_reads_as_its_fields():
    key = Key({"n": 8, "dtype": "f32"})
    assert repr(key) == "Key(dtype='f32', n=8)"
    assert str(key) == "dtype=f32, n=8"
    assert key.as_dict() == {"dtype": "f32", "n": 8}
    assert Key() == Key({})


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"n": [1, 2]}, TypeError),
        ({"n": {"a": 1}}, TypeError),
        ({"n": (1, 2)}, TypeError),
        ({"n": b"x"}, TypeError),
        ({"n": float("nan")}, ValueError),
        ({"n": float("inf")}, ValueError),
        ({"": 1}, TypeError),
        ({3: 1}, TypeError),
        ([("n", 1), ("n", 2)], ValueError),
    ],
)
def test_a_key_rejects_bad_fields_and_values(fields, error):
    with pytest.raises(error):
        Key(fields)


def test_key_from_json_rejects_anything_but_an_object():
    with pytest.raises(ValueError):
        Key.from_json("[1, 2]")
    with pytest.raises(ValueError):
        Key.from_json("not json")


# -- the plan --------------------------------------------------------------------------------

KEY = Key({"n": 1024})


def test_a_plan_without_groups_puts_every_candidate_in_the_first_batch():
    plan = Plan((kernel("a"), kernel("b", priority=5), kernel("c")), KEY)
    assert plan.next() == [0, 1, 2]
    assert plan.next() == []
    assert plan.skipped == []


def test_a_plan_runs_groups_by_descending_priority_and_levels_within_each_group():
    low, high = Group("low", priority=1), Group("high", priority=10)
    candidates = (
        kernel("low-a", group=low),
        kernel("high-1", group=high, priority=1),
        kernel("high-5", group=high, priority=5),
        kernel("low-b", group=low),
        kernel("high-5b", group=high, priority=5),
    )
    plan = Plan(candidates, KEY)
    assert plan.remaining() == [[2, 4], [1], [0, 3]]
    assert plan.next() == [2, 4]
    assert plan.next() == [1]
    assert plan.next() == [0, 3]
    assert plan.next() == []


def test_ungrouped_candidates_join_the_first_batch_of_the_groups():
    group = Group("g", priority=3)
    plan = Plan((kernel("g1", group=group, priority=1), kernel("free"), kernel("g2", group=group, priority=2)), KEY)
    assert plan.next() == [1, 2]
    assert plan.next() == [0]


def test_groups_of_equal_priority_stay_apart_in_the_order_they_appear():
    first, second = Group("first", 1), Group("second", 1)
    plan = Plan((kernel("s", group=second), kernel("f", group=first)), KEY)
    assert plan.remaining() == [[0], [1]]


def test_a_negative_group_priority_skips_the_whole_group():
    off, on = Group("off", priority=-1), Group("on", priority=0)
    plan = Plan((kernel("a", group=off), kernel("b", group=on), kernel("c", group=off, priority=9)), KEY)
    assert plan.remaining() == [[1]]
    assert plan.skipped == [0, 2]


def test_a_negative_priority_within_a_group_or_without_one_skips_the_candidate():
    group = Group("g", priority=1)
    plan = Plan((kernel("a", priority=-1), kernel("b", group=group, priority=-3), kernel("c", group=group)), KEY)
    assert plan.remaining() == [[2]]
    assert plan.skipped == [0, 1]


def test_priorities_can_be_functions_of_the_key():
    big_only = Group("big", priority=lambda key: 5 if key.as_dict()["n"] >= 1024 else -1)
    candidates = (
        kernel("small", priority=lambda key: 0 if key.as_dict()["n"] < 1024 else -1),
        kernel("tiled", group=big_only),
    )
    assert Plan(candidates, Key({"n": 1024})).remaining() == [[1]]
    assert Plan(candidates, Key({"n": 16})).remaining() == [[0]]


def test_a_group_priority_function_is_called_once_per_plan():
    calls = []

    def priority(key):
        calls.append(key)
        return 1

    group = Group("g", priority=priority)
    Plan((kernel("a", group=group), kernel("b", group=group), kernel("c", group=group)), KEY)
    assert calls == [KEY]


def test_an_exhausted_plan_keeps_returning_an_empty_batch():
    plan = Plan((kernel("a"),), KEY)
    assert plan.next() == [0]
    assert plan.next() == []
    assert plan.next() == []


def test_a_plan_that_skips_everything_is_empty_from_the_start():
    plan = Plan((kernel("a", priority=-1), kernel("b", group=Group("g", -2))), KEY)
    assert plan.next() == []
    assert plan.skipped == [0, 1]


def test_a_group_is_a_frozen_value():
    group = Group("g", 2)
    assert group == Group("g", 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        group.priority = 3  # type: ignore[misc]


# -- candidates and sets ---------------------------------------------------------------------


def test_the_set_checksum_changes_with_any_candidates_code_and_with_their_order():
    base = TunableSet("s", [kernel("a"), kernel("b")], lambda args: {})
    same = TunableSet("s", [kernel("a"), kernel("b")], lambda args: {"other": 1})
    assert base.checksum == same.checksum
    variants = [
        [kernel("a", wgsl="// changed"), kernel("b")],
        [kernel("a", workgroup_size=(128, 1, 1)), kernel("b")],
        [kernel("a", workgroup_storage=4), kernel("b")],
        [kernel("a", entry_point="other"), kernel("b")],
        [kernel("b"), kernel("a")],
        [kernel("a"), kernel("b"), kernel("c")],
    ]
    assert len({base.checksum} | {TunableSet("s", v, lambda args: {}).checksum for v in variants}) == 7


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda: TunableSet("s", [], lambda a: {}), "no candidates"),
        (lambda: TunableSet("s", [kernel("a"), kernel("a")], lambda a: {}), "repeat: a"),
        (lambda: TunableSet("", [kernel("a")], lambda a: {}), "non-empty name"),
        (lambda: TunableSet("s", ["a"], lambda a: {}), "is not a Kernel"),
        (lambda: TunableSet("s", [kernel("a")], lambda a: {}, output_type="q"), "output_type"),
        (lambda: kernel(""), "non-empty name"),
        (lambda: kernel("k", workgroup_size=(0, 1, 1)), "workgroup_size"),
        (lambda: kernel("k", workgroup_size=(64, 1)), "workgroup_size"),
        (lambda: kernel("k", grid=None), "grid"),
    ],
)
def test_bad_candidates_and_sets_are_config_errors(build, words):
    with pytest.raises(ConfigError, match=words):
        build()


def test_params_pack_as_a_16_byte_aligned_uniform_buffer():
    assert pack_params(()) == bytes(16)
    packed = pack_params((7, -1, 0.5, 2**32 - 1, 1, 2))
    assert len(packed) == 32
    assert struct.unpack("<IifIII", packed[:24]) == (7, -1, 0.5, 2**32 - 1, 1, 2)
    for bad in ((2**32,), (-(2**31) - 1,), (True,), ("3",)):
        with pytest.raises(ConfigError):
            pack_params(bad)
