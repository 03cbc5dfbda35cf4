"""Kubernetes object names: DNS-1123 checks and Flyte's conversion of generated names.

Follows flyteplugins/go/tasks/pluginmachinery/utils/dns.go and pluginmachinery/encoding/encoder.go.
Shared by the plugin manager (object names) and the pod builders.
"""

from __future__ import annotations

import base64
import re
from typing import Final

__all__ = [
    "DNS1123_LABEL_MAX_LENGTH",
    "DNS1123_SUBDOMAIN_MAX_LENGTH",
    "convert_camel_case_to_kebab_case",
    "convert_to_dns1123_subdomain_compatible",
    "encode_base32",
    "fixed_length_unique_id",
    "is_dns1123_label",
    "is_dns1123_subdomain",
]

DNS1123_SUBDOMAIN_MAX_LENGTH: Final = 253
DNS1123_LABEL_MAX_LENGTH: Final = 63
# The length Flyte 1 (master) reserves for the hash suffix of an over-long name.
_MAX_UNIQUE_ID_LENGTH: Final = 20

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_RE: Final = re.compile(rf"^{_LABEL}$")
_DNS1123_SUBDOMAIN_RE: Final = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_INVALID_RE: Final = re.compile(r"[^-.a-z0-9]")
_CAMEL_RE: Final = re.compile(r"([a-z0-9])([A-Z])")

# Flyte's base32 alphabet: lower-case letters then 1-6, so encoded ids are valid in names and labels.
_STD_B32: Final = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_FLYTE_B32: Final = b"abcdefghijklmnopqrstuvwxyz123456"
_TO_FLYTE_B32: Final = bytes.maketrans(_STD_B32, _FLYTE_B32)

# FNV-1a parameters by hash width (Go's hash/fnv New32a, New64a, New128a): (offset basis, prime).
_FNV1A: Final = {
    32: (0x811C9DC5, 0x01000193),
    64: (0xCBF29CE484222325, 0x100000001B3),
    128: (0x6C62272E07BB014262B821756295C58D, 0x0000000001000000000000000000013B),
}


def is_dns1123_subdomain(name: str) -> bool:
    return len(name) <= DNS1123_SUBDOMAIN_MAX_LENGTH and _DNS1123_SUBDOMAIN_RE.match(name) is not None


def is_dns1123_label(name: str) -> bool:
    return len(name) <= DNS1123_LABEL_MAX_LENGTH and _DNS1123_LABEL_RE.match(name) is not None


def convert_camel_case_to_kebab_case(name: str) -> str:
    """``PenPineappleApplePen`` → ``pen-pineapple-apple-pen``."""
    return _CAMEL_RE.sub(r"\1-\2", name).lower()


def encode_base32(data: bytes) -> str:
    """Flyte's ``encoding.Base32Encoder``: base32 with the alphabet ``a-z1-6`` and no padding."""
    return base64.b32encode(data).translate(_TO_FLYTE_B32).decode("ascii").rstrip("=")


def _fnv1a(data: bytes, bits: int) -> bytes:
    try:
        h, prime = _FNV1A[bits]
    except KeyError:
        raise ValueError(f"no FNV-1a hash of {bits} bits (32, 64 or 128)") from None
    mask = (1 << bits) - 1
    for byte in data:
        h = ((h ^ byte) * prime) & mask
    return h.to_bytes(bits // 8, "big")


def fixed_length_unique_id(input_id: str, max_length: int, *, hash_bits: int = 32) -> str:
    """Flyte's ``FixedLengthUniqueID``: the id itself when short enough, else ``f`` + base32(fnv1a(id)).

    ``hash_bits`` is Flyte's ``AlgorithmOption``: 32 (the default, an 8-character result), 64 (14 characters;
    launch-plan child execution names) or 128. Raises ValueError when even the hash does not fit.
    """
    if len(input_id) <= max_length:
        return input_id
    out = "f" + encode_base32(_fnv1a(input_id.encode(), hash_bits))
    if len(out) > max_length:
        raise ValueError("max Length is too small, cannot create an encoded string that is so small")
    return out


def convert_to_dns1123_subdomain_compatible(name: str) -> str:
    """Flyte's ``ConvertToDNS1123SubdomainCompatibleString``.

    A valid name is returned unchanged; otherwise camelCase becomes kebab-case, the name is lower-cased,
    characters outside ``[-.a-z0-9]`` are dropped, leading/trailing ``.``/``-`` trimmed, and a name longer
    than 253 characters keeps its first 232 characters plus ``-`` and a hash of the whole name. As in Flyte,
    the result is best effort: inner sequences such as ``a.-b`` are not repaired.
    """
    if is_dns1123_subdomain(name):
        return name
    name = convert_camel_case_to_kebab_case(name)
    name = _INVALID_RE.sub("", name.lower())
    name = name.strip(".-")
    if len(name) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        unique = fixed_length_unique_id(name, _MAX_UNIQUE_ID_LENGTH)
        name = name[: DNS1123_SUBDOMAIN_MAX_LENGTH - _MAX_UNIQUE_ID_LENGTH - 1] + "-" + unique
    return name
