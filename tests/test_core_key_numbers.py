"""Numbers in keys: an integral float is the int it equals (JavaScript has one number type, and JSON
read back may say 4096.0 where Python says 4096), while the text of keys already stored never moves."""

from __future__ import annotations

import json

import pytest
from fakes import FakeDevice, call, make_set, make_tuner

from wgtune import ConfigError, Hit, Key, StoredEntry
from wgtune.key import make_key
from wgtune.store.contract import Store

# Pure core on the fake device: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core


class TextStore(Store):
    """A store whose slots are the key's canonical text, as SQLite's rows and IndexedDB's records are:
    two keys share a winner here only if their ``to_json`` is the same."""

    where = "text slots"
    read_by_key = True

    def __init__(self) -> None:
        self.namespace: dict = {}
        self.slots: dict[tuple[str, str], StoredEntry] = {}

    def load(self) -> list[StoredEntry]:
        return list(self.slots.values())

    def lookup(self, set_name: str, key: Key) -> StoredEntry | None:
        return self.slots.get((set_name, key.to_json()))

    def save(self, entry: StoredEntry) -> None:
        self.slots[(entry.set_name, entry.key.to_json())] = entry

    def clear(self) -> None:
        self.slots.clear()


# -- the text of keys already stored -------------------------------------------------------------

# Each key's to_json() as wgtune wrote it before integral floats became ints, copied from that
# release's output: these are the slots of winners already stored, so not one byte may change.
STORED_TEXTS = [
    ({"n": 1024, "dtype": "f32", "transposed": False}, '{"dtype":"f32","n":1024,"transposed":false}'),
    ({"m": -7, "k": 2**63 - 1, "flag": True, "layout": None, "s": 'ü"x'},
     '{"flag":true,"k":9223372036854775807,"layout":null,"m":-7,"s":"\\u00fc\\"x"}'),
    ({"alpha": 0.5, "n": 1}, '{"alpha":0.5,"n":1}'),
    ({}, "{}"),
    ({"b": False, "i": 0, "f": 1e300, "g": 1.5e-7}, '{"b":false,"f":1e+300,"g":1.5e-07,"i":0}'),
    ({"l": -(2**63), "t": True, "z": 0}, '{"l":-9223372036854775808,"t":true,"z":0}'),
]


@pytest.mark.parametrize(("fields", "text"), STORED_TEXTS)
def test_the_text_of_int_str_bool_and_fractional_keys_is_what_it_was(fields, text):
    key = Key(fields)
    assert key.to_json() == text
    assert Key.from_json(text).to_json() == text


# -- integral floats -------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [4096.0, 0.0, -0.0, 1.0, -3.0, 1e16, 2.0**62, -(2.0**63)])
def test_an_integral_float_is_the_int_it_equals(value):
    as_int, as_float = Key({"n": int(value)}), Key({"n": value})
    assert as_float.to_json() == as_int.to_json()
    assert as_float == as_int
    assert hash(as_float) == hash(as_int)
    assert type(as_float.as_dict()["n"]) is int
    assert repr(as_float) == repr(as_int)
    assert str(as_float) == str(as_int)


def test_4096_and_4096_point_0_are_one_key_with_one_text():
    assert Key({"n": 4096.0, "dtype": "f32"}).to_json() == Key({"n": 4096, "dtype": "f32"}).to_json() \
        == '{"dtype":"f32","n":4096}'
    assert Key({"n": 4096.0}) == Key({"n": 4096})
    assert repr(Key({"n": 4096.0})) == "Key(n=4096)"
    assert make_key("s", [("n", 4096.0)]).to_json() == '{"n":4096}'


def test_a_key_read_back_from_json_that_says_4096_point_0_is_the_int_key():
    assert Key.from_json('{"n":4096.0}').to_json() == '{"n":4096}'
    assert Key.from_json({"n": 4096.0}) == Key({"n": 4096})
    entry = StoredEntry("s", Key({"n": 4096.0}), "c0ffee", 0, "a")
    assert json.dumps(entry.to_json()["key"]) == '{"n": 4096}'
    assert StoredEntry.from_json({**entry.to_json(), "key": {"n": 4096.0}}).key.to_json() == '{"n":4096}'


@pytest.mark.parametrize("value", [0.5, 1.5e-7, -2.25, 4096.5])
def test_a_non_integral_float_stays_a_float(value):
    key = Key({"x": value})
    assert type(key.as_dict()["x"]) is float
    assert key.to_json() == json.dumps({"x": value}, separators=(",", ":"))


