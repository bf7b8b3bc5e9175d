import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from x402lab.errors import ProtocolError
from x402lab.x402 import decode_header, encode_header

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
json_objects = st.dictionaries(st.text(), json_values, max_size=6)


def test_encode_is_compact_standard_padded_base64():
    value = encode_header({"a": 1, "b": [1, 2], "c": "é"})
    raw = base64.b64decode(value, validate=True)
    assert raw == '{"a":1,"b":[1,2],"c":"é"}'.encode()
    assert len(value) % 4 == 0


@given(json_objects)
def test_round_trip(obj):
    assert decode_header(encode_header(obj)) == obj


@given(json_objects)
def test_lenient_forms_decode_the_same(obj):
    standard = encode_header(obj)
    urlsafe = standard.replace("+", "-").replace("/", "_")
    unpadded = urlsafe.rstrip("=")
    spaced = "  " + "\n".join(unpadded[i : i + 10] for i in range(0, len(unpadded), 10)) + " \r\n"
    for form in (urlsafe, unpadded, spaced, standard.encode("ascii")):
        assert decode_header(form) == obj


def test_decodes_urlsafe_chars_that_standard_base64_would_drop():
    # "?>?" encodes to "Pz4/" in standard and "Pz4_" in urlsafe base64.
    obj = {"k": "?>?>?>"}
    urlsafe = base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    assert "_" in urlsafe or "-" in urlsafe
    assert decode_header(urlsafe) == obj


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("", "bad base64"),
        ("   ", "bad base64"),
        ("!!!notbase64", "bad base64"),
        ("abcde", "bad base64"),
        ("é", "bad base64"),
        (b"\xff\xfe", "bad base64"),
        (base64.b64encode(b"\xff\xfe\xfd").decode(), "not UTF-8"),
        (base64.b64encode(b"{not json").decode(), "not JSON"),
        (base64.b64encode(b'{"a": NaN}').decode(), "not JSON"),
        (base64.b64encode(b"[1, 2]").decode(), "not an object"),
        (base64.b64encode(b'"text"').decode(), "not an object"),
    ],
)
def test_malformed_values_raise_protocol_error_naming_the_problem(value, words):
    with pytest.raises(ProtocolError, match=words):
        decode_header(value)


def test_error_message_does_not_echo_long_input():
    junk = "*" * 5000
    with pytest.raises(ProtocolError) as info:
        decode_header(junk)
    assert len(str(info.value)) < 100
    body = base64.b64encode(b"not json " + b"x" * 5000).decode()
    with pytest.raises(ProtocolError) as info:
        decode_header(body)
    assert len(str(info.value)) < 100


def test_non_string_input_is_a_protocol_error():
    with pytest.raises(ProtocolError):
        decode_header(123)  # type: ignore[arg-type]


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


@given(json_values, st.integers(min_value=0, max_value=6))
def test_deeper_than_agrees_with_the_exact_depth_whatever_the_strings_hold(value, limit):
    # Texts full of brackets inside strings are where counting them overstates the depth.
    from x402lab.x402.codec import deeper_than, nesting_depth

    text = json.dumps(value).encode()
    depth = _depth(value)
    assert nesting_depth(text) == depth
    assert deeper_than(text, limit) == (depth if depth > limit else None)


def test_a_header_nested_past_the_limit_is_refused_naming_its_depth():
    nested = encode_header({"a": json.loads("[" * 70 + "]" * 70)})
    with pytest.raises(ProtocolError, match="nested 71 levels deep"):
        decode_header(nested)
    # 100 brackets inside a string are no nesting: past the count, the exact pass lets it in.
    assert decode_header(encode_header({"a": "[" * 100}))["a"] == "[" * 100