@pytest.mark.parametrize("value", [2.0**63, -(2.0**64), 1e300, 1.1805916207174113e21])
def test_an_integral_float_past_the_key_int_range_stays_the_float_it_was(value):
    # Its int would be refused (keys hold 64-bit ints), and it was accepted as a float before.
    key = Key({"x": value})
    assert type(key.as_dict()["x"]) is float
    assert key.to_json() == json.dumps({"x": value}, separators=(",", ":"))


def test_bools_stay_bools_and_floats_never_become_bools():
    assert Key({"f": True}).to_json() == '{"f":true}'
    assert Key({"f": False}).to_json() == '{"f":false}'
    assert type(Key({"f": True}).as_dict()["f"]) is bool
    assert Key({"f": 1.0}).to_json() == '{"f":1}'
    assert Key({"f": 0.0}).to_json() == '{"f":0}'
    assert type(Key({"f": 1.0}).as_dict()["f"]) is int
    assert type(Key({"f": 0.0}).as_dict()["f"]) is int


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinities_are_still_refused(value):
    with pytest.raises(ValueError, match="finite"):
        Key({"n": value})
    with pytest.raises(ConfigError, match="finite"):
        make_key("s", {"n": value})


@pytest.mark.parametrize("value", [[4096.0], (4096.0,), {"a": 4096.0}])
def test_containers_are_still_refused_whatever_they_hold(value):
    with pytest.raises(TypeError):
        Key({"n": value})


# -- the tuner ---------------------------------------------------------------------------------------


def test_a_winner_tuned_for_4096_is_a_hit_for_4096_point_0_from_a_store_of_text_slots():
    store = TextStore()
    device = FakeDevice()
    tunables = make_set("a", "b")
    first = make_tuner(device, store=store)
    first.execute(tunables, call(device, [1.0], n=4096))
    assert len(first.records.records) == 1
    assert list(store.slots) == [(tunables.name, '{"n":4096}')]

    device = FakeDevice()
    again = make_tuner(device, store=store)  # another process, or the page: the float asks
    args = call(device, [1.0], n=4096.0)
    key = again.key(tunables, args)
    assert key.to_json() == '{"n":4096}'
    assert again.check_tune(tunables, key, args) == Hit(first.fastest(tunables, Key({"n": 4096})).index)
    assert device.profile_count == 0
    assert again.records.records == []
    assert list(store.slots) == [(tunables.name, '{"n":4096}')]


def test_a_winner_read_back_from_json_as_4096_point_0_serves_the_int_call():
    device = FakeDevice()
    tunables = make_set("a", "b")
    store = TextStore()
    stored = StoredEntry(tunables.name, Key({"n": 4096}), tunables.checksum, 1, "b", checked=True).to_json()
    store.save(StoredEntry.from_json({**stored, "key": {"n": 4096.0}}))  # as JSON from JavaScript may say
    tuner = make_tuner(device, store=store)
    assert tuner.execute(tunables, call(device, [1.0], n=4096)).name == "b"
    assert device.profile_count == 0
    assert tuner.records.records == []


def test_a_tune_asked_first_with_4096_point_0_stores_the_int_text():
    device = FakeDevice()
    tunables = make_set("a", "b")
    store = TextStore()
    tuner = make_tuner(device, store=store)
    tuner.execute(tunables, call(device, [1.0], n=4096.0))
    tuner.execute(tunables, call(device, [1.0], n=4096))
    assert len(tuner.records.records) == 1
    assert list(store.slots) == [(tunables.name, '{"n":4096}')]


# -- rows an older wgtune wrote under an integral float's text -------------------------------------


def test_a_slot_written_under_an_integral_floats_text_is_the_ints_keys_slot_and_no_other() -> None:
    key = Key({"n": 4096, "dtype": "f32"})
    assert key.is_slot('{"dtype":"f32","n":4096}')
    assert key.is_slot('{"dtype":"f32","n":4096.0}')  # what an older wgtune stored for it
    assert not key.is_slot('{"dtype":"f32","n":4097.0}')
    assert not key.is_slot('{"dtype":"f16","n":4096}')
    for damaged in ('{"n":', "[]", "null", 7, None, '{"n":[1]}'):
        assert not key.is_slot(damaged)
